"""TANH, int8 (``TanhPrepare`` + LUT, docs/numerics.md §2.13), in both resolvers.

``lut[q] = clamp(rha(f32(tanhf(x) / s_out)) + zp_out)``. The spec output is (1/128, 0),
but the int8 LUT kernels accept any output parameters, and so does this.

int16 (:func:`prepare_tanh_int16`, :func:`tanh_int16`): ``reference_integer_ops::Tanh`` on the
sigmoid table (tanh(x) = 2σ(2x) - 1), so the table index takes 8 bits less than LOGISTIC's::

    a = |d|, u = a >> 8, t = a & 255
    r = (T[u] << 8) + t·(T[u+1] - T[u])       (u < 255; else 65535 << 8)
    out = (r - 2**23 + 128) >> 8              d >= 0
    out = (-r + 2**23 + 127) >> 8             d < 0   (arithmetic shift)

A power-of-two input scale of 2**-12 or 2**-11 needs no multiplier. Output (1/32768, 0): the
output scale must be 2**-15 to CheckedLog2's tolerance, zero points 0.
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._lut import lookup, populate_lut, tanhf
from quantir.runtime.qkernels._lut16 import (Int16ActivationParams, lut16_lookup, prepare_sigmoid_family,
                                             scaled_sigmoid_input, sigmoid_table_uint16)

__all__ = ["prepare_tanh", "tanh", "prepare_tanh_int16", "tanh_int16"]


def prepare_tanh(input_scale: float, input_zero_point: int, output_scale: float = 1 / 128,
                 output_zero_point: int = 0) -> np.ndarray:
    return populate_lut(tanhf, input_scale, input_zero_point, output_scale, output_zero_point, "tanh")


def tanh(x: np.ndarray, *, table: np.ndarray) -> np.ndarray:
    return lookup(x, table, "tanh")


def prepare_tanh_int16(input_scale: float, input_zero_point: int = 0, output_scale: float = 1 / 32768,
                       output_zero_point: int = 0) -> Int16ActivationParams:
    """``TanhPrepare`` for int16."""
    return prepare_sigmoid_family("tanh", input_scale, input_zero_point, output_scale, output_zero_point, (0, 1))


def tanh_values(input_multiplier: int, input_left_shift: int) -> np.ndarray:
    """The int16 TANH of every int16 value, in order -32768..32767."""
    d = scaled_sigmoid_input(input_multiplier, input_left_shift)
    a = np.abs(d)
    u = np.minimum(a >> 8, 254)
    table = sigmoid_table_uint16()
    lo, hi = table[u], table[u + 1]
    r = np.where((a >> 8) >= 255, 0xFFFF << 8, (lo << 8) + (a & 0xFF) * (hi - lo))
    r = np.where(d >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return (r >> 8).astype(np.int16)


def tanh_int16(x: np.ndarray, *, input_multiplier: int, input_left_shift: int) -> np.ndarray:
    return lut16_lookup(x, tanh_values(input_multiplier, input_left_shift), "tanh")
