"""``nn.constant_of_shape``: a tensor of ``shape`` filled with ``value`` (f32 zero by default).

The result is a read-only broadcast view of the one value (a lazy splat): it costs no memory
whatever the shape, and constant folding keeps it lazy. The interpreter checks the result's
static size against its limit before any kernel runs (``limits``)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def constant_of_shape(op):
    value = op.attr("value")
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(())
    shape = tuple(op.attr("shape"))
    return np.broadcast_to(fill.copy(), shape)


KERNELS = {nn.CONSTANT_OF_SHAPE: constant_of_shape}
