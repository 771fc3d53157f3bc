"""``nn.global_average_pool`` and ``nn.global_max_pool``: one generic kernel, a table of reductions
over all spatial dims (kept as size 1)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn

REDUCTIONS = {nn.GLOBAL_AVERAGE_POOL: np.mean, nn.GLOBAL_MAX_POOL: np.max}


def _global(reduce):
    return lambda op, x: reduce(x, axis=tuple(range(2, x.ndim)), keepdims=True).astype(x.dtype, copy=False)


KERNELS = {opdef: _global(fn) for opdef, fn in REDUCTIONS.items()}
