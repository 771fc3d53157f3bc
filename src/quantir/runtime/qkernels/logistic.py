"""LOGISTIC, int8 (``SigmoidPrepare`` + LUT, docs/numerics.md §2.13), in both resolvers.

``lut[q] = clamp(rha(f32(σ(x) · 256)) + zp_out)`` with ``σ(x) = 1.0f / (1.0f + expf(-x))``
in float32. LiteRT requires the output scale to be exactly 1/256 (the spec zero point is
-128, but only the fixed-point variant checks it).

int16 (:func:`prepare_logistic_int16`, :func:`logistic_int16`): ``reference_integer_ops::Logistic``,
which every resolver runs when Prepare found a multiplier (a non-power-of-two input scale). With
``d`` the rescaled input of :func:`._lut16.scaled_sigmoid_input` (1/(3·4096) per step, so ±2**17 is
±10.7) and ``T`` LiteRT's sigmoid table (:func:`._lut16.sigmoid_table_uint16`, steps of 1/24)::

    a = |d|, u = a >> 9, t = a & 511
    r = (T[u] << 9) + t·(T[u+1] - T[u])       (u < 255; else 32767 << 10)
    out = (r + 512) >> 10                     d >= 0
    out = (2**25 - r + 511) >> 10             d < 0   (σ(-x) = 1 - σ(x))

Output (1/32768, 0), required exactly (zero points 0).
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._common import QKernelError
from quantir.runtime.qkernels._lut import expf, lookup, populate_lut
from quantir.runtime.qkernels._lut16 import (Int16ActivationParams, lut16_lookup, prepare_sigmoid_family,
                                             scaled_sigmoid_input, sigmoid_table_uint16)

__all__ = ["prepare_logistic", "logistic", "prepare_logistic_int16", "logistic_int16"]


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


def prepare_logistic_int16(input_scale: float, input_zero_point: int = 0, output_scale: float = 1 / 32768,
                           output_zero_point: int = 0) -> Int16ActivationParams:
    """``SigmoidPrepare`` for int16; raises QKernelError unless the output is exactly (1/32768, 0)."""
    if np.float32(output_scale) != np.float32(1 / 32768):
        raise QKernelError(f"logistic: int16 output scale must be exactly 1/32768, found {output_scale} "
                           "(LiteRT SigmoidPrepare checks output scale == 1/32768)")
    return prepare_sigmoid_family("logistic", input_scale, input_zero_point, output_scale, output_zero_point, (0,))


def logistic_values(input_multiplier: int, input_left_shift: int) -> np.ndarray:
    """The int16 LOGISTIC of every int16 value, in order -32768..32767."""
    d = scaled_sigmoid_input(input_multiplier, input_left_shift)
    a = np.abs(d)
    u = np.minimum(a >> 9, 254)
    table = sigmoid_table_uint16()
    lo, hi = table[u], table[u + 1]
    r = np.where((a >> 9) >= 255, 0x7FFF << 10, (lo << 9) + (a & 0x1FF) * (hi - lo))
    r = np.where(d >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return (r >> 10).astype(np.int16)


def logistic_int16(x: np.ndarray, *, input_multiplier: int, input_left_shift: int) -> np.ndarray:
    return lut16_lookup(x, logistic_values(input_multiplier, input_left_shift), "logistic")
