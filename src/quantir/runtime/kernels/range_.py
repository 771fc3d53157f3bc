"""``nn.range``: ``start + i * delta`` for ``i < max(ceil((limit - start) / delta), 0)``."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from .limits import check_allocation, result_what


def range_length(start, limit, delta) -> int:
    """The number of elements, refused (``ShapeError``) when it is not a finite count."""
    s, lim, d = start.item(), limit.item(), delta.item()
    if d == 0:
        raise ShapeError(f"range delta is 0 (start {s}, limit {lim}): the range would be infinite")
    n = (lim - s) / d if isinstance(s, float) or isinstance(lim, float) or isinstance(d, float) else None
    if n is not None and not math.isfinite(n):
        raise ShapeError(f"range ({s}, {lim}, {d}) has no finite length")
    return max(math.ceil(n) if n is not None else -((s - lim) // d), 0)


def range_(op, start, limit, delta):
    n = range_length(start, limit, delta)
    check_allocation(result_what(op), (n,), start.dtype)
    return (start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)


KERNELS = {nn.RANGE: range_}
