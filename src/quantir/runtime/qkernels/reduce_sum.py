"""SUM, int8, fixed point (``reference_ops::QuantizedMeanOrSum`` with ``compute_sum``, §2.8).

``(M, sh) = QM(double(s_in)/double(s_out))`` and
``out = clamp(MBQM(Σq - zp_in·N, M, sh) + zp_out, -128, 127)`` — MEAN without the 1/N fold.

``variant="builtin_ref"`` reproduces what ``BUILTIN_REF`` actually runs for int8 SUM in
this LiteRT: ``reduce.cc`` calls ``QuantizedMeanOrSum`` through ``uint8_t`` pointers, so
each int8 value is read as ``q & 0xFF``, the result is clamped to [0, 255] and its byte is
stored as int8. That is a bug, not semantics; it exists here only so the oracle test can
prove the rest of the arithmetic. (The default resolver's optimized SUM is a float path,
not implemented.)
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from quantir.numerics import requantize_multiplier, saturate
from quantir.runtime.qkernels._common import (KernelParams, check_quantized, check_zero_point,
                                              multiply_by_quantized_multiplier, quantize_channel_multipliers)
from quantir.runtime.qkernels._reduce import resolve_axes

__all__ = ["SumParams", "prepare_sum", "reduce_sum"]


@dataclass(frozen=True)
class SumParams(KernelParams):
    multiplier: int
    shift: int
    input_zero_point: int
    output_zero_point: int


def prepare_sum(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int) -> SumParams:
    op = "reduce_sum"
    big_m, shift = quantize_channel_multipliers(requantize_multiplier(input_scale, output_scale), op)
    return SumParams(int(big_m[0]), int(shift[0]), check_zero_point(input_zero_point, op, "input zero point"),
                     check_zero_point(output_zero_point, op, "output zero point"))


def reduce_sum(x: np.ndarray, *, axes: Sequence[int] | int, keepdims: bool, multiplier: int, shift: int,
               input_zero_point: int, output_zero_point: int,
               variant: Literal["reference", "builtin_ref"] = "reference") -> np.ndarray:
    """Int8 sum over ``axes``; returns int8."""
    op = "reduce_sum"
    x = check_quantized(x, op, "input")
    ax = resolve_axes(axes, x.ndim, op)
    n = int(np.prod([x.shape[a] for a in ax], dtype=np.int64))
    if variant == "reference":
        values, lo, hi = x, -128, 127
    elif variant == "builtin_ref":
        values, lo, hi = x.view(np.uint8), 0, 255
    else:
        raise ValueError(f"{op}: variant must be 'reference' or 'builtin_ref', found {variant!r}")
    total = values.sum(axis=ax, keepdims=keepdims, dtype=np.int64) - int(input_zero_point) * n
    raw = multiply_by_quantized_multiplier(total, multiplier, shift)
    out = saturate(raw + int(output_zero_point), lo, hi)
    return out.astype(np.int8) if variant == "reference" else out.astype(np.uint8).view(np.int8)
