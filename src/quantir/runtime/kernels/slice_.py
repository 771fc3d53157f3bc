"""``nn.slice``: basic numpy slicing with ONNX's clamped bounds (``nn_index.slice_bounds``);
``nn.dynamic_slice`` reads the bounds at run time."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from ...ir.dialects.nn_index import slice_bounds


def _sliced(x, bounds):
    index = [slice(None)] * x.ndim
    for axis, (start, stop, step) in slice_bounds(x.shape, bounds).items():
        index[axis] = slice(start, None if stop < 0 else stop, step)
    return x[tuple(index)]


def slice_(op, x):
    return _sliced(x, op.opdef.attr_values(op))


def dynamic_slice(op, x, starts, ends, axes=None, steps=None):
    def ints(a):
        return None if a is None else tuple(int(v) for v in np.asarray(a).reshape(-1))
    out = _sliced(x, {"starts": ints(starts), "ends": ints(ends), "axes": ints(axes), "steps": ints(steps)})
    proven = tuple(op.attr("dims"))
    if any(p not in (-1, d) for p, d in zip(proven, out.shape)):
        raise ShapeError(f"dynamic_slice: the bounds computed at run time give {out.shape}, but the model's "
                         f"other dims say {tuple('?' if p == -1 else p for p in proven)}")
    return out


KERNELS = {nn.SLICE: slice_, nn.DYNAMIC_SLICE: dynamic_slice}
