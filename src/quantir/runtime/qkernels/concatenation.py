"""CONCATENATION, int8 (``kernels/concatenation.cc``, docs/numerics.md §2.9): a plain copy.

LiteRT's int8 kernel does not rescale: Prepare requires every input to carry exactly the
output's scale and zero point (the converter inserts requantizing QUANTIZE ops where
producers disagree, see :func:`~quantir.runtime.qkernels.quantize.requantize`).
:func:`prepare_concatenation` applies the same rule. (The uint8-only rescaling variant is
not implemented.)

int16 (``storage=np.int16``): LiteRT's Prepare requires zero point 0 on every input and the
output, and does *not* compare scales — an input with another scale is copied raw, i.e.
silently misread. quantir keeps the equal-scale rule for int16 too.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantir.runtime.qkernels._common import QKernelError, check_quantized

__all__ = ["prepare_concatenation", "concatenation"]


def prepare_concatenation(input_params: Sequence[tuple[float, int]], output_scale: float,
                          output_zero_point: int, *, storage=np.int8) -> None:
    """Check that every ``(scale, zero_point)`` equals the output's (float32 comparison)."""
    if np.dtype(storage) == np.int16 and any(int(z) for _, z in [*input_params, (output_scale, output_zero_point)]):
        raise QKernelError("concatenation: int16 inputs and output need zero point 0 (concatenation.cc Prepare: "
                           f"TF_LITE_ENSURE_EQ zero_point, 0), found {[int(z) for _, z in input_params]} and "
                           f"{output_zero_point}")
    for i, (s, z) in enumerate(input_params):
        if np.float32(s) != np.float32(output_scale) or int(z) != int(output_zero_point):
            raise QKernelError(f"concatenation: input {i} has scale {s} and zero point {z}, the output "
                               f"{output_scale} and {output_zero_point}; int8 CONCATENATION cannot rescale "
                               "(requantize the input first; LiteRT's int16 kernel would copy it unscaled)")


def concatenation(inputs: Sequence[np.ndarray], *, axis: int) -> np.ndarray:
    """Concatenate int8 arrays along ``axis``."""
    arrays = [check_quantized(x, "concatenation", f"input {i}", (np.int8, np.uint8, np.int16))
              for i, x in enumerate(inputs)]
    if not arrays:
        raise ValueError("concatenation: needs at least one input")
    if len({a.dtype for a in arrays}) != 1:
        raise TypeError("concatenation: inputs must share one dtype")
    return np.concatenate(arrays, axis=axis)
