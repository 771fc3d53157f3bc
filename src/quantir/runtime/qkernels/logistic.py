"""LOGISTIC, int8 (``SigmoidPrepare`` + LUT, docs/numerics.md §2.13), in both resolvers.

``lut[q] = clamp(rha(f32(σ(x) · 256)) + zp_out)`` with ``σ(x) = 1.0f / (1.0f + expf(-x))``
in float32. LiteRT requires the output scale to be exactly 1/256 (the spec zero point is
-128, but only the fixed-point variant checks it).
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._common import QKernelError
from quantir.runtime.qkernels._lut import expf, lookup, populate_lut

__all__ = ["prepare_logistic", "logistic"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = np.float32(1.0)
    with np.errstate(over="ignore"):  # expf overflows to +inf for x < -88.7, giving 0 as in C
        return one / (one + expf(-x))


def prepare_logistic(input_scale: float, input_zero_point: int, output_scale: float = 1 / 256,
                     output_zero_point: int = -128) -> np.ndarray:
    """The int8 lookup table; raises QKernelError unless ``output_scale == 1/256`` exactly."""
    if np.float32(output_scale) != np.float32(1 / 256):
        raise QKernelError(f"logistic: int8 output scale must be exactly 1/256, found {output_scale} "
                           "(LiteRT SigmoidPrepare rejects it)")
    return populate_lut(_sigmoid, input_scale, input_zero_point, output_scale, output_zero_point, "logistic")


def logistic(x: np.ndarray, *, table: np.ndarray) -> np.ndarray:
    return lookup(x, table, "logistic")
