"""``nn.instance_normalization``: per (N, C) normalization over the spatial dims, then a
per-channel scale and bias."""
from __future__ import annotations

from ...ir.dialects import nn
from .layer_norm import normalize
from .window import channel_view


def instance_norm(op, x, scale, b):
    y, _, _ = normalize(x, tuple(range(2, x.ndim)), x.dtype.type(op.attr("epsilon")))
    return (y * channel_view(scale, x.ndim) + channel_view(b, x.ndim)).astype(x.dtype, copy=False)


KERNELS = {nn.INSTANCE_NORMALIZATION: instance_norm}
