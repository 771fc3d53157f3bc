"""MAX_POOL_2D, int8 (``reference_integer_ops::MaxPool``, docs/numerics.md §2.7).

The maximum over the in-image taps, clamped to the fused activation range; raw q in and
out (shared parameters). LiteRT starts the maximum at -128, so a window that covers only
padding gives -128 before the clamp — padding with -128 reproduces that exactly.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantir.numerics import saturate
from quantir.runtime.qkernels._common import check_quantized, clamp_range
from quantir.runtime.qkernels._pool import PoolParams, prepare_pool
from quantir.runtime.qkernels._window import out_hw, pad_hw, windows
from quantir.runtime.qkernels.padding import normalize_pads

__all__ = ["prepare_max_pool", "max_pool2d"]


def prepare_max_pool(input_scale, input_zero_point, output_scale, output_zero_point,
                     activation="none") -> PoolParams:
    return prepare_pool(input_scale, input_zero_point, output_scale, output_zero_point, activation,
                        op="max_pool2d")


def max_pool2d(x: np.ndarray, *, kernel: Sequence[int], strides: Sequence[int] = (1, 1),
               pads: Sequence[int] = (0, 0, 0, 0), act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """Int8 NCHW max pooling; returns int8 ``[N, C, OH, OW]``."""
    op = "max_pool2d"
    x = check_quantized(x, op, "input")
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be NCHW, found shape {x.shape}")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    pads = normalize_pads(pads, op)
    oh, ow = out_hw(x.shape, kernel, strides, (1, 1), pads, op)
    xp = pad_hw(x, pads, -128)
    peak = windows(xp, kernel, strides, (1, 1), (oh, ow)).max(axis=(-2, -1))
    return saturate(peak, lo, hi).astype(np.int8)
