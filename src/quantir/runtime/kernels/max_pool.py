"""``nn.max_pool``, with the optional flat argmax indices (ONNX MaxPool's second output:
``((n * C + c) * H + h) * W + w``, or column-major over the spatial dims with
``storage_order = 1``). Padding never wins: it is the dtype's lowest value."""
from __future__ import annotations

import math

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_conv import window_geometry
from .window import padded_for, windows


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def max_pool(op, x):
    attrs = op.opdef.attr_values(op)
    win = window_geometry(x.shape[2:], attrs["kernel_shape"], attrs, ceil_mode=bool(attrs["ceil_mode"]))
    nsp = len(win.kernel)
    view = windows(padded_for(x, win, _lowest(x.dtype)), win)           # (N, C, *out, *k)
    y = view.max(axis=tuple(range(2 + nsp, 2 + 2 * nsp)))
    if len(op.results) == 1:
        return y
    taps = np.unravel_index(view.reshape(*view.shape[:2 + nsp], -1).argmax(axis=-1), win.kernel)
    coords = []
    for i in range(nsp):
        o = np.arange(win.out[i]).reshape((-1,) + (1,) * (nsp - 1 - i))
        coords.append(o * win.strides[i] - win.pads_begin[i] + taps[i] * win.dilations[i])
    spatial = x.shape[2:]
    if attrs["storage_order"] == 1:
        coords, spatial = coords[::-1], spatial[::-1]
    index = np.zeros(y.shape, dtype=np.int64)
    for c, size in zip(coords, spatial):
        index = index * size + c
    nc = (np.arange(x.shape[0]).reshape(-1, 1) * x.shape[1] + np.arange(x.shape[1])).reshape(
        x.shape[0], x.shape[1], *(1,) * nsp)
    return y, index + nc * math.prod(x.shape[2:])


KERNELS = {nn.MAX_POOL: max_pool}
