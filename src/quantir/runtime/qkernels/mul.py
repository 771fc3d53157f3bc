"""MUL, int8 (``reference_integer_ops::Mul`` / ``BroadcastMul6DSlow``, docs/numerics.md §2.5).

``out = clamp(zp_out + MBQM((q1 - zp1)·(q2 - zp2), M, shift), act_min, act_max)`` with
``M`` from the float32 multiplier ``f32(f32(s1·s2) / s_out)`` (``mul.cc``). Broadcasting
follows numpy.

**int16** (``storage=np.int16``): the same formula on int16 inputs, with an int32 product (at most
2**30) and an int16 clamp; ``mul.cc`` requires zero point 0 on both inputs and the output.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.numerics import mul_multiplier
from quantir.runtime.qkernels._common import (
    Activation,
    KernelParams,
    QKernelError,
    activation_range,
    check_quantized,
    check_zero_point,
    INT8_VALUES,
    clamp_range,
    pair_table_lookup,
    quantize_channel_multipliers,
    requantize,
)

__all__ = ["MulParams", "prepare_mul", "mul"]


@dataclass(frozen=True)
class MulParams(KernelParams):
    multiplier: int
    shift: int
    output_zero_point: int
    act_min: int
    act_max: int


def prepare_mul(input1_scale: float, input2_scale: float, output_scale: float, output_zero_point: int,
                activation: Activation = "none", *, storage: Any = np.int8,
                input_zero_points: tuple[int, int] = (0, 0)) -> MulParams:
    """``storage=np.int16``: the 16-bit kernel; then ``input_zero_points`` and the output's must be 0."""
    op = "mul"
    if np.dtype(storage) == np.int16 and (tuple(int(z) for z in input_zero_points) != (0, 0)
                                          or int(output_zero_point) != 0):
        raise QKernelError(f"{op}: int16 inputs and output need zero point 0, found {tuple(input_zero_points)} and "
                           f"{output_zero_point} (mul.cc EvalQuantized: TF_LITE_ENSURE_EQ offsets, 0)")
    zp = check_zero_point(output_zero_point, op, "output zero point")
    big_m, shift = quantize_channel_multipliers(mul_multiplier(input1_scale, input2_scale, output_scale), op)
    lo, hi = activation_range(activation, output_scale, zp, storage, op)
    return MulParams(int(big_m[0]), int(shift[0]), zp, lo, hi)


def mul(a: np.ndarray, b: np.ndarray, *, input1_zero_point: int, input2_zero_point: int, output_zero_point: int,
        multiplier: int, shift: int, act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """Element-wise product with broadcasting (int8, or int16 with zero points 0); returns the inputs' dtype."""
    op = "mul"
    a = check_quantized(a, op, "input1", (np.int8, np.int16))
    b = check_quantized(b, op, "input2", (a.dtype,))
    if a.dtype == np.int16:
        if int(input1_zero_point) or int(input2_zero_point) or int(output_zero_point):
            raise QKernelError(f"{op}: int16 inputs and output need zero point 0 (mul.cc)")
        lo, hi = clamp_range(act_min, act_max, np.int16, op)
        product = a.astype(np.int64) * b.astype(np.int64)   # |product| <= 2**30: int32 in LiteRT
        return requantize(product, multiplier, shift, 0, lo, hi, np.int16)
    zp1 = check_zero_point(input1_zero_point, op, "input1 zero point")
    zp2 = check_zero_point(input2_zero_point, op, "input2 zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    # A function of the two int8 inputs: evaluate it on all 256 x 256 pairs, then gather.
    product = (INT8_VALUES[:, None] - zp1) * (INT8_VALUES[None, :] - zp2)
    return pair_table_lookup(a, b, requantize(product, multiplier, shift, zp_out, lo, hi))
