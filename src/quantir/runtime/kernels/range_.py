"""``nn.range``: ``start + i * delta`` for ``i < max(ceil((limit - start) / delta), 0)``."""
from __future__ import annotations

import math

import numpy as np

from ...ir.dialects import nn


def range_(op, start, limit, delta):
    n = max(int(math.ceil((limit.item() - start.item()) / delta.item())), 0)
    return (start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)


KERNELS = {nn.RANGE: range_}
