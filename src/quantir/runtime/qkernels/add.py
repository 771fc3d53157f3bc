"""ADD, int8 (``reference_integer_ops::Add`` / ``BroadcastAdd6DSlow``, docs/numerics.md §2.4).

Both inputs are brought to a common scale with 20 bits of headroom, added, and rescaled::

    a' = MBQM<1((q1 - zp1)·2**20, M1, sh1)        b' likewise
    out = clamp(MBQM<1(a' + b', Mo, sho) + zp_out, act_min, act_max)

where ``MBQM<1`` is ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` and the real
multipliers are ``s1/2m``, ``s2/2m``, ``2m/(2**20·s_out)`` with ``m = max(s1, s2)``
(:func:`~quantir.numerics.add_sub_multipliers`). LiteRT aborts (``TFLITE_CHECK``) unless
every multiplier is in (0, 1); :func:`prepare_add` raises :class:`QKernelError` instead.
Broadcasting follows numpy (the same rule as TFLite's).
"""
from __future__ import annotations

import functools

from dataclasses import dataclass

import numpy as np

from quantir.numerics import (
    add_sub_multipliers,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier_smaller_than_one_exp,
    saturate,
)
from quantir.runtime.qkernels._common import (
    INT8_VALUES,
    Activation,
    KernelParams,
    QKernelError,
    activation_range,
    check_quantized,
    check_zero_point,
    clamp_range,
    pair_table_lookup,
)

__all__ = ["AddParams", "prepare_add", "add", "rescale_input", "quantize_smaller_than_one"]

LEFT_SHIFT = 20  # int8 / uint8 headroom


@dataclass(frozen=True)
class AddParams(KernelParams):
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int
    output_zero_point: int
    act_min: int
    act_max: int


def quantize_smaller_than_one(m: float, op: str, what: str) -> tuple[int, int]:
    """``QuantizeMultiplierSmallerThanOneExp``, with LiteRT's abort turned into QKernelError."""
    if not 0.0 < float(m) < 1.0:
        raise QKernelError(f"{op}: the {what} multiplier {float(m):.6g} must be in (0, 1); LiteRT aborts on it "
                           "(TFLITE_CHECK in QuantizeMultiplierSmallerThanOneExp). The output scale is too small "
                           "for the input scales.")
    return quantize_multiplier_smaller_than_one_exp(m)


def prepare_add_sub(op: str, input1_scale: float, input2_scale: float, output_scale: float,
                    output_zero_point: int, activation: Activation = "none") -> AddParams:
    """ADD's and SUB's Prepare (they share it in LiteRT); ``op`` names the op in errors."""
    zp = check_zero_point(output_zero_point, op, "output zero point")
    m1, m2, mo = add_sub_multipliers(input1_scale, input2_scale, output_scale, LEFT_SHIFT)
    q1 = quantize_smaller_than_one(m1, op, "input1")
    q2 = quantize_smaller_than_one(m2, op, "input2")
    qo = quantize_smaller_than_one(mo, op, "output")
    lo, hi = activation_range(activation, output_scale, zp, np.int8, op)
    return AddParams(*q1, *q2, *qo, zp, lo, hi)


def prepare_add(input1_scale: float, input2_scale: float, output_scale: float, output_zero_point: int,
                activation: Activation = "none") -> AddParams:
    return prepare_add_sub("add", input1_scale, input2_scale, output_scale, output_zero_point, activation)


def rescale_input(q: np.ndarray, zero_point: int, multiplier: int, shift: int) -> np.ndarray:
    """``MBQM<1((q - zp)·2**20, M, shift)`` as int64."""
    shifted = (q.astype(np.int64) - zero_point) << LEFT_SHIFT
    return multiply_by_quantized_multiplier_smaller_than_one_exp(shifted, multiplier, shift)


def add_sub(op: str, sign: int, a: np.ndarray, b: np.ndarray, *, input1_zero_point: int, input2_zero_point: int,
            output_zero_point: int, input1_multiplier: int, input1_shift: int, input2_multiplier: int,
            input2_shift: int, output_multiplier: int, output_shift: int, act_min: int = -128,
            act_max: int = 127) -> np.ndarray:
    """``a + sign·b`` with LiteRT's ADD/SUB integer arithmetic and broadcasting; returns int8."""
    a, b = check_quantized(a, op, "input1"), check_quantized(b, op, "input2")
    zp1 = check_zero_point(input1_zero_point, op, "input1 zero point")
    zp2 = check_zero_point(input2_zero_point, op, "input2 zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    table = _pair_table(sign, zp1, zp2, zp_out, int(input1_multiplier), int(input1_shift), int(input2_multiplier),
                        int(input2_shift), int(output_multiplier), int(output_shift), lo, hi)
    return pair_table_lookup(a, b, table)


@functools.lru_cache(maxsize=512)
def _pair_table(sign, zp1, zp2, zp_out, m1, s1, m2, s2, mo, so, lo, hi) -> np.ndarray:
    """A function of the two int8 inputs, evaluated on all 256 x 256 pairs (then gathered). It is
    the same for every call with the same parameters, so it is built once per parameter set."""
    a1 = rescale_input(INT8_VALUES, zp1, m1, s1)
    b1 = rescale_input(INT8_VALUES, zp2, m2, s2)
    raw = multiply_by_quantized_multiplier_smaller_than_one_exp(a1[:, None] + sign * b1[None, :], mo, so)
    table = saturate(raw + zp_out, lo, hi).astype(np.int8)
    table.flags.writeable = False
    return table


def add(a: np.ndarray, b: np.ndarray, **params) -> np.ndarray:
    """Int8 element-wise addition with broadcasting; ``params`` as ``AddParams.as_kwargs()`` plus zero points."""
    return add_sub("add", 1, a, b, **params)
