"""MAX_POOL_2D, int8 and int16 (``reference_integer_ops::MaxPool``, docs/numerics.md §2.7).

The maximum over the in-image taps, clamped to the fused activation range; raw q in and
out (shared parameters). LiteRT starts the maximum at the storage minimum (-128, or -32768
for int16), so a window that covers only padding gives that minimum before the clamp —
padding with it reproduces that exactly. The int16 kernel (16x8 models) is the same
template on ``int16_t``; LiteRT checks no zero point for it (docs/numerics.md §2.25).
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
                     activation="none", *, storage=np.int8) -> PoolParams:
    return prepare_pool(input_scale, input_zero_point, output_scale, output_zero_point, activation,
                        op="max_pool2d", storage=storage)


def max_pool2d(x: np.ndarray, *, kernel: Sequence[int], strides: Sequence[int] = (1, 1),
               pads: Sequence[int] = (0, 0, 0, 0), act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """NCHW max pooling of int8 (or int16) ``x``; returns ``[N, C, OH, OW]`` of its dtype."""
    op = "max_pool2d"
    x = check_quantized(x, op, "input", (np.int8, np.int16))
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be NCHW, found shape {x.shape}")
    lo, hi = clamp_range(act_min, act_max, x.dtype, op)
    pads = normalize_pads(pads, op)
    oh, ow = out_hw(x.shape, kernel, strides, (1, 1), pads, op)
    xp = pad_hw(x, pads, np.iinfo(x.dtype).min)
    peak = windows(xp, kernel, strides, (1, 1), (oh, ow)).max(axis=(-2, -1))
    return saturate(peak, lo, hi).astype(x.dtype)
