"""``nn.shape`` and ``nn.size``: metadata of the input as i64 tensors (folded at import
whenever the input's dims are static)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_shape import shape_slice


def shape(op, x):
    start, end = shape_slice(x.ndim, op.opdef.attr_values(op))
    return np.array(x.shape[start:end], dtype=np.int64)


KERNELS = {nn.SHAPE: shape, nn.SIZE: lambda op, x: np.array(x.size, dtype=np.int64)}
