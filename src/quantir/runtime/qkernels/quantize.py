"""QUANTIZE (float -> int and int -> int requantize), docs/numerics.md §2.10.

* :func:`quantize`: ``q = clamp(rha(f32(x / f32(s))) + zp)`` (``reference_ops::AffineQuantize``),
  per tensor or per channel (``axis``); float input is what this op consumes.
* :func:`requantize`: ``q' = clamp(MBQM(q - zp_in, M, sh) + zp_out)`` with
  ``(M, sh) = QM(double(s_in)/double(s_out))`` (``reference_ops::Requantize``); int8, uint8
  and int16 in and out. LiteRT's int8<->uint8 ``XOR 0x80`` fast path computes the same
  values, so it needs no special case.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.numerics import quantize_tflite, requantize_multiplier
from quantir.runtime.qkernels import _jit
from quantir.runtime.qkernels._common import (
    KernelParams,
    check_quantized,
    check_zero_point,
    lookup_table,
    quantize_channel_multipliers,
    requantize as _requantize,
    storage_limits,
)

__all__ = ["RequantizeParams", "prepare_requantize", "quantize", "requantize"]


@dataclass(frozen=True)
class RequantizeParams(KernelParams):
    multiplier: int
    shift: int


def prepare_requantize(input_scale: float, output_scale: float) -> RequantizeParams:
    big_m, shift = quantize_channel_multipliers(requantize_multiplier(input_scale, output_scale), "requantize")
    return RequantizeParams(int(big_m[0]), int(shift[0]))


def quantize(x: Any, *, scale: Any, zero_point: Any, dtype: Any = np.int8, axis: int | None = None) -> np.ndarray:
    """Float -> ``dtype`` exactly as LiteRT's QUANTIZE (float32 division, ties away from zero)."""
    qmin, qmax = storage_limits(dtype, "quantize")
    x = np.asarray(x, dtype=np.float32)
    if _jit.AVAILABLE and axis is None and np.ndim(scale) == 0 and np.ndim(zero_point) == 0 and x.size \
            and np.isfinite(scale) and scale > 0:
        out = np.empty(x.shape, dtype=dtype)
        if _jit.quantize_f32(np.ascontiguousarray(x).reshape(-1), np.float32(scale), int(zero_point), qmin, qmax,
                             out.reshape(-1)):
            return out
    return quantize_tflite(x, scale, zero_point, qmin, qmax, axis=axis).astype(dtype)


def requantize(q: np.ndarray, *, input_zero_point: int, output_zero_point: int, multiplier: int, shift: int,
               out_dtype: Any = np.int8) -> np.ndarray:
    """Integer -> integer QUANTIZE (rescale to new parameters)."""
    op = "requantize"
    q = check_quantized(q, op, "input", (np.int8, np.uint8, np.int16))
    in_lo, in_hi = storage_limits(q.dtype, op)
    out_lo, out_hi = storage_limits(out_dtype, op)
    zp_in = check_zero_point(input_zero_point, op, "input zero point", in_lo, in_hi)
    zp_out = check_zero_point(output_zero_point, op, "output zero point", out_lo, out_hi)
    # A function of one stored value: evaluate it on every value of the input type, then gather.
    domain = np.arange(in_lo, in_hi + 1, dtype=np.int64)
    return lookup_table(q, _requantize(domain - zp_in, multiplier, shift, zp_out, out_lo, out_hi, out_dtype))
