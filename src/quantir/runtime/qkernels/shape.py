"""SHAPE (``kernels/shape.cc``): the dimensions of the input as a 1-D int32 or int64 tensor.

No value of the input is read, so its quantization does not matter and the output is not
quantized. The dimensions are those of the array given: quantir's NCHW shape here; a
.tflite exporter that keeps the tensor in NHWC must permute the result (or the indices that
consume it).
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._common import QKernelError

__all__ = ["shape"]


def shape(x: np.ndarray, *, output_dtype=np.int32) -> np.ndarray:
    """``x.shape`` as ``ShapeOptions.out_type`` (int32 or int64).

    >>> shape(np.zeros((1, 3, 4, 4), np.int8))
    array([1, 3, 4, 4], dtype=int32)
    """
    dt = np.dtype(output_dtype)
    if dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise QKernelError(f"shape: output type must be int32 or int64, found {dt}")
    dims = np.asarray(x).shape
    if dt == np.int32 and any(d > np.iinfo(np.int32).max for d in dims):
        raise QKernelError(f"shape: dimension of {dims} does not fit int32; use int64")
    return np.array(dims, dtype=dt)
