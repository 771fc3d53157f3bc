"""``nn.average_pool``: the window sum divided by the count of taps inside the input
(``count_include_pad = 0``) or inside input plus explicit pads (``= 1``); the extra end
padding that ``ceil_mode`` needs is never counted. The count is separable: the outer
product of one count vector per spatial axis."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_conv import window_geometry
from .limits import check_allocation
from .window import padded_for, windows


def _tap_counts(n, o, s, d, k, b, a, include_pad):
    lo, hi = (-b, n + a) if include_pad else (0, n)
    check_allocation("average_pool's tap counts", (o, k), np.int64)
    pos = np.arange(o)[:, None] * s - b + np.arange(k)[None, :] * d
    return ((pos >= lo) & (pos < hi)).sum(axis=1)


def average_pool(op, x):
    attrs = op.opdef.attr_values(op)
    win = window_geometry(x.shape[2:], attrs["kernel_shape"], attrs, ceil_mode=bool(attrs["ceil_mode"]))
    nsp = len(win.kernel)
    view = windows(padded_for(x, win, 0), win)
    total = view.sum(axis=tuple(range(2 + nsp, 2 + 2 * nsp)), dtype=None if x.dtype == np.float32 else np.float64)
    count = np.ones((), dtype=np.float64)
    for i, n in enumerate(x.shape[2:]):
        count = np.multiply.outer(count, _tap_counts(n, win.out[i], win.strides[i], win.dilations[i], win.kernel[i],
                                                     win.pads_begin[i], win.pads_end[i], attrs["count_include_pad"]))
    return (total / count).astype(x.dtype)


KERNELS = {nn.AVERAGE_POOL: average_pool}
