"""PAD / PADV2, int8 or int16 (``kernels/pad.cc``, docs/numerics.md §2.18): data movement on raw q.

The pad value is the output zero point (real 0.0), or with PADV2 the stored q of a
``constant_values`` tensor whose scale and zero point must equal the output's. Input and
output share their parameters.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from quantir.runtime.qkernels._common import QKernelError, check_quantized, check_zero_point, storage_limits

__all__ = ["prepare_pad", "pad"]


def prepare_pad(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int, *,
                constant: tuple[int, float, int] | None = None, storage: Any = np.int8) -> int:
    """The stored pad value. ``constant`` is ``(q, scale, zero_point)`` of PADV2's constant_values;
    ``storage=np.int16`` for int16 tensors (LiteRT's PAD/PADV2 take any int16 zero point and value)."""
    op = "pad"
    lo, hi = storage_limits(storage, op)
    zp_out = check_zero_point(output_zero_point, op, "output zero point", lo, hi)
    if np.float32(input_scale) != np.float32(output_scale) or int(input_zero_point) != zp_out:
        raise QKernelError(f"{op}: input and output quantization must be equal (pad moves raw values)")
    if constant is None:
        return zp_out
    q, scale, zp = constant
    if np.float32(scale) != np.float32(output_scale) or int(zp) != zp_out:
        raise QKernelError(f"{op}: constant_values must be quantized like the output (scale {output_scale}, "
                           f"zero point {zp_out}), found scale {scale} and zero point {zp}")
    return check_zero_point(q, op, "constant value", lo, hi)


def pad(x: np.ndarray, *, pads: Sequence[tuple[int, int]], value: int) -> np.ndarray:
    """Pad every axis by ``pads[axis] = (before, after)`` with ``value`` (stored like ``x``: int8 or int16)."""
    x = check_quantized(x, "pad", "input", (np.int8, np.int16))
    widths = [(int(b), int(a)) for b, a in pads]
    if len(widths) != x.ndim or any(b < 0 or a < 0 for b, a in widths):
        raise ValueError(f"pad: need {x.ndim} non-negative (before, after) pairs, found {list(pads)}")
    return np.pad(x, widths, mode="constant", constant_values=x.dtype.type(value))
