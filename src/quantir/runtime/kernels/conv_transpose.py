"""``nn.conv_transpose``: the adjoint of conv — a matmul to per-tap columns, then a
scatter-add of each kernel tap into the strided output (col2im), then the pads are cut."""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from ...ir.dialects.nn_conv import conv_transpose_geometry
from .limits import check_allocation
from .window import channel_view, pad_spatial


def conv_transpose(op, x, w, b=None):
    attrs = op.opdef.attr_values(op)
    group = attrs["group"]
    n, c = x.shape[:2]
    spatial, kernel = x.shape[2:], w.shape[2:]
    nsp = len(kernel)
    strides = attrs.get("strides") or (1,) * nsp
    dilations = attrs.get("dilations") or (1,) * nsp
    out, begin, _ = conv_transpose_geometry(spatial, kernel, attrs)
    if w.ndim != x.ndim or w.shape[0] != c or c % group:   # a weight computed at run time is checked only here
        raise ShapeError(f"conv_transpose of x {list(x.shape)} (group {group}) needs a weight of shape "
                         f"[{c}, M/group, *kernel], got {list(w.shape)}")
    cg, mg = c // group, w.shape[1]
    xg = x.reshape(n, group, cg, math.prod(spatial))
    wg = w.reshape(group, cg, mg * math.prod(kernel)).transpose(0, 2, 1)      # (G, M/G*k, C/G)
    check_allocation("a conv_transpose's column buffer", (n, group, mg * math.prod(kernel), math.prod(spatial)),
                     x.dtype)
    cols = np.matmul(wg, xg).reshape(n, group, mg, *kernel, *spatial)       # (N, G, M/G, *k, *in)
    full = [s * (i - 1) + (k - 1) * d + 1 for i, k, s, d in zip(spatial, kernel, strides, dilations)]
    check_allocation("a conv_transpose's uncropped output", (n, group, mg, *full), x.dtype)
    y = np.zeros((n, group, mg, *full), dtype=x.dtype)
    for tap in itertools.product(*(range(k) for k in kernel)):
        dst = tuple(slice(t * d, t * d + s * (i - 1) + 1, s)
                    for t, d, s, i in zip(tap, dilations, strides, spatial))
        y[(slice(None), slice(None), slice(None), *dst)] += cols[(slice(None), slice(None), slice(None), *tap)]
    y = y.reshape(n, group * mg, *full)
    ends = [o - (f - bb) for o, f, bb in zip(out, full, begin)]   # > 0: zeros (output_padding), < 0: crop
    y = pad_spatial(y, [-bb for bb in begin], ends)
    if b is not None:
        y = y + channel_view(b, y.ndim)
    return y


KERNELS = {nn.CONV_TRANSPOSE: conv_transpose}
