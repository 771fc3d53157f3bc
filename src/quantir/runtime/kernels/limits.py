"""Allocation limits: every array whose size a model file's numbers control is checked before
it is made, and refused with a ``ResourceError`` that names it, instead of numpy's
``MemoryError`` (or a 64 GiB attempt that the OS grants and then kills).

Design notes
- The limit is per tensor (results and kernel scratch buffers alike): 4 GiB by default, set
  explicitly by ``Interpreter(..., max_tensor_bytes=...)``. Kernels share one signature,
  ``kernel(op, *inputs)``, so the interpreter hands its limit down for the duration of one
  run through a context variable (:func:`tensor_limit`) rather than through forty kernel
  signatures; it is scoped to the run, never read from the environment.
- Sizes are Python ints (``math.prod`` of Python ints): a numpy int64 product of huge dims
  would wrap around and pass the check.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Iterable, Iterator

import numpy as np

from ...errors import ResourceError

__all__ = ["DEFAULT_MAX_TENSOR_BYTES", "tensor_limit", "current_limit", "check_allocation", "format_bytes",
           "nbytes"]

DEFAULT_MAX_TENSOR_BYTES = 4 << 30

_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("quantir_max_tensor_bytes",
                                                                     default=DEFAULT_MAX_TENSOR_BYTES)


@contextlib.contextmanager
def tensor_limit(max_bytes: int | None) -> Iterator[None]:
    """Within the block, :func:`check_allocation` refuses tensors over ``max_bytes`` (None: no limit)."""
    token = _LIMIT.set(max_bytes)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def current_limit() -> int | None:
    return _LIMIT.get()


def nbytes(shape: Iterable[int], dtype) -> int:
    """Bytes of an array of ``shape`` and ``dtype``, exact for any dims (Python ints)."""
    return math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize


def format_bytes(n: int) -> str:
    if n >= 1 << 50:
        return f"{n:.3g} bytes"     # no unit makes 2**94 bytes readable; the exponent does
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def check_allocation(what: str, shape: Iterable[int], dtype, limit: int | None = None) -> None:
    """Raise ``ResourceError`` when an array of ``shape``/``dtype`` would exceed ``limit``
    (default: the current run's limit). ``what`` names the tensor and the op that makes it."""
    limit = current_limit() if limit is None else limit
    shape = tuple(int(d) for d in shape)
    size = nbytes(shape, dtype)
    if limit is not None and size > limit:
        raise ResourceError(f"{what} would need shape [{', '.join(map(str, shape))}] of {np.dtype(dtype)} = "
                            f"{format_bytes(size)}, over the limit of {format_bytes(limit)} per tensor; "
                            f"the model's sizes are likely corrupt (or raise max_tensor_bytes)")
    # numpy refuses a shape whose non-zero dims overflow its index type even when another dim is
    # 0 ('array is too big'): an empty tensor of such a shape cannot exist either
    if math.prod(d for d in shape if d != 0) * np.dtype(dtype).itemsize > np.iinfo(np.intp).max:
        raise ResourceError(f"{what} would need shape [{', '.join(map(str, shape))}] of {np.dtype(dtype)}: "
                            f"empty, but its other dims exceed what an array can index "
                            f"({format_bytes(np.iinfo(np.intp).max)}); the model's sizes are likely corrupt")


def result_what(op, index: int = 0) -> str:
    """``tensor 'y' of 'nn.tile' (node 'Tile_3')``: how an error names a result of ``op``."""
    r = op.results[index] if index < len(op.results) else None
    name = f"tensor '{r.name_hint}'" if r is not None and r.name_hint else f"result {index}"
    return f"{name} of {op.describe()}"
