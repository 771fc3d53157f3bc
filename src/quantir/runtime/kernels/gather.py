"""``nn.gather``: ``numpy.take`` along ``axis`` (negative indices count from the end)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn

KERNELS = {nn.GATHER: lambda op, data, indices: np.take(data, indices.astype(np.int64), axis=op.attr("axis"))}
