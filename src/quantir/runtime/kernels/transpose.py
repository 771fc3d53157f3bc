"""``nn.transpose``: permute dims (reversed when ``perm`` is absent); a view."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def transpose(op, x):
    perm = op.attr("perm")
    return np.transpose(x, None if perm is None else tuple(perm))


KERNELS = {nn.TRANSPOSE: transpose}
