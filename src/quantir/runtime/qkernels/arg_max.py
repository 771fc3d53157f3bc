"""ARG_MAX on int8/uint8 (``kernels/arg_min_max.cc``): the index of the largest stored q along one axis.

The scale is positive, so the largest q is the largest real value and no parameters enter.
LiteRT keeps the first index among equal maxima (its comparison is strict), removes the axis
(ONNX ``keepdims=1`` is a reshape after it; ``select_last_index=1`` has no LiteRT form), and
writes int32 or int64 as ``ArgMaxOptions.output_type`` says. Any layout: ``axis`` is taken
as given, so an NCHW axis must be mapped when the tensor lives in NHWC in a .tflite file.
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._common import QKernelError, check_quantized

__all__ = ["arg_max"]

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def arg_max(x: np.ndarray, *, axis: int, output_dtype=np.int64) -> np.ndarray:
    """Indices of the first maximum of ``x`` along ``axis`` (negative counts from the end), axis removed.

    >>> arg_max(np.array([[3, 7, 7, -1], [5, 5, 2, 9]], np.int8), axis=1)
    array([1, 3])
    """
    x = check_quantized(x, "arg_max", "input", (np.int8, np.uint8))
    out_dtype = np.dtype(output_dtype)
    if out_dtype not in _INDEX_DTYPES:
        raise QKernelError(f"arg_max: output type must be int32 or int64, found {out_dtype}")
    if x.ndim < 1:
        raise QKernelError("arg_max: input must have at least one dimension, found a scalar")
    a = int(axis)
    if not -x.ndim <= a < x.ndim:
        raise QKernelError(f"arg_max: axis must be in [{-x.ndim}, {x.ndim}) for a rank-{x.ndim} input, found {a}")
    if x.shape[a] == 0:
        raise QKernelError(f"arg_max: cannot take the maximum over the empty axis {a} of shape {x.shape}")
    return np.argmax(x, axis=a).astype(out_dtype)  # numpy also keeps the first of equal maxima
