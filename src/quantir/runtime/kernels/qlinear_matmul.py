"""``nn.qlinear_matmul``: the integer matmul accumulator requantized as ONNX's reference:
``saturate(round_half_even(acc * (a_scale * b_scale / y_scale)) + y_zp)`` (b_scale may be
per column)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_base import element_dtype
from ...numerics.rounding import round_half_even, saturate
from .matmul_integer import integer_matmul


def qlinear_matmul(op, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    acc = integer_matmul(a, a_zp, b, b_zp)
    b_scale = b_scale.reshape(-1) if b_scale.size > 1 else b_scale.reshape(())
    multiplier = (a_scale.reshape(()) * b_scale / y_scale.reshape(())).astype(np.float64)
    dtype = element_dtype(op.results[0].type)
    info = np.iinfo(dtype)
    q = round_half_even(acc * multiplier) + np.int64(y_zp.reshape(-1)[0])
    return saturate(q, int(info.min), int(info.max)).astype(dtype)


KERNELS = {nn.QLINEAR_MATMUL: qlinear_matmul}
