"""DEQUANTIZE (``reference_integer_ops::Dequantize``, docs/numerics.md §2.11).

``y = f32(double(s)·(q - zp))``: the product is exact, so this is bit-identical to
``f32(s) · f32(q - zp)``. Per tensor or per channel (``axis``). LiteRT's Prepare requires zero
point 0 on an int16 input (``dequantize.cc``); so does :func:`dequantize`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from quantir.numerics import dequantize as _dequantize
from quantir.runtime.qkernels._common import QKernelError, check_quantized

__all__ = ["dequantize"]


def dequantize(q: np.ndarray, *, scale: Any, zero_point: Any, axis: int | None = None) -> np.ndarray:
    """Integer -> float32."""
    q = check_quantized(q, "dequantize", "input", (np.int8, np.uint8, np.int16, np.int32))
    if q.dtype == np.int16 and np.any(np.asarray(zero_point) != 0):
        raise QKernelError(f"dequantize: an int16 input needs zero point 0, found {zero_point} "
                           "(dequantize.cc Prepare: TF_LITE_ENSURE_EQ zero_point, 0)")
    return np.asarray(_dequantize(q, scale, zero_point, axis=axis, scheme="tflite"), dtype=np.float32)
