"""``nn.conv_integer``: ``(x - x_zp) conv (w - w_zp)`` with an i32 result (per-tensor x
zero point, per-tensor or per-output-channel w zero point; padding is 0 after the shift).

Products of 8-bit operands are summed in float64, exact below 2**53, so one float BLAS
call gives the integer accumulator.
"""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_conv import window_geometry
from .window import conv_core


def integer_conv(op, x, x_zp, w, w_zp) -> np.ndarray:
    """The exact accumulator of an integer conv, as float64."""
    attrs = op.opdef.attr_values(op)
    xs = x.astype(np.float64) - np.float64(np.asarray(x_zp).reshape(-1)[0])
    wz = np.asarray(w_zp, dtype=np.float64)
    ws = w.astype(np.float64) - (wz.reshape(-1, *(1,) * (w.ndim - 1)) if wz.size > 1 else wz.reshape(()))
    win = window_geometry(x.shape[2:], w.shape[2:], attrs)
    return conv_core(xs, ws, win, attrs["group"], dtype=np.float64)


def conv_integer(op, x, w, x_zp, w_zp):
    return integer_conv(op, x, x_zp, w, w_zp).astype(np.int32)


KERNELS = {nn.CONV_INTEGER: conv_integer}
