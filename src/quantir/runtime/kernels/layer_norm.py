"""``nn.layer_normalization``: normalize over dims ``[axis, rank)`` with float32 statistics
(``stash_type = 1``); the optional results are the mean and the inverse standard deviation."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def normalize(x, axes, eps):
    """``((x - mean) * inv_std, mean, inv_std)`` over ``axes``, statistics kept as size-1 dims."""
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    inv_std = 1 / np.sqrt((centered * centered).mean(axis=axes, keepdims=True) + eps)
    return centered * inv_std, mean, inv_std


def layer_norm(op, x, scale, b=None):
    axis = op.attr("axis") % x.ndim
    y, mean, inv_std = normalize(x.astype(np.float32, copy=False), tuple(range(axis, x.ndim)),
                                 np.float32(op.attr("epsilon")))
    y = y * scale
    if b is not None:
        y = y + b
    stats = (mean.astype(x.dtype, copy=False), inv_std.astype(x.dtype, copy=False))
    return (y.astype(x.dtype, copy=False), *stats[:len(op.results) - 1])


KERNELS = {nn.LAYER_NORMALIZATION: layer_norm}
