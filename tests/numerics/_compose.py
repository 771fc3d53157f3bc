"""LiteRT reference int8 kernels composed from quantir.numerics primitives (test helpers).

The real kernels belong to the runtime package; these compositions exist so the numerics
tests can check the primitives *in the order the kernels use them*, against §7 vectors
and against the LiteRT interpreter.
"""
from __future__ import annotations

import numpy as np

from quantir.numerics import (
    calculate_input_radius,
    exp_on_negative_values,
    get_inv_sqrt_quantized_multiplier_exp,
    get_reciprocal,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_greater_than_one,
    preprocess_softmax_scaling,
    rescale,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)


def softmax_int8(q: np.ndarray, input_scale: float, beta: float = 1.0) -> np.ndarray:
    """reference_ops::Softmax int8 -> int8 (output 1/256, -128) over the last axis (§2.12)."""
    big_m, left_shift = preprocess_softmax_scaling(beta, input_scale, 5)
    diff_min = -calculate_input_radius(5, left_shift)
    q = np.asarray(q, dtype=np.int64)
    diff = q - q.max(axis=-1, keepdims=True)
    live = diff >= diff_min
    scaled = multiply_by_quantized_multiplier_greater_than_one(np.where(live, diff, 0), big_m, left_shift)
    exps = exp_on_negative_values(scaled, 5)
    total = np.sum(np.where(live, rescale(exps, 0, 12), 0), axis=-1, keepdims=True)
    total = ((total + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)  # Q12.19 sum wraps like int32
    recip, bits = get_reciprocal(total, 12)
    out = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(recip, exps), bits + 23) - 128
    return np.where(live, np.clip(out, -128, 127), -128)


def l2_normalization_int8(q: np.ndarray, input_zero_point: int) -> np.ndarray:
    """reference_integer_ops::L2Normalization (output 1/128, 0) over the last axis (§2.19)."""
    x = np.asarray(q, dtype=np.int64) - input_zero_point
    acc = np.sum(x * x, axis=-1, keepdims=True)
    inv, shift = get_inv_sqrt_quantized_multiplier_exp(acc, -1)
    return np.clip(multiply_by_quantized_multiplier(x, inv, shift + 7), -128, 127)
