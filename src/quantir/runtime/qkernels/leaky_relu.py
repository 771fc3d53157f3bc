"""LEAKY_RELU, int8 (``reference_ops::QuantizeLeakyRelu``, docs/numerics.md §2.15).

With ``x = q - zp_in``: ``out = clamp(zp_out + MBQM(x, M_id, sh_id))`` for ``x >= 0`` and
``clamp(zp_out + MBQM(x, M_a, sh_a))`` otherwise, where ``M_id`` comes from
``f32(s_in/s_out)`` and ``M_a`` from ``f32(f32(s_in·alpha)/s_out)``. A negative alpha
gives a negative ``M_a``; the kernel then computes ``zp_out - MBQM(x, -M_a, sh_a)``
(``QuantizeLeakyRelu``: "extract the sign and create a safely positive multiplier"),
which rounds differently from a signed multiply. No fused activation.

int16 (``storage=np.int16``, an int16 ``x``): the same reference template with
int16 storage, zero points 0 (``LeakyReluPrepare`` checks both) and an int16 clamp. (The default
resolver runs ``optimized_integer_ops::QuantizeLeakyRelu`` for int16 instead.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.numerics import (
    leaky_relu_alpha_multiplier,
    quantize_multiplier,
    relu_multiplier,
    saturate,
)
from quantir.runtime.qkernels._common import (
    INT8_VALUES,
    KernelParams,
    QKernelError,
    check_quantized,
    check_zero_point,
    lookup_table,
    multiply_by_quantized_multiplier,
)
from quantir.runtime.qkernels._lut16 import INT16_VALUES, check_int16_zero_point

__all__ = ["LeakyReluParams", "prepare_leaky_relu", "leaky_relu"]


@dataclass(frozen=True)
class LeakyReluParams(KernelParams):
    input_zero_point: int
    output_zero_point: int
    identity_multiplier: int
    identity_shift: int
    alpha_multiplier: int  # may be negative
    alpha_shift: int


def prepare_leaky_relu(input_scale: float, input_zero_point: int, alpha: float, output_scale: float,
                       output_zero_point: int, *, storage: Any = np.int8) -> LeakyReluParams:
    """``storage=np.int16``: the same multipliers; both zero points must be 0."""
    op = "leaky_relu"
    if np.dtype(storage) == np.int16:
        check_int16_zero_point(input_zero_point, op, "input zero point")
        check_int16_zero_point(output_zero_point, op, "output zero point")
    if not np.isfinite(alpha):   # LiteRT's QuantizeMultiplier(NaN or Inf) is undefined
        raise QKernelError(f"{op}: alpha must be finite, found {alpha}")
    mi, si = quantize_multiplier(relu_multiplier(input_scale, output_scale))
    ma, sa = quantize_multiplier(leaky_relu_alpha_multiplier(input_scale, alpha, output_scale))
    if si > 30 or sa > 30:
        raise QKernelError(f"{op}: a multiplier is too large for 31-bit fixed point")
    if ma == -(1 << 31):  # LiteRT negates it in int32: overflow
        raise QKernelError(f"{op}: alpha multiplier rounds to -2**31, which LiteRT cannot negate")
    return LeakyReluParams(check_zero_point(input_zero_point, op, "input zero point"),
                           check_zero_point(output_zero_point, op, "output zero point"), mi, si, ma, sa)


def _leaky_relu_values(values: np.ndarray, input_zero_point: int, output_zero_point: int, identity_multiplier: int,
                       identity_shift: int, alpha_multiplier: int, alpha_shift: int) -> np.ndarray:
    v = values - int(input_zero_point)
    positive = multiply_by_quantized_multiplier(v, identity_multiplier, identity_shift)
    negative = multiply_by_quantized_multiplier(v, abs(alpha_multiplier), alpha_shift)
    if alpha_multiplier < 0:
        negative = -negative
    return np.where(v >= 0, positive, negative) + int(output_zero_point)


def leaky_relu(x: np.ndarray, *, input_zero_point: int, output_zero_point: int, identity_multiplier: int,
               identity_shift: int, alpha_multiplier: int, alpha_shift: int) -> np.ndarray:
    """Int8 or int16 (by ``x``'s dtype) leaky ReLU: evaluated on every value of the type, then gathered."""
    x = check_quantized(x, "leaky_relu", "input", (np.int8, np.int16))
    if x.dtype == np.int16:
        raw = _leaky_relu_values(INT16_VALUES, input_zero_point, output_zero_point, identity_multiplier,
                                 identity_shift, alpha_multiplier, alpha_shift)
        return lookup_table(x, saturate(raw, -32768, 32767).astype(np.int16))
    # A function of one int8 value: evaluate it on all 256, then gather.
    raw = _leaky_relu_values(INT8_VALUES, input_zero_point, output_zero_point, identity_multiplier, identity_shift,
                             alpha_multiplier, alpha_shift)
    return lookup_table(x, saturate(raw, -128, 127).astype(np.int8))
