"""MEAN, int8 (docs/numerics.md §2.8), in LiteRT's two flavours.

* ``variant="reference"`` — ``reference_ops::QuantizedMeanOrSum`` (``BUILTIN_REF``, and the
  default resolver for every MEAN except 4-D keep-dims over H, W). With
  ``(M, sh) = QM(double(s_in)/double(s_out))``, 1/N is folded into the multiplier
  (``k = min(floor(log2 N), 32, 31 + sh)``, ``M' = (M·2**k) // N``, ``sh' = sh - k``) and
  ``out = clamp(MBQM(Σq - zp_in·N, M', sh') + zp_out, -128, 127)``.
* ``variant="optimized"`` — ``optimized_integer_ops::Mean``, the default resolver's global
  average pool (keep_dims, 4-D NHWC, axes {1, 2}): ``(M, sh) = QM(f32(s_in / f32(N·s_out)))``,
  ``bias = zp_out - trunc(t ± 0.5f)`` with ``t = f32(f32(zp_in·s_in)/s_out)``, and
  ``out = clamp(MBQM(Σq, M, sh) + bias, -128, 127)``. The separately rounded zero-point
  term makes it differ from the reference by one on some inputs.

Both have the form ``clamp(MBQM(Σq - input_offset·N, M, sh) + output_offset)``, which is
what :func:`mean` evaluates with the integers :func:`prepare_mean` computes.

**int16** (``storage=np.int16``): ``reduce.cc`` Prepare requires zero point 0 on input and output;
the arithmetic is the reference variant's, clamped to int16.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from quantir.numerics import (
    mean_multiplier,
    mean_optimized_params,
    quantize_multiplier,
    requantize_multiplier,
    saturate,
)
from quantir.runtime.qkernels._common import (KernelParams, QKernelError, check_quantized, check_zero_point,
                                              multiply_by_quantized_multiplier)
from quantir.runtime.qkernels._reduce import reduced_count, resolve_axes

__all__ = ["MeanParams", "prepare_mean", "mean"]

MeanVariant = Literal["reference", "optimized"]


@dataclass(frozen=True)
class MeanParams(KernelParams):
    multiplier: int
    shift: int
    input_offset: int   # subtracted N times from Σq (zp_in for the reference variant, 0 for optimized)
    output_offset: int  # added after requantization (zp_out, or the optimized bias)
    count: int          # the N the multiplier was prepared for


def prepare_mean(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int, *,
                 count: int, variant: MeanVariant = "reference", storage=np.int8) -> MeanParams:
    """Integers for :func:`mean` over ``count`` reduced elements (``PrepareMeanOrSum`` / ``Mean``)."""
    op = "mean"
    if np.dtype(storage) == np.int16:
        if int(input_zero_point) or int(output_zero_point):
            raise QKernelError(f"{op}: int16 input and output need zero point 0, found {input_zero_point} and "
                               f"{output_zero_point} (reduce.cc Prepare: TF_LITE_ENSURE_EQ zero_point, 0)")
        variant = "reference"
    zp_in = check_zero_point(input_zero_point, op, "input zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    if count <= 0:
        raise ValueError(f"{op}: count must be positive, found {count}")
    if variant == "reference":
        big_m, shift = quantize_multiplier(requantize_multiplier(input_scale, output_scale))
        folded, folded_shift = mean_multiplier(big_m, shift, count)
        return MeanParams(folded, folded_shift, zp_in, zp_out, count)
    if variant == "optimized":
        real, bias = mean_optimized_params(input_scale, zp_in, output_scale, zp_out, count)
        big_m, shift = quantize_multiplier(real)
        if shift > 30:
            raise QKernelError(f"{op}: multiplier {real:g} too large")
        return MeanParams(big_m, shift, 0, bias, count)
    raise ValueError(f"{op}: variant must be 'reference' or 'optimized', found {variant!r}")


def mean(x: np.ndarray, *, axes: Sequence[int] | int, keepdims: bool, multiplier: int, shift: int,
         input_offset: int, output_offset: int, count: int) -> np.ndarray:
    """Mean over ``axes`` of int8 (or int16) data; returns the input's dtype."""
    op = "mean"
    x = check_quantized(x, op, "input", (np.int8, np.int16))
    ax = resolve_axes(axes, x.ndim, op)
    n = reduced_count(x.shape, ax)
    if n != count:
        raise ValueError(f"{op}: the parameters were prepared for {count} elements, the axes {ax} reduce {n}")
    total = x.sum(axis=ax, keepdims=keepdims, dtype=np.int64) - int(input_offset) * n
    raw = multiply_by_quantized_multiplier(total, multiplier, shift)
    lo, hi = (-32768, 32767) if x.dtype == np.int16 else (-128, 127)
    return saturate(raw + int(output_offset), lo, hi).astype(x.dtype)
