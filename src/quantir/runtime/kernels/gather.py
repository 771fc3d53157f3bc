"""``nn.gather``: ``numpy.take`` along ``axis`` (negative indices count from the end)."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn


def gather(op, data, indices):
    axis = op.attr("axis")
    idx = indices.astype(np.int64)
    n = data.shape[axis] if data.ndim else 0
    if idx.size and (idx.min() < -n or idx.max() >= n):   # ONNX Runtime refuses these too
        bad = int(idx.min() if idx.min() < -n else idx.max())
        raise ShapeError(f"gather: index {bad} is out of range for axis {axis} of size {n} (valid: {-n} to {n - 1})")
    return np.take(data, idx, axis=axis)


KERNELS = {nn.GATHER: gather}
