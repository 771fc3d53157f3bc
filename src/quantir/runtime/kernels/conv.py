"""``nn.conv``: N-d grouped, dilated convolution (float), via ``window.conv_core``."""
from __future__ import annotations

from ...ir.dialects import nn
from ...ir.dialects.nn_conv import window_geometry
from .window import channel_view, conv_core


def conv(op, x, w, b=None):
    attrs = op.opdef.attr_values(op)
    win = window_geometry(x.shape[2:], w.shape[2:], attrs)
    y = conv_core(x, w, win, attrs["group"], dtype=x.dtype)
    if b is not None:
        y += channel_view(b, y.ndim)
    return y


KERNELS = {nn.CONV: conv}
