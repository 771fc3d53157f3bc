"""``nn.slice``: basic numpy slicing with ONNX's clamped bounds (``nn_index.slice_bounds``)."""
from __future__ import annotations

from ...ir.dialects import nn
from ...ir.dialects.nn_index import slice_bounds


def slice_(op, x):
    index = [slice(None)] * x.ndim
    for axis, (start, stop, step) in slice_bounds(x.shape, op.opdef.attr_values(op)).items():
        index[axis] = slice(start, None if stop < 0 else stop, step)
    return x[tuple(index)]


KERNELS = {nn.SLICE: slice_}
