"""``nn.lrn``: ``x / (bias + alpha / size * sum of x^2 over nearby channels) ^ beta``; the
window spans channels ``[c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]``."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from .limits import check_allocation


def lrn(op, x):
    size = op.attr("size")
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    check_allocation("lrn's padded channel sums", (x.shape[0], x.shape[1] + size, *x.shape[2:]), np.float64)
    sq = np.square(x)
    padded = np.pad(sq, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    csum = np.cumsum(padded, axis=1, dtype=np.float64)
    csum = np.concatenate([np.zeros_like(csum[:, :1]), csum], axis=1)
    window = csum[:, size:] - csum[:, :-size]
    denom = (op.attr("bias") + op.attr("alpha") / size * window) ** op.attr("beta")
    return (x / denom).astype(x.dtype)


KERNELS = {nn.LRN: lrn}
