"""HARD_SWISH, int8 (``reference_ops::HardSwish``, docs/numerics.md §2.14).

``x·relu6(x + 3)/6`` in 16-bit fixed point. Prepare (float32 throughout): with
``hs = f32(s_in / 128)``, ``(Mo, eo) = QM(f32(hs / s_out))`` and
``(Mr, er) = QM(f32(hs / (3/32768)))``, both multipliers cut to Q0.15. Per element::

    hires  = (q - zp_in) · 128
    pre    = SRDHM16(hires, Mo16)                       value on the output scale, pre-shift
    rel    = hires, saturating-shifted left by er - 1 (er > 0)
    rel    = SRDHM16(rel, Mr16), then shifted left by 1 (er > 0) or RDBPOT(rel, -er) (er < 0)
    rel    = (rel + 2**15) >> 1                          "relu-ish" factor in [0, 1]
    out    = clamp(int16(RDBPOT(SDHM16(rel, pre), -eo) + zp_out))

(``SDHM16`` truncates, ``SRDHM16`` rounds.) LiteRT requires ``eo <= 0``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantir.numerics import (
    downscale_multiplier_to_int16,
    hard_swish_multipliers,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturate,
    saturating_doubling_high_mul_16,
    saturating_left_shift,
    saturating_rounding_doubling_high_mul_16,
)
from quantir.runtime.qkernels._common import (
    INT8_VALUES,
    KernelParams,
    QKernelError,
    check_quantized,
    check_zero_point,
    lookup_table,
)

__all__ = ["HardSwishParams", "prepare_hard_swish", "hard_swish"]


@dataclass(frozen=True)
class HardSwishParams(KernelParams):
    input_zero_point: int
    output_zero_point: int
    output_multiplier: int  # Q0.15
    output_exponent: int
    reluish_multiplier: int  # Q0.15
    reluish_exponent: int


def prepare_hard_swish(input_scale: float, input_zero_point: int, output_scale: float,
                       output_zero_point: int) -> HardSwishParams:
    op = "hard_swish"
    out_real, reluish_real = hard_swish_multipliers(input_scale, output_scale)
    mo, eo = quantize_multiplier(out_real)
    mr, er = quantize_multiplier(reluish_real)
    if eo > 0:
        raise QKernelError(f"{op}: output multiplier {float(out_real):g} needs exponent {eo} > 0; LiteRT requires "
                           "s_in / (128·s_out) < 1")
    return HardSwishParams(check_zero_point(input_zero_point, op, "input zero point"),
                           check_zero_point(output_zero_point, op, "output zero point"),
                           int(downscale_multiplier_to_int16(mo)), eo, int(downscale_multiplier_to_int16(mr)), er)


def _wrap_int16(v: np.ndarray) -> np.ndarray:
    """``int16_t`` storage of an int result (two's complement, as ``output_value += zp`` does)."""
    return ((v + (1 << 15)) & 0xFFFF) - (1 << 15)


def hard_swish(x: np.ndarray, *, input_zero_point: int, output_zero_point: int, output_multiplier: int,
               output_exponent: int, reluish_multiplier: int, reluish_exponent: int) -> np.ndarray:
    """Int8 hard-swish; returns int8."""
    x = check_quantized(x, "hard_swish", "input")
    # A function of one int8 value: evaluate it on all 256, then gather.
    hires = (INT8_VALUES - int(input_zero_point)) * 128
    pre = saturating_rounding_doubling_high_mul_16(hires, output_multiplier)
    rel = hires
    if reluish_exponent > 0:
        # Shifting an int16 by 15 or more saturates every non-zero value: min() keeps the result.
        rel = saturating_left_shift(rel, min(reluish_exponent - 1, 15), bits=16)
    rel = saturating_rounding_doubling_high_mul_16(rel, reluish_multiplier)
    if reluish_exponent > 0:
        rel = saturating_left_shift(rel, 1, bits=16)
    elif reluish_exponent < 0:
        rel = rounding_divide_by_pot(rel, -reluish_exponent)
    rel = (rel + (1 << 15)) >> 1
    value = rounding_divide_by_pot(saturating_doubling_high_mul_16(rel, pre), -output_exponent)
    return lookup_table(x, saturate(_wrap_int16(value + int(output_zero_point)), -128, 127).astype(np.int8))
