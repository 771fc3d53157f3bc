"""256-entry lookup tables of the int8 transcendental ops (``LUTPopulateInt8``, ``common.h``).

For every q in [-128, 127]: ``x = f32(s_in · f32(q - zp_in))``, ``y = f(x)`` in float32,
``lut[q] = clamp(rha(f32(y · f32(1/s_out))) + zp_out)``. Building the table is the op's
Prepare (float is fine there); evaluating is an integer gather.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from quantir.numerics import round_half_away, saturate
from quantir.runtime.qkernels._common import check_quantized, check_zero_point, lookup_table


def populate_lut(transform: Callable[[np.ndarray], np.ndarray], input_scale: float, input_zero_point: int,
                 output_scale: float, output_zero_point: int, op: str) -> np.ndarray:
    zp_in = check_zero_point(input_zero_point, op, "input zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    q = np.arange(-128, 128)
    x = np.float32(input_scale) * (q - zp_in).astype(np.float32)
    y = np.asarray(transform(x), dtype=np.float32)
    inverse = np.float32(1.0) / np.float32(output_scale)
    return saturate(round_half_away(y * inverse) + zp_out, -128, 127).astype(np.int8)


def lookup(x: np.ndarray, table: np.ndarray, op: str) -> np.ndarray:
    x = check_quantized(x, op, "input")
    table = np.asarray(table, dtype=np.int8)
    if table.shape != (256,):
        raise ValueError(f"{op}: the table must have 256 entries, found shape {table.shape}")
    return lookup_table(x, table)


def expf(x: np.ndarray) -> np.ndarray:
    """float32 ``exp``: float64 result rounded to float32 (a correctly rounded expf almost always)."""
    return np.exp(np.asarray(x, dtype=np.float64)).astype(np.float32)


def tanhf(x: np.ndarray) -> np.ndarray:
    return np.tanh(np.asarray(x, dtype=np.float64)).astype(np.float32)
