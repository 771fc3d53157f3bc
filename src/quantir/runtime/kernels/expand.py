"""``nn.expand``: broadcast to ``shape`` (bidirectionally); a read-only view, no copy.
``nn.dynamic_expand`` does the same with the shape read at run time."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from .limits import check_allocation, result_what


def expand(op, x):
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(op.attr("shape"))))


def dynamic_expand(op, x, shape):
    target = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    try:
        out_shape = np.broadcast_shapes(x.shape, target)
    except ValueError:
        raise ShapeError(f"dynamic_expand: the shape {target} computed at run time does not broadcast with the "
                         f"input's {x.shape}") from None
    proven = tuple(op.attr("dims"))
    if any(p not in (-1, d) for p, d in zip(proven, out_shape)) or len(proven) != len(out_shape):
        raise ShapeError(f"dynamic_expand: the shape {target} computed at run time gives {out_shape}, but the "
                         f"model's other dims say {tuple('?' if p == -1 else p for p in proven)}")
    check_allocation(result_what(op), out_shape, x.dtype)
    return np.broadcast_to(x, out_shape)


KERNELS = {nn.EXPAND: expand, nn.DYNAMIC_EXPAND: dynamic_expand}
