"""SUM, int8, in LiteRT's three flavours (``reduce.cc`` ``EvalSum``, docs/numerics.md §2.8).

* ``variant="reference"`` — the fixed-point formula of ``reference_ops::QuantizedMeanOrSum``
  with ``compute_sum``: ``(M, sh) = QM(double(s_in)/double(s_out))`` and
  ``out = clamp(MBQM(Σq - zp_in·N, M, sh) + zp_out, -128, 127)`` — MEAN without the 1/N fold.
  This is the int8 semantics the reference kernel is written for.
* ``variant="builtin_ref"`` — what ``BUILTIN_REF`` actually runs for int8 SUM in the LiteRT
  quantir is tested against (ai-edge-litert 2.3.0): the same formula over the int8 bytes
  read through ``uint8_t`` pointers (each value as ``q & 0xFF``), clamped to [0, 255], its
  byte stored as int8. The sum of -1 and 5 comes out as -1. A LiteRT bug, not semantics: it
  exists so the oracle test can prove the rest of the arithmetic.
* ``variant="optimized"`` — the default resolver's ``optimized_ops::QuantizedMeanOrSum``, a
  float path: ``sc = f32(s_in / s_out)``, ``b = f32(f32(-zp_in·sc)·N)`` and
  ``out = clamp(rha(f32(f32(Σq·sc) + b)) + zp_out, -128, 127)``, every step in float32.
  It is the reference formula up to rounding (the two differ by one on some inputs), and is
  what a LiteRT user gets from a SUM that needs rescaling or not.

All three reduce over ``axes`` (any layout); ``prepare_sum`` computes the integers of the
first two and the float32 ratio of the third.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from quantir.numerics import requantize_multiplier, round_half_away, saturate
from quantir.runtime.qkernels._common import (KernelParams, check_quantized, check_zero_point,
                                              multiply_by_quantized_multiplier, quantize_channel_multipliers)
from quantir.runtime.qkernels._reduce import resolve_axes

__all__ = ["SumParams", "prepare_sum", "reduce_sum"]


@dataclass(frozen=True)
class SumParams(KernelParams):
    multiplier: int
    shift: int
    scale: float   # f32(s_in / s_out), for the optimized variant
    input_zero_point: int
    output_zero_point: int


def prepare_sum(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int) -> SumParams:
    """``PrepareMeanOrSum`` for int8 SUM: the multiplier of the fixed-point variants, the float32 ratio."""
    op = "reduce_sum"
    big_m, shift = quantize_channel_multipliers(requantize_multiplier(input_scale, output_scale), op)
    scale = np.float32(input_scale) / np.float32(output_scale)
    return SumParams(int(big_m[0]), int(shift[0]), float(scale),
                     check_zero_point(input_zero_point, op, "input zero point"),
                     check_zero_point(output_zero_point, op, "output zero point"))


def _optimized_sum(total: np.ndarray, n: int, scale: float, input_zero_point: int, output_zero_point: int
                   ) -> np.ndarray:
    """The float32 rescaling of ``optimized_ops::QuantizedMeanOrSum`` (``compute_sum``)."""
    sc = np.float32(scale)
    bias = (np.float32(-int(input_zero_point)) * sc) * np.float32(n)
    value = total.astype(np.float32) * sc + bias   # int32 -> float rounds to nearest, as the C conversion
    return saturate(round_half_away(value) + int(output_zero_point), -128, 127).astype(np.int8)


def reduce_sum(x: np.ndarray, *, axes: Sequence[int] | int, keepdims: bool, multiplier: int, shift: int,
               scale: float, input_zero_point: int, output_zero_point: int,
               variant: Literal["reference", "builtin_ref", "optimized"] = "reference") -> np.ndarray:
    """Int8 sum over ``axes``; returns int8."""
    op = "reduce_sum"
    x = check_quantized(x, op, "input")
    ax = resolve_axes(axes, x.ndim, op)
    n = int(np.prod([x.shape[a] for a in ax], dtype=np.int64))
    if variant == "optimized":
        return _optimized_sum(x.sum(axis=ax, keepdims=keepdims, dtype=np.int64), n, scale, input_zero_point,
                              output_zero_point)
    if variant == "reference":
        values, lo, hi = x, -128, 127
    elif variant == "builtin_ref":
        values, lo, hi = x.view(np.uint8), 0, 255
    else:
        raise ValueError(f"{op}: variant must be 'reference', 'builtin_ref' or 'optimized', found {variant!r}")
    total = values.sum(axis=ax, keepdims=keepdims, dtype=np.int64) - int(input_zero_point) * n
    raw = multiply_by_quantized_multiplier(total, multiplier, shift)
    out = saturate(raw + int(output_zero_point), lo, hi)
    return out.astype(np.int8) if variant == "reference" else out.astype(np.uint8).view(np.int8)
