"""``nn.dynamic_quantize_linear``: ui8 quantization with parameters from x's range widened
to include 0, as ONNX's reference: ``scale = (max - min) / 255`` (1 when the range is empty),
``zero_point = round_half_even(clamp(-min / scale, 0, 255))``."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...numerics.quantize import quantize_onnx
from ...numerics.rounding import round_half_even, saturate


def dynamic_quantize_linear(op, x):
    qmin, qmax = 0, 255
    hi = np.float32(max(0.0, float(np.max(x)))) if x.size else np.float32(0)
    lo = np.float32(min(0.0, float(np.min(x)))) if x.size else np.float32(0)
    scale = np.float32(1.0 if hi == lo else hi - lo) / np.float32(qmax - qmin)
    zp = saturate(round_half_even(np.clip(np.float32(qmin) - lo / scale, qmin, qmax)), qmin, qmax)
    y = quantize_onnx(x, scale, zp, qmin, qmax)
    return y.astype(np.uint8), np.array(scale, dtype=np.float32), np.array(zp, dtype=np.uint8)


KERNELS = {nn.DYNAMIC_QUANTIZE_LINEAR: dynamic_quantize_linear}
