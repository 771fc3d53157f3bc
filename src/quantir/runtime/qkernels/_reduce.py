"""Axis handling shared by MEAN and SUM."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def resolve_axes(axes: Sequence[int] | int, ndim: int, op: str) -> tuple[int, ...]:
    """Normalise (negative axes, duplicates removed) like ``reference_ops::ResolveAxis``."""
    raw = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    out: list[int] = []
    for a in raw:
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of range for a rank-{ndim} input")
        a %= ndim
        if a not in out:
            out.append(a)
    return tuple(out)


def reduced_count(shape: Sequence[int], axes: tuple[int, ...]) -> int:
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))
