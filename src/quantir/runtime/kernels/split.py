"""``nn.split`` into explicit sizes or ``num_outputs`` chunks (see ``nn_index.split_sizes``)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_index import split_sizes


def split(op, x):
    axis = op.attr("axis") % x.ndim
    sizes = split_sizes(x.shape[axis], op.opdef.attr_values(op))
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


KERNELS = {nn.SPLIT: split}
