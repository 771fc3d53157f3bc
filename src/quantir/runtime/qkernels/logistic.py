"""LOGISTIC, int8 (``SigmoidPrepare`` + LUT, docs/numerics.md §2.13), in both resolvers.

``lut[q] = clamp(rha(f32(σ(x) · 256)) + zp_out)`` with ``σ(x) = 1.0f / (1.0f + expf(-x))``
in float32. LiteRT requires the output scale to be exactly 1/256 (the spec zero point is
-128, but only the fixed-point variant checks it).

int16 (``storage=np.int16``): ``reference_integer_ops::Logistic``,
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

from typing import Any

import numpy as np

from quantir.runtime.qkernels._common import QKernelError
from quantir.runtime.qkernels._lut import expf, lookup, populate_lut
from quantir.runtime.qkernels._lut16 import (lut16_lookup, prepare_sigmoid_family, scaled_sigmoid_input,
                                             sigmoid_table_interpolated)

__all__ = ["prepare_logistic", "logistic"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = np.float32(1.0)
    with np.errstate(over="ignore"):  # expf overflows to +inf for x < -88.7, giving 0 as in C
        return one / (one + expf(-x))


def prepare_logistic(input_scale: float, input_zero_point: int, output_scale: float | None = None,
                     output_zero_point: int | None = None, *, storage: Any = np.int8) -> np.ndarray:
    """The lookup table: 256 int8 entries, or with ``storage=np.int16`` the int16 kernel's output for
    all 65,536 inputs. Raises QKernelError unless the output scale is exactly 1/256 (int8; zero point
    -128 by default) or 1/32768 with zero points 0 (int16)."""
    if np.dtype(storage) == np.int16:
        output_scale = 1 / 32768 if output_scale is None else output_scale
        if np.float32(output_scale) != np.float32(1 / 32768):
            raise QKernelError(f"logistic: int16 output scale must be exactly 1/32768, found {output_scale} "
                               "(LiteRT SigmoidPrepare checks output scale == 1/32768)")
        p = prepare_sigmoid_family("logistic", input_scale, input_zero_point, output_scale,
                                   0 if output_zero_point is None else output_zero_point, (0,))
        return _logistic_int16_values(p.input_multiplier, p.input_left_shift)
    output_scale = 1 / 256 if output_scale is None else output_scale
    output_zero_point = -128 if output_zero_point is None else output_zero_point
    if np.float32(output_scale) != np.float32(1 / 256):
        raise QKernelError(f"logistic: int8 output scale must be exactly 1/256, found {output_scale} "
                           "(LiteRT SigmoidPrepare rejects it)")
    return populate_lut(_sigmoid, input_scale, input_zero_point, output_scale, output_zero_point, "logistic")


def logistic(x: np.ndarray, *, table: np.ndarray) -> np.ndarray:
    """Gathers ``table`` (from :func:`prepare_logistic` with the same storage) at ``x``, int8 or int16."""
    if np.asarray(x).dtype == np.int16:
        return lut16_lookup(x, table, "logistic")
    return lookup(x, table, "logistic")


def _logistic_int16_values(input_multiplier: int, input_left_shift: int) -> np.ndarray:
    """The int16 LOGISTIC of every int16 value, in order -32768..32767."""
    d = scaled_sigmoid_input(input_multiplier, input_left_shift)
    r = sigmoid_table_interpolated(d, 9, 0x7FFF << 10)
    r = np.where(d >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return (r >> 10).astype(np.int16)
