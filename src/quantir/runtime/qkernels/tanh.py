"""TANH, int8 (``TanhPrepare`` + LUT, docs/numerics.md §2.13), in both resolvers.

``lut[q] = clamp(rha(f32(tanhf(x) / s_out)) + zp_out)``. The spec output is (1/128, 0),
but the int8 LUT kernels accept any output parameters, and so does this.
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._lut import lookup, populate_lut, tanhf

__all__ = ["prepare_tanh", "tanh"]


def prepare_tanh(input_scale: float, input_zero_point: int, output_scale: float = 1 / 128,
                 output_zero_point: int = 0) -> np.ndarray:
    return populate_lut(tanhf, input_scale, input_zero_point, output_scale, output_zero_point, "tanh")


def tanh(x: np.ndarray, *, table: np.ndarray) -> np.ndarray:
    return lookup(x, table, "tanh")
