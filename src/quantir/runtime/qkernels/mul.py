"""MUL, int8 (``reference_integer_ops::Mul`` / ``BroadcastMul6DSlow``, docs/numerics.md §2.5).

``out = clamp(zp_out + MBQM((q1 - zp1)·(q2 - zp2), M, shift), act_min, act_max)`` with
``M`` from the float32 multiplier ``f32(f32(s1·s2) / s_out)`` (``mul.cc``). Broadcasting
follows numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantir.numerics import mul_multiplier
from quantir.runtime.qkernels._common import (
    Activation,
    KernelParams,
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
                activation: Activation = "none") -> MulParams:
    op = "mul"
    zp = check_zero_point(output_zero_point, op, "output zero point")
    big_m, shift = quantize_channel_multipliers(mul_multiplier(input1_scale, input2_scale, output_scale), op)
    lo, hi = activation_range(activation, output_scale, zp, np.int8, op)
    return MulParams(int(big_m[0]), int(shift[0]), zp, lo, hi)


def mul(a: np.ndarray, b: np.ndarray, *, input1_zero_point: int, input2_zero_point: int, output_zero_point: int,
        multiplier: int, shift: int, act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """Int8 element-wise product with broadcasting; returns int8."""
    op = "mul"
    a, b = check_quantized(a, op, "input1"), check_quantized(b, op, "input2")
    zp1 = check_zero_point(input1_zero_point, op, "input1 zero point")
    zp2 = check_zero_point(input2_zero_point, op, "input2 zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    # A function of the two int8 inputs: evaluate it on all 256 x 256 pairs, then gather.
    product = (INT8_VALUES[:, None] - zp1) * (INT8_VALUES[None, :] - zp2)
    return pair_table_lookup(a, b, requantize(product, multiplier, shift, zp_out, lo, hi))
