"""AVERAGE_POOL_2D, int8 and int16 (``reference_integer_ops::AveragePool``, docs/numerics.md §2.6).

On raw q (input and output share their parameters): the sum over the **in-image** taps
only, divided by their count ``n`` with rounding half away from zero
(``sum > 0 ? (sum + n/2)/n : (sum - n/2)/n`` in C), then clamped to the fused
activation range. Padding never counts; a window with no in-image tap is an error in
LiteRT (``filter_count == 0``) and here. NCHW layout, explicit pads.

The int16 kernel (16x8 models) is the same code on ``int16_t`` with the same int32 sum; LiteRT
checks no zero point for it (docs/numerics.md §2.25). A window of more than 65,536 taps could
overflow that sum (undefined in C): quantir refuses it.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantir.numerics import div_round_half_away, saturate
from quantir.runtime.qkernels._common import (INT32_MAX, AccumulatorOverflowError, QKernelError, check_quantized,
                                              clamp_range)
from quantir.runtime.qkernels._pool import PoolParams, prepare_pool
from quantir.runtime.qkernels._window import out_hw, pad_hw, windows
from quantir.runtime.qkernels.padding import normalize_pads

__all__ = ["PoolParams", "prepare_average_pool", "average_pool2d", "in_image_counts"]


def prepare_average_pool(input_scale, input_zero_point, output_scale, output_zero_point,
                         activation="none", *, storage=np.int8) -> PoolParams:
    return prepare_pool(input_scale, input_zero_point, output_scale, output_zero_point, activation,
                        op="average_pool2d", storage=storage)


def in_image_counts(size: int, kernel: int, stride: int, pad_begin: int, out: int) -> np.ndarray:
    """Per output index along one axis, how many of the ``kernel`` taps fall inside ``[0, size)``."""
    start = np.arange(out) * stride - pad_begin
    return np.clip(np.minimum(start + kernel, size) - np.maximum(start, 0), 0, kernel)


def average_pool2d(x: np.ndarray, *, kernel: Sequence[int], strides: Sequence[int] = (1, 1),
                   pads: Sequence[int] = (0, 0, 0, 0), act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """NCHW average pooling of int8 (or int16) ``x``; returns ``[N, C, OH, OW]`` of its dtype."""
    op = "average_pool2d"
    x = check_quantized(x, op, "input", (np.int8, np.int16))
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be NCHW, found shape {x.shape}")
    lo, hi = clamp_range(act_min, act_max, x.dtype, op)
    pads = normalize_pads(pads, op)
    kh, kw = kernel
    if kh * kw * -int(np.iinfo(x.dtype).min) > INT32_MAX:
        raise AccumulatorOverflowError(f"{op}: a {kh}x{kw} window of {x.dtype} values may overflow LiteRT's "
                                       "int32 sum (undefined behaviour)")
    oh, ow = out_hw(x.shape, (kh, kw), strides, (1, 1), pads, op)
    counts = (in_image_counts(x.shape[2], kh, strides[0], pads[0], oh)[:, None]
              * in_image_counts(x.shape[3], kw, strides[1], pads[1], ow)[None, :])
    if (counts == 0).any():
        raise QKernelError(f"{op}: a {kh}x{kw} window with pads {pads} covers no input pixel "
                           "(LiteRT fails on filter_count == 0)")
    xp = pad_hw(x.astype(np.int32), pads, 0)
    sums = windows(xp, (kh, kw), strides, (1, 1), (oh, ow)).sum(axis=(-2, -1), dtype=np.int64)
    return saturate(div_round_half_away(sums, counts), lo, hi).astype(x.dtype)
