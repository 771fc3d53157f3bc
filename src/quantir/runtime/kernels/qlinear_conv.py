"""``nn.qlinear_conv``: the integer conv accumulator plus the i32 bias, requantized as
ONNX's reference does: ``saturate(round_half_even(acc * (x_scale * w_scale / y_scale)) + y_zp)``
(the multiplier in the scales' float type, the product in float64; w_scale may be per
output channel)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_base import element_dtype
from ...numerics.rounding import round_half_even, saturate
from .conv_integer import integer_conv
from .window import channel_view


def qlinear_conv(op, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, b=None):
    acc = integer_conv(op, x, x_zp, w, w_zp)
    if b is not None:
        acc += channel_view(b.astype(np.float64), acc.ndim)
    w_scale = channel_view(w_scale, acc.ndim) if np.size(w_scale) > 1 else w_scale.reshape(())
    multiplier = (x_scale.reshape(()) * w_scale / y_scale.reshape(())).astype(np.float64)
    dtype = element_dtype(op.results[0].type)
    info = np.iinfo(dtype)
    q = round_half_even(acc * multiplier) + np.int64(y_zp.reshape(()))
    return saturate(q, int(info.min), int(info.max)).astype(dtype)


KERNELS = {nn.QLINEAR_CONV: qlinear_conv}
