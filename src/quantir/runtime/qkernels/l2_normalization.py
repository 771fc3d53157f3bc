"""L2_NORMALIZATION, int8 (``reference_integer_ops::L2Normalization``, docs/numerics.md §2.19).

Output parameters are fixed at (1/128, 0). Per row along ``axis`` (LiteRT: the last)::

    acc      = Σ (q - zp_in)²                                  (int32)
    (M, s)   = GetInvSqrtQuantizedMultiplierExp(acc, -1)        1/sqrt(acc) in fixed point
    out      = clamp(MBQM(q - zp_in, M, s + 7), -128, 127)
"""
from __future__ import annotations

import numpy as np

from quantir.numerics import get_inv_sqrt_quantized_multiplier_exp, saturate
from quantir.runtime.qkernels._common import (QKernelError, check_accumulator, check_quantized,
                                              multiply_by_quantized_multiplier)

__all__ = ["prepare_l2_normalization", "l2_normalization"]


def prepare_l2_normalization(output_scale: float, output_zero_point: int, *, activation: str = "none") -> None:
    """The checks of LiteRT's ``l2norm.cc`` Prepare: output exactly (1/128, 0), no fused activation.
    (Any rank: older LiteRT refused rank 5 and more, 2.3.0 normalises their last axis too.)
    The int8 kernel itself has no parameters beyond the input zero point; both resolvers run it."""
    if np.float32(output_scale) != np.float32(1 / 128) or int(output_zero_point) != 0:
        raise QKernelError(f"l2_normalization: int8 output must be (1/128, 0), found ({output_scale}, "
                           f"{output_zero_point})")
    if activation != "none":
        raise QKernelError(f"l2_normalization: LiteRT refuses a fused activation, found {activation!r}")


def l2_normalization(x: np.ndarray, *, input_zero_point: int, axis: int = -1) -> np.ndarray:
    x = check_quantized(x, "l2_normalization", "input")
    v = np.moveaxis(x, axis, -1).astype(np.int64) - int(input_zero_point)
    acc = np.sum(v * v, axis=-1, keepdims=True)
    check_accumulator(acc, "l2_normalization")
    inv, shift = get_inv_sqrt_quantized_multiplier_exp(acc, -1)
    out = saturate(multiply_by_quantized_multiplier(v, inv, shift + 7), -128, 127).astype(np.int8)
    return np.moveaxis(out, -1, axis)
