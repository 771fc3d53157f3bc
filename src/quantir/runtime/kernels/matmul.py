"""``nn.matmul``: numpy.matmul (batched, broadcasting, 1-D promotion)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn

KERNELS = {nn.MATMUL: lambda op, a, b: np.matmul(a, b)}
