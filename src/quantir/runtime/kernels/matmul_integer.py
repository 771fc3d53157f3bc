"""``nn.matmul_integer``: ``(a - a_zp) @ (b - b_zp)`` with an i32 result; ``a_zp`` is
per-tensor or per-row, ``b_zp`` per-tensor or per-column. Products are summed in float64,
exact for 8- and 16-bit operands."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def integer_matmul(a, a_zp, b, b_zp) -> np.ndarray:
    """The exact accumulator, as float64."""
    a_zp = np.asarray(a_zp, dtype=np.float64)
    b_zp = np.asarray(b_zp, dtype=np.float64)
    a64 = a.astype(np.float64) - (a_zp.reshape(-1, 1) if a_zp.size > 1 else a_zp.reshape(()))
    b64 = b.astype(np.float64) - (b_zp.reshape(-1) if b_zp.size > 1 else b_zp.reshape(()))
    return np.matmul(a64, b64)


def matmul_integer(op, a, b, a_zp, b_zp):
    return integer_matmul(a, a_zp, b, b_zp).astype(np.int32)


KERNELS = {nn.MATMUL_INTEGER: matmul_integer}
