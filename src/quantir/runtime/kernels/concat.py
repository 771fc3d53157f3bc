"""``nn.concat`` along ``axis``."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn

KERNELS = {nn.CONCAT: lambda op, *xs: np.concatenate(xs, axis=op.attr("axis"))}
