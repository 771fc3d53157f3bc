"""``nn.dequantize_linear``: ``(x - zero_point) * scale`` through ``numerics.dequantize``
(ONNX scheme: float32 throughout), in the scale's float type."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...numerics.quantize import dequantize
from .quantize_linear import check_scale, granularity


def dequantize_linear(op, x, scale, zp):
    check_scale(op, scale)
    kw, scale, zp = granularity(op, x, scale, zp)
    return np.asarray(dequantize(x, scale, zp, scheme="onnx", **kw)).astype(scale.dtype, copy=False)


KERNELS = {nn.DEQUANTIZE_LINEAR: dequantize_linear}
