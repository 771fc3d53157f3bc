"""SPACE_TO_DEPTH on int8/uint8 (``kernels/space_to_depth.cc``): move ``b × b`` pixel blocks into channels.

LiteRT defines it on NHWC::

    out[n, h, w, (dy·b + dx)·C + c] = in[n, h·b + dy, w·b + dx, c]

(:func:`space_to_depth_nhwc`). ONNX ``SpaceToDepth`` is the same arrangement on NCHW, where
the channel index is again ``(dy·b + dx)·C + c`` (:func:`space_to_depth`, the form quantir's
NCHW interpreter calls; it equals ``nchw(space_to_depth_nhwc(nhwc(x)))``). Stored q move
unchanged, so output and input share parameters (:func:`prepare_space_to_depth`; LiteRT
itself checks none). LiteRT's Prepare requires rank 4, ``b > 0`` and H, W divisible by
``b``; those raise :class:`QKernelError`.
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._common import QKernelError, check_quantized
from quantir.runtime.qkernels._same_params import check_same_params

__all__ = ["prepare_space_to_depth", "space_to_depth", "space_to_depth_nhwc"]


def prepare_space_to_depth(input_params: tuple[float, int], output_params: tuple[float, int]) -> None:
    """Check that the output's ``(scale, zero_point)`` equals the input's."""
    check_same_params("space_to_depth", [input_params], output_params)


def _checked(x: np.ndarray, block_size: int, spatial: tuple[int, int], layout: str) -> tuple[np.ndarray, int]:
    x = check_quantized(x, "space_to_depth", "input", (np.int8, np.uint8))
    if x.ndim != 4:
        raise QKernelError(f"space_to_depth: input must be {layout} (rank 4), found shape {x.shape}")
    b = int(block_size)
    if b <= 0:
        raise QKernelError(f"space_to_depth: block_size must be positive, found {b}")
    h, w = x.shape[spatial[0]], x.shape[spatial[1]]
    if h % b or w % b:
        raise QKernelError(f"space_to_depth: height {h} and width {w} must be multiples of block_size {b}")
    return x, b


def space_to_depth_nhwc(x: np.ndarray, *, block_size: int) -> np.ndarray:
    """LiteRT's layout: NHWC ``[N, H, W, C]`` -> ``[N, H/b, W/b, b·b·C]``."""
    x, b = _checked(x, block_size, (1, 2), "NHWC")
    n, h, w, c = x.shape
    blocks = x.reshape(n, h // b, b, w // b, b, c)            # [n, oh, dy, ow, dx, c]
    return np.ascontiguousarray(blocks.transpose(0, 1, 3, 2, 4, 5)).reshape(n, h // b, w // b, b * b * c)


def space_to_depth(x: np.ndarray, *, block_size: int) -> np.ndarray:
    """quantir's (and ONNX's) layout: NCHW ``[N, C, H, W]`` -> ``[N, b·b·C, H/b, W/b]``.

    >>> x = np.arange(8, dtype=np.int8).reshape(1, 2, 2, 2)
    >>> space_to_depth(x, block_size=2)[0, :, 0, 0]
    array([0, 4, 1, 5, 2, 6, 3, 7], dtype=int8)
    """
    x, b = _checked(x, block_size, (2, 3), "NCHW")
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // b, b, w // b, b)            # [n, c, oh, dy, ow, dx]
    return np.ascontiguousarray(blocks.transpose(0, 3, 5, 1, 2, 4)).reshape(n, b * b * c, h // b, w // b)
