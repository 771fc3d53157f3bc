"""``nn.constant_of_shape``: a tensor of ``shape`` filled with ``value`` (f32 zero by default)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def constant_of_shape(op):
    value = op.attr("value")
    fill = np.zeros((), np.float32) if value is None else value.reshape(())
    return np.full(tuple(op.attr("shape")), fill, dtype=fill.dtype)


KERNELS = {nn.CONSTANT_OF_SHAPE: constant_of_shape}
