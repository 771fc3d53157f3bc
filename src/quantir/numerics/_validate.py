"""Argument coercion and contract checks shared by the numerics modules (private).

The C kernels we mirror leave many inputs undefined (signed overflow, shifts of 32 or
more, asserts compiled out in release builds). Our functions instead check those
contracts and raise ``ValueError`` that names the function, the argument, the allowed
range and the offending value, so a bad multiplier or accumulator surfaces where it is
made rather than as a silently wrong int8 output three layers later.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

INT16_MIN = -(1 << 15)
INT16_MAX = (1 << 15) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def as_int64(x: ArrayLike, func: str, name: str) -> np.ndarray:
    """``x`` as an int64 array; floats are refused (integer paths never take floats)."""
    a = np.asarray(x)
    if a.dtype == np.int64:
        return a
    if a.dtype.kind in "iub":
        if a.dtype == np.uint64 and a.size and int(a.max()) > INT64_MAX:
            raise ValueError(f"{func}: {name} has a value above int64, found {int(a.max())}")
        return a.astype(np.int64)
    if a.dtype == object:  # Python ints beyond int64
        raise ValueError(f"{func}: {name} must fit in int64")
    raise TypeError(f"{func}: {name} must be an integer array or int, found dtype {a.dtype}")


def as_float64(x: ArrayLike, func: str, name: str) -> np.ndarray:
    """``x`` as a float64 array (widening float32 is exact); NaN/Inf refused."""
    a = np.asarray(x, dtype=np.float64)
    require_finite(a, func, name)
    return a


def require_finite(a: np.ndarray, func: str, name: str) -> None:
    if a.size and not np.all(np.isfinite(a)):
        bad = a[~np.isfinite(a)].ravel()[0]
        raise ValueError(f"{func}: {name} must be finite, found {bad}")


def require_range(a: np.ndarray, lo: int, hi: int, func: str, name: str) -> None:
    """Raise unless every element of the integer array ``a`` is in [lo, hi]."""
    if a.size == 0:
        return
    amin, amax = int(a.min()), int(a.max())
    if amin < lo or amax > hi:
        bad = amin if amin < lo else amax
        raise ValueError(f"{func}: {name} must be in [{lo}, {hi}], found {bad}")


def scalar_or_array(a: np.ndarray):
    """Unwrap 0-d arrays to NumPy scalars so scalar calls give scalars back."""
    return a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a
