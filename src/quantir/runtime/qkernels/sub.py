"""SUB, int8 (``reference_ops::Sub`` / ``BroadcastQuantSubSlow``, docs/numerics.md §2.4).

The ADD arithmetic with a difference: ``out = clamp(MBQM<1(a' - b', Mo, sho) + zp_out)``.

``sub.cc`` Prepare accepts an output multiplier above 1 (very narrow output ranges) and
quantizes it with ``QuantizeMultiplierGreaterThanOne``, but the int8 reference kernel then
applies it with ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` — a
``RoundingDivideByPOT`` by a negative exponent, undefined behaviour in C. There is no
reference result to match, so :func:`prepare_sub` rejects ``mo >= 1`` with
:class:`QKernelError`.
"""
from __future__ import annotations

import numpy as np

from quantir.numerics import add_sub_multipliers, multiply_by_quantized_multiplier_smaller_than_one_exp, saturate
from quantir.runtime.qkernels._common import (
    INT8_VALUES,
    Activation,
    activation_range,
    check_quantized,
    check_zero_point,
    clamp_range,
    pair_table_lookup,
)
from quantir.runtime.qkernels.add import LEFT_SHIFT, AddParams, quantize_smaller_than_one, rescale_input

__all__ = ["SubParams", "prepare_sub", "sub"]

SubParams = AddParams


def prepare_sub(input1_scale: float, input2_scale: float, output_scale: float, output_zero_point: int,
                activation: Activation = "none") -> SubParams:
    op = "sub"
    zp = check_zero_point(output_zero_point, op, "output zero point")
    m1, m2, mo = add_sub_multipliers(input1_scale, input2_scale, output_scale, LEFT_SHIFT)
    q1 = quantize_smaller_than_one(m1, op, "input1")
    q2 = quantize_smaller_than_one(m2, op, "input2")
    qo = quantize_smaller_than_one(mo, op, "output")
    lo, hi = activation_range(activation, output_scale, zp, np.int8, op)
    return SubParams(*q1, *q2, *qo, zp, lo, hi)


def sub(a: np.ndarray, b: np.ndarray, *, input1_zero_point: int, input2_zero_point: int, output_zero_point: int,
        input1_multiplier: int, input1_shift: int, input2_multiplier: int, input2_shift: int,
        output_multiplier: int, output_shift: int, act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """Int8 element-wise ``a - b`` with broadcasting; returns int8."""
    op = "sub"
    a, b = check_quantized(a, op, "input1"), check_quantized(b, op, "input2")
    zp1 = check_zero_point(input1_zero_point, op, "input1 zero point")
    zp2 = check_zero_point(input2_zero_point, op, "input2 zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    # A function of the two int8 inputs: evaluate it on all 256 x 256 pairs, then gather.
    a1 = rescale_input(INT8_VALUES, zp1, input1_multiplier, input1_shift)
    b1 = rescale_input(INT8_VALUES, zp2, input2_multiplier, input2_shift)
    raw = multiply_by_quantized_multiplier_smaller_than_one_exp(a1[:, None] - b1[None, :], output_multiplier,
                                                                output_shift)
    return pair_table_lookup(a, b, saturate(raw + zp_out, lo, hi).astype(np.int8))
