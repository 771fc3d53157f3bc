"""Pure reshapes as one generic kernel and a table of target-shape rules: ``nn.reshape``,
``nn.flatten``, ``nn.squeeze``, ``nn.unsqueeze`` (the data is never copied)."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from ...ir.dialects.nn_shape import reshape_shape


def _flatten(op, shape):
    axis = op.attr("axis") + len(shape) if op.attr("axis") < 0 else op.attr("axis")
    return math.prod(shape[:axis]), math.prod(shape[axis:])


def _squeeze(op, shape):
    axes = op.attr("axes")
    axes = {a % len(shape) for a in axes} if axes is not None else {i for i, d in enumerate(shape) if d == 1}
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _unsqueeze(op, shape):
    rank = len(shape) + len(op.attr("axes"))
    axes = {a % rank for a in op.attr("axes")}
    rest = iter(shape)
    return tuple(1 if i in axes else next(rest) for i in range(rank))


TARGET_SHAPES = {
    nn.RESHAPE: lambda op, shape: reshape_shape(shape, op.attr("shape"), op.attr("allowzero")),
    nn.FLATTEN: _flatten,
    nn.SQUEEZE: _squeeze,
    nn.UNSQUEEZE: _unsqueeze,
}


def _reshape_kernel(rule):
    return lambda op, x: x.reshape(rule(op, x.shape))


def dynamic_reshape(op, x, shape):
    """ONNX Reshape with the target read at run time; a result that contradicts the dims the
    importer proved (the type the rest of the graph was built on) is refused."""
    target = reshape_shape(x.shape, tuple(int(d) for d in np.asarray(shape).reshape(-1)), op.attr("allowzero"))
    proved = op.attr("dims")
    if len(target) != len(proved) or any(p >= 0 and p != d for p, d in zip(proved, target)):
        raise ShapeError(f"dynamic_reshape: the shape {tuple(int(d) for d in shape)} computed at run time gives "
                         f"{target}, but the model's types say {tuple(None if p < 0 else p for p in proved)}")
    return x.reshape(target)


KERNELS = {opdef: _reshape_kernel(rule) for opdef, rule in TARGET_SHAPES.items()}
KERNELS[nn.DYNAMIC_RESHAPE] = dynamic_reshape
