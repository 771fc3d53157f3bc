"""GATHER on int8/uint8 (``kernels/gather.cc``, ``reference_ops::Gather``): copy slices picked by index.

With ``batch_dims = b`` the first ``b`` axes of input and indices are paired; the output is
``input.shape[:axis] + indices.shape[b:] + input.shape[axis+1:]`` and every output slice is
the input slice at ``indices[...]`` along ``axis``. Stored q are copied, so the output
shares the input's parameters (the int8 spec's rule; LiteRT checks none):
:func:`prepare_gather`.

LiteRT refuses what ONNX allows: a **negative index** is an error (ONNX counts it from the
end, so the lowering must normalise constant indices), and so is an index past the axis. Both
raise :class:`QKernelError` here, as LiteRT's Eval fails. Indices are int16, int32 or int64.
Any layout: ``axis`` is taken as given.
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._common import QKernelError, check_quantized
from quantir.runtime.qkernels._same_params import check_same_params

__all__ = ["prepare_gather", "gather"]

_INDEX_DTYPES = (np.int16, np.int32, np.int64)


def prepare_gather(input_params: tuple[float, int], output_params: tuple[float, int]) -> None:
    """Check that the output's ``(scale, zero_point)`` equals the input's."""
    check_same_params("gather", [input_params], output_params)


def _normalized_axes(x: np.ndarray, idx: np.ndarray, axis: int, batch_dims: int) -> tuple[int, int]:
    a = int(axis) + x.ndim if int(axis) < 0 else int(axis)
    b = int(batch_dims) + idx.ndim if int(batch_dims) < 0 else int(batch_dims)
    if not 0 <= a < x.ndim:
        raise QKernelError(f"gather: axis must be in [{-x.ndim}, {x.ndim}) for a rank-{x.ndim} input, found {axis}")
    if not 0 <= b <= min(a, idx.ndim) or b >= x.ndim:
        raise QKernelError(f"gather: batch_dims must be in [0, min(axis, rank(indices))] = [0, {min(a, idx.ndim)}], "
                           f"found {batch_dims}")
    if x.shape[:b] != idx.shape[:b]:
        raise QKernelError(f"gather: the first {b} (batch) dimensions of input {x.shape} and indices {idx.shape} "
                           "must be equal")
    return a, b


def gather(x: np.ndarray, indices: np.ndarray, *, axis: int = 0, batch_dims: int = 0) -> np.ndarray:
    """LiteRT's GATHER of ``x`` by ``indices`` along ``axis``.

    >>> gather(np.array([[1, 2], [3, 4], [5, 6]], np.int8), np.array([2, 0]))
    array([[5, 6],
           [1, 2]], dtype=int8)
    """
    x = check_quantized(x, "gather", "input", (np.int8, np.uint8, np.int16))
    idx = check_quantized(indices, "gather", "indices", _INDEX_DTYPES).astype(np.int64)
    a, b = _normalized_axes(x, idx, axis, batch_dims)
    size = x.shape[a]
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise QKernelError(f"gather: index {bad} is outside [0, {size}) of axis {a}; LiteRT accepts neither negative "
                           "nor out-of-range indices (normalise negative ONNX indices first)")
    # Collapse to [batch, outer, axis, inner] and [batch, coords], gather, then restore the axes.
    batch = int(np.prod(x.shape[:b], dtype=np.int64))
    outer = int(np.prod(x.shape[b:a], dtype=np.int64))
    inner = int(np.prod(x.shape[a + 1:], dtype=np.int64))
    xr = x.reshape(batch, outer, size, inner)
    ir = idx.reshape(batch, int(np.prod(idx.shape[b:], dtype=np.int64)))
    out = xr[np.arange(batch)[:, None, None], np.arange(outer)[None, :, None], ir[:, None, :]]
    return out.reshape(x.shape[:a] + idx.shape[b:] + x.shape[a + 1:])
