"""TANH, int8 (``TanhPrepare`` + LUT, docs/numerics.md §2.13), in both resolvers.

``lut[q] = clamp(rha(f32(tanhf(x) / s_out)) + zp_out)``. The spec output is (1/128, 0),
but the int8 LUT kernels accept any output parameters, and so does this.

int16 (``storage=np.int16``): ``reference_integer_ops::Tanh`` on the
sigmoid table (tanh(x) = 2σ(2x) - 1), so the table index takes 8 bits less than LOGISTIC's::

    a = |d|, u = a >> 8, t = a & 255
    r = (T[u] << 8) + t·(T[u+1] - T[u])       (u < 255; else 65535 << 8)
    out = (r - 2**23 + 128) >> 8              d >= 0
    out = (-r + 2**23 + 127) >> 8             d < 0   (arithmetic shift)

A power-of-two input scale of 2**-12 or 2**-11 needs no multiplier. Output (1/32768, 0): the
output scale must be 2**-15 to CheckedLog2's tolerance, zero points 0.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from quantir.runtime.qkernels._lut import lookup, populate_lut, tanhf
from quantir.runtime.qkernels._lut16 import (lut16_lookup, prepare_sigmoid_family, scaled_sigmoid_input,
                                             sigmoid_table_interpolated)

__all__ = ["prepare_tanh", "tanh"]


def prepare_tanh(input_scale: float, input_zero_point: int, output_scale: float | None = None,
                 output_zero_point: int = 0, *, storage: Any = np.int8) -> np.ndarray:
    """The lookup table: 256 int8 entries (default output (1/128, 0)), or with ``storage=np.int16`` the
    int16 kernel's output for all 65,536 inputs (output (1/32768, 0))."""
    if np.dtype(storage) == np.int16:
        p = prepare_sigmoid_family("tanh", input_scale, input_zero_point,
                                   1 / 32768 if output_scale is None else output_scale, output_zero_point, (0, 1))
        return _tanh_int16_values(p.input_multiplier, p.input_left_shift)
    output_scale = 1 / 128 if output_scale is None else output_scale
    return populate_lut(tanhf, input_scale, input_zero_point, output_scale, output_zero_point, "tanh")


def tanh(x: np.ndarray, *, table: np.ndarray) -> np.ndarray:
    """Gathers ``table`` (from :func:`prepare_tanh` with the same storage) at ``x``, int8 or int16."""
    if np.asarray(x).dtype == np.int16:
        return lut16_lookup(x, table, "tanh")
    return lookup(x, table, "tanh")


def _tanh_int16_values(input_multiplier: int, input_left_shift: int) -> np.ndarray:
    """The int16 TANH of every int16 value, in order -32768..32767."""
    d = scaled_sigmoid_input(input_multiplier, input_left_shift)
    r = sigmoid_table_interpolated(d, 8, 0xFFFF << 8)
    r = np.where(d >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return (r >> 8).astype(np.int16)
