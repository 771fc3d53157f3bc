"""SQUARED_DIFFERENCE, int8 (``squared_difference.cc``, docs/numerics.md §2.26).

ADD's structure with a square and a smaller headroom: both inputs are brought to a common scale
with a left shift of 7, subtracted, squared, and rescaled::

    a' = MBQM<1((q1 - zp1)·2**7, M1, sh1)        b' likewise
    out = clamp(MBQM<1((a' - b')², Mo, sho) + zp_out, -128, 127)

``MBQM<1`` is ``MultiplyByQuantizedMultiplierSmallerThanOneExp``; the real multipliers are
``s1/2m``, ``s2/2m`` and ``(2m)²/(2**14·s_out)`` with ``m = max(s1, s2)``
(:func:`~quantir.numerics.multipliers.squared_difference_multipliers`). ``|a' - b'| <= 255·2**7``,
so the square stays below 2**31. The op has no fused activation. Broadcasting follows numpy (LiteRT
2.3's ``BroadcastBinaryFunction4DSlow``, despite its name, matched numpy up to rank 7 when measured).

Prepare aborts (``TFLITE_CHECK``) unless every multiplier is in (0, 1): ``Mo < 1`` needs
``s_out > max(s1, s2)²/4096``; :func:`prepare_squared_difference` raises :class:`QKernelError`.
There is **no int16 kernel**: Prepare accepts int16 tensors, but Eval fails ("SquaredDifference only
supports FLOAT32 and INT32 now"), so int16 storage is refused here as well.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.numerics import multiply_by_quantized_multiplier_smaller_than_one_exp, saturate
from quantir.numerics.multipliers import squared_difference_multipliers
from quantir.runtime.qkernels._common import (
    INT8_VALUES,
    KernelParams,
    QKernelError,
    check_quantized,
    check_zero_point,
    pair_table_lookup,
)
from quantir.runtime.qkernels.add import quantize_smaller_than_one, rescale_input

__all__ = ["SquaredDifferenceParams", "prepare_squared_difference", "squared_difference"]

LEFT_SHIFT = 7


@dataclass(frozen=True)
class SquaredDifferenceParams(KernelParams):
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int
    output_zero_point: int


def prepare_squared_difference(input1_scale: float, input2_scale: float, output_scale: float,
                               output_zero_point: int, *, storage: Any = np.int8) -> SquaredDifferenceParams:
    """LiteRT's Prepare for int8; ``storage=np.int16`` is refused (module docstring)."""
    op = "squared_difference"
    if np.dtype(storage) != np.int8:
        raise QKernelError(f"{op}: LiteRT has no {np.dtype(storage).name} SQUARED_DIFFERENCE kernel (Eval fails: "
                           "'SquaredDifference only supports FLOAT32 and INT32 now'); keep it int8 or write "
                           "SUB followed by MUL")
    zp = check_zero_point(output_zero_point, op, "output zero point")
    m1, m2, mo = squared_difference_multipliers(input1_scale, input2_scale, output_scale, LEFT_SHIFT)
    q1 = quantize_smaller_than_one(m1, op, "input1")
    q2 = quantize_smaller_than_one(m2, op, "input2")
    qo = quantize_smaller_than_one(mo, op, "output")
    return SquaredDifferenceParams(*q1, *q2, *qo, zp)


def squared_difference(a: np.ndarray, b: np.ndarray, *, input1_zero_point: int, input2_zero_point: int,
                       output_zero_point: int, input1_multiplier: int, input1_shift: int, input2_multiplier: int,
                       input2_shift: int, output_multiplier: int, output_shift: int) -> np.ndarray:
    """Element-wise ``(a - b)²`` with LiteRT's int8 arithmetic and broadcasting; returns int8."""
    op = "squared_difference"
    a = check_quantized(a, op, "input1")
    b = check_quantized(b, op, "input2")
    table = _pair_table(check_zero_point(input1_zero_point, op, "input1 zero point"),
                        check_zero_point(input2_zero_point, op, "input2 zero point"),
                        check_zero_point(output_zero_point, op, "output zero point"),
                        int(input1_multiplier), int(input1_shift), int(input2_multiplier), int(input2_shift),
                        int(output_multiplier), int(output_shift))
    return pair_table_lookup(a, b, table)


@functools.lru_cache(maxsize=256)
def _pair_table(zp1, zp2, zp_out, m1, s1, m2, s2, mo, so) -> np.ndarray:
    """The op on all 256 x 256 int8 pairs, built once per parameter set, then gathered."""
    a1 = rescale_input(INT8_VALUES, zp1, m1, s1, LEFT_SHIFT)
    b1 = rescale_input(INT8_VALUES, zp2, m2, s2, LEFT_SHIFT)
    diff = a1[:, None] - b1[None, :]
    raw = multiply_by_quantized_multiplier_smaller_than_one_exp(diff * diff, mo, so)
    table = saturate(np.asarray(raw) + zp_out, -128, 127).astype(np.int8)
    table.flags.writeable = False
    return table
