"""``nn.gather_elements``: ``output[i][j][k] = data[i][indices[i][j][k]][k]`` for ``axis = 1``
(ONNX GatherElements; negative indices count from the end)."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from ...ir.mapping import describe_value
from .gather import index_error


def gather_elements(op, data, indices):
    axis = op.attr("axis") % max(data.ndim, 1)
    n = data.shape[axis]
    idx = indices.astype(np.int64)
    bad = (idx < -n) | (idx >= n)   # ONNX Runtime refuses these too
    if bad.any():
        raise index_error(op, idx, bad, f"axis {axis} of size {n} of {describe_value(op.operands[0])}", -n, n - 1)
    if any(i > d for a, (i, d) in enumerate(zip(idx.shape, data.shape)) if a != axis) or idx.ndim != data.ndim:
        raise ShapeError(f"gather_elements: indices of shape {idx.shape} do not fit data of shape {data.shape} "
                         f"(same rank, no larger dim outside axis {axis})")
    # the other dims of indices may be smaller than data's: take_along_axis needs them equal or 1
    view = data[tuple(slice(0, s) if a != axis else slice(None) for a, s in enumerate(idx.shape))]
    return np.take_along_axis(view, np.where(idx < 0, idx + n, idx), axis=axis)


KERNELS = {nn.GATHER_ELEMENTS: gather_elements}
