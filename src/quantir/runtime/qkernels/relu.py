"""Standalone RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, int8 (``QuantizedReluX``, docs/numerics.md §2.16).

``out = clamp(zp_out + MBQM(q - zp_in, M, sh), lo, hi)`` with ``M`` from ``f32(s_in/s_out)``
and ``lo = max(-128, zp_out + rha(f32(min/s_out)))``, ``hi = min(127, zp_out +
rha(f32(max/s_out)))`` (``hi = 127`` for RELU).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from quantir.numerics import relu_multiplier, round_half_away
from quantir.runtime.qkernels._common import (
    KernelParams,
    check_quantized,
    check_zero_point,
    INT8_VALUES,
    clamp_range,
    lookup_table,
    quantize_channel_multipliers,
    requantize,
)

__all__ = ["ReluParams", "prepare_relu", "relu"]

ReluKind = Literal["relu", "relu6", "relu_n1_to_1", "relu_0_to_1"]
_BOUNDS: dict[str, tuple[float, float | None]] = {
    "relu": (0.0, None), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0), "relu_0_to_1": (0.0, 1.0)}


@dataclass(frozen=True)
class ReluParams(KernelParams):
    input_zero_point: int
    output_zero_point: int
    multiplier: int
    shift: int
    act_min: int
    act_max: int


def prepare_relu(kind: ReluKind, input_scale: float, input_zero_point: int, output_scale: float,
                 output_zero_point: int) -> ReluParams:
    op = kind
    if kind not in _BOUNDS:
        raise ValueError(f"relu: kind must be one of {sorted(_BOUNDS)}, found {kind!r}")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    big_m, shift = quantize_channel_multipliers(relu_multiplier(input_scale, output_scale), op)
    s = np.float32(output_scale)
    low, high = _BOUNDS[kind]
    lo = max(-128, zp_out + int(round_half_away(np.float32(low) / s)))
    hi = 127 if high is None else min(127, zp_out + int(round_half_away(np.float32(high) / s)))
    return ReluParams(check_zero_point(input_zero_point, op, "input zero point"), zp_out, int(big_m[0]),
                      int(shift[0]), lo, hi)


def relu(x: np.ndarray, *, input_zero_point: int, output_zero_point: int, multiplier: int, shift: int,
         act_min: int, act_max: int) -> np.ndarray:
    """Int8 clamp-type activation (rescaling to the output parameters first)."""
    x = check_quantized(x, "relu", "input")
    lo, hi = clamp_range(act_min, act_max, np.int8, "relu")
    # A function of one int8 value: evaluate it on all 256, then gather.
    return lookup_table(x, requantize(INT8_VALUES - int(input_zero_point), multiplier, shift, output_zero_point,
                                      lo, hi))
