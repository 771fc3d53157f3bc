"""RESIZE_BILINEAR, int8 (``reference_ops::ResizeBilinearInteger``, docs/numerics.md §2.17).

Raw q values are interpolated with 10-bit fixed-point coordinates (input and output share
their parameters), in both resolvers. For an output row ``y`` (columns alike)::

    scale_10 = ((in << 10) + out/2) / out                        (align_corners, out > 1:
               ((in - 1) << 10 + (out - 1)/2) / (out - 1))
    ys       = y·scale_10 + scale_10/2 - 512   (half_pixel_centers)   or   y·scale_10
    y0       = max(ys / 1024, 0),  y1 = min((ys + 1023) / 1024, in - 1)     C division
    value    = Σ q[y?, x?] · wy · wx   with wy1 = ys - 1024·y0, wy0 = 1024 - wy1
    out      = (value ± 2**19) / 2**20     (default build: rounding half away from zero)

Coordinates use C's truncating integer division (``_c_div``); ``wy1`` can be negative at the
border with half-pixel centers, exactly as in LiteRT. NCHW layout.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantir.numerics import div_round_half_away, saturate
from quantir.runtime.qkernels._common import QKernelError, check_quantized

__all__ = ["prepare_resize_bilinear", "resize_bilinear"]


def prepare_resize_bilinear(align_corners: bool, half_pixel_centers: bool) -> None:
    if align_corners and half_pixel_centers:
        raise QKernelError("resize_bilinear: align_corners and half_pixel_centers cannot both be set "
                           "(LiteRT rejects it)")


def _c_div(a: np.ndarray | int, b: int) -> np.ndarray:
    """C integer division (truncation toward zero) of index arithmetic by a positive ``b``."""
    a = np.asarray(a, dtype=np.int64)
    return np.where(a < 0, -((-a) // b), a // b)


def _axis(size_in: int, size_out: int, align_corners: bool, half_pixel_centers: bool):
    scale = ((size_in << 10) + size_out // 2) // size_out
    if align_corners and size_out > 1:
        scale = (((size_in - 1) << 10) + (size_out - 1) // 2) // (size_out - 1)
    pos = np.arange(size_out, dtype=np.int64) * scale
    if half_pixel_centers:
        pos = pos + scale // 2 - (1 << 9)
    lo = np.maximum(_c_div(pos, 1 << 10), 0)
    hi = np.minimum(_c_div(pos + (1 << 10) - 1, 1 << 10), size_in - 1)
    w_hi = pos - (lo << 10)
    return lo, hi, (1 << 10) - w_hi, w_hi


def resize_bilinear(x: np.ndarray, *, size: Sequence[int], align_corners: bool = False,
                    half_pixel_centers: bool = False) -> np.ndarray:
    """Resize the last two axes of an int8 NCHW tensor to ``size = (out_h, out_w)``."""
    prepare_resize_bilinear(align_corners, half_pixel_centers)
    x = check_quantized(x, "resize_bilinear", "input")
    if x.ndim != 4:
        raise ValueError(f"resize_bilinear: input must be NCHW, found shape {x.shape}")
    out_h, out_w = (int(s) for s in size)
    if out_h <= 0 or out_w <= 0:
        raise ValueError(f"resize_bilinear: output size must be positive, found {tuple(size)}")
    y0, y1, wy0, wy1 = _axis(x.shape[2], out_h, align_corners, half_pixel_centers)
    x0, x1, wx0, wx1 = _axis(x.shape[3], out_w, align_corners, half_pixel_centers)
    q = x.astype(np.int64)
    rows0, rows1 = q[:, :, y0, :], q[:, :, y1, :]  # [N, C, OH, W]
    value = ((rows0[..., x0] * wx0 + rows0[..., x1] * wx1) * wy0[:, None]
             + (rows1[..., x0] * wx0 + rows1[..., x1] * wx1) * wy1[:, None])
    return saturate(div_round_half_away(value, 1 << 20), -128, 127).astype(np.int8)
