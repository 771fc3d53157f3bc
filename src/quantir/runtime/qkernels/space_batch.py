"""SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND on int8/uint8 (``kernels/space_to_batch_nd.cc``,
``kernels/batch_to_space_nd.cc``): the TFLite form of dilated convolution.

TensorFlow writes a convolution with dilation ``d`` as SPACE_TO_BATCH_ND (pad, then fold each
``d × d`` phase of the image into the batch), an undilated CONV_2D, and BATCH_TO_SPACE_ND
(unfold and crop). ONNX expresses dilation on ``Conv`` itself, so no ONNX graph needs these
two ops; quantir meets them only when importing a .tflite file.

LiteRT defines both on NHWC (or NHC, one spatial axis: ``block_shape`` then has one entry)::

    space_to_batch: out[(i·bw + j)·N + n, y, x, c] = padded[n, y·bh + i, x·bw + j, c]
    batch_to_space: out[n, y·bh + i - crop_top, x·bw + j - crop_left, c] = in[(i·bw + j)·N + n, y, x, c]

(:func:`space_to_batch_nd_nhwc`, :func:`batch_to_space_nd_nhwc`). The NCHW forms
(:func:`space_to_batch_nd`, :func:`batch_to_space_nd`, what quantir's NCHW interpreter
calls) do the same index arithmetic with the channel axis second; each equals
``nchw(op_nhwc(nhwc(x)))``. LiteRT's Prepare requires input and output to share scale and
zero point, and SPACE_TO_BATCH_ND pads with the output zero point (real 0.0):
:func:`prepare_space_to_batch_nd` returns that pad value.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantir.runtime.qkernels._common import QKernelError, check_quantized
from quantir.runtime.qkernels._same_params import check_same_params

__all__ = ["prepare_space_to_batch_nd", "prepare_batch_to_space_nd", "space_to_batch_nd", "space_to_batch_nd_nhwc",
           "batch_to_space_nd", "batch_to_space_nd_nhwc"]


def prepare_space_to_batch_nd(input_params: tuple[float, int], output_params: tuple[float, int]) -> int:
    """LiteRT's Prepare check (equal ``(scale, zero_point)``); returns the pad value, the output zero point."""
    check_same_params("space_to_batch_nd", [input_params], output_params)
    return int(output_params[1])


def prepare_batch_to_space_nd(input_params: tuple[float, int], output_params: tuple[float, int]) -> None:
    """LiteRT's Prepare check: input and output share ``(scale, zero_point)``."""
    check_same_params("batch_to_space_nd", [input_params], output_params)


def _spatial_args(op: str, x: np.ndarray, block_shape: Sequence[int], pairs: Sequence[Sequence[int]],
                  what: str) -> tuple[list[int], list[tuple[int, int]]]:
    x = check_quantized(x, op, "input", (np.int8, np.uint8))
    if x.ndim not in (3, 4):
        raise QKernelError(f"{op}: input must have rank 3 or 4 (one or two spatial axes), found shape {x.shape}")
    m = x.ndim - 2
    block = [int(v) for v in block_shape]
    if len(block) != m:
        raise QKernelError(f"{op}: block_shape needs {m} entries for a rank-{x.ndim} input, found {block}")
    if any(v < 1 for v in block):
        raise QKernelError(f"{op}: block_shape entries must be positive, found {block}")
    arr = np.asarray(pairs, dtype=np.int64)
    if arr.shape != (m, 2):
        raise QKernelError(f"{op}: {what} must have shape ({m}, 2), found {arr.shape}")
    if (arr < 0).any():
        raise QKernelError(f"{op}: {what} must be non-negative, found {arr.tolist()}")
    return block, [(int(a), int(b)) for a, b in arr]


def _space_to_batch(x: np.ndarray, block: list[int], pads: list[tuple[int, int]], value: int,
                    channels_last: bool) -> np.ndarray:
    m = len(block)
    first = 1 if channels_last else 2                     # index of the first spatial axis
    widths = [(0, 0)] * x.ndim
    widths[first:first + m] = pads
    padded = np.pad(x, widths, mode="constant", constant_values=x.dtype.type(value))
    sizes = padded.shape[first:first + m]
    for i, (size, b) in enumerate(zip(sizes, block)):
        if size % b:
            raise QKernelError(f"space_to_batch_nd: padded spatial size {size} (axis {first + i}) is not a multiple "
                               f"of its block {b}")
    outer = [s // b for s, b in zip(sizes, block)]
    split = [d for s, b in zip(outer, block) for d in (s, b)]   # each spatial axis -> (outer, block)
    head = list(padded.shape[:first])                       # [N] or [N, C]
    tail = list(padded.shape[first + m:])                   # [C] or []
    r = padded.reshape(head + split + tail)
    block_axes = [first + 2 * i + 1 for i in range(m)]
    outer_axes = [first + 2 * i for i in range(m)]
    rest = list(range(first + 2 * m, r.ndim))
    r = r.transpose(block_axes + list(range(first)) + outer_axes + rest)  # [blocks..., N, (C), outer..., (C)]
    batch = int(np.prod(block)) * x.shape[0]
    return np.ascontiguousarray(r).reshape([batch] + head[1:] + outer + tail)


def _batch_to_space(x: np.ndarray, block: list[int], crops: list[tuple[int, int]], channels_last: bool) -> np.ndarray:
    m = len(block)
    first = 1 if channels_last else 2
    total = int(np.prod(block))
    if x.shape[0] % total:
        raise QKernelError(f"batch_to_space_nd: batch {x.shape[0]} is not a multiple of the block product {total}")
    n = x.shape[0] // total
    sizes = list(x.shape[first:first + m])
    mid = list(x.shape[1:first])                           # [] or [C]
    tail = list(x.shape[first + m:])                       # [C] or []
    r = x.reshape(block + [n] + mid + sizes + tail)        # [blocks..., N, (C), spatial..., (C)]
    s0 = m + 1 + len(mid)                                  # first spatial axis of r
    interleaved = [a for i in range(m) for a in (s0 + i, i)]
    r = r.transpose([m] + list(range(m + 1, s0)) + interleaved + list(range(s0 + m, r.ndim)))
    full = [s * b for s, b in zip(sizes, block)]
    out = np.ascontiguousarray(r).reshape([n] + mid + full + tail)
    index = [slice(None)] * out.ndim
    for i, ((top, bottom), size) in enumerate(zip(crops, full)):
        if top + bottom > size:
            raise QKernelError(f"batch_to_space_nd: crops {top} + {bottom} exceed the spatial size {size} "
                               f"(axis {first + i})")
        index[first + i] = slice(top, size - bottom)
    return np.ascontiguousarray(out[tuple(index)])


def space_to_batch_nd_nhwc(x: np.ndarray, *, block_shape: Sequence[int], paddings: Sequence[Sequence[int]],
                           pad_value: int) -> np.ndarray:
    """LiteRT's layout: NHWC ``[N, H, W, C]`` (or NHC) -> ``[N·bh·bw, (H+pads)/bh, (W+pads)/bw, C]``."""
    block, pads = _spatial_args("space_to_batch_nd", x, block_shape, paddings, "paddings")
    return _space_to_batch(x, block, pads, pad_value, channels_last=True)


def space_to_batch_nd(x: np.ndarray, *, block_shape: Sequence[int], paddings: Sequence[Sequence[int]],
                      pad_value: int) -> np.ndarray:
    """NCHW ``[N, C, H, W]`` (or NCH) -> ``[N·bh·bw, C, (H+pads)/bh, (W+pads)/bw]``.

    >>> x = np.arange(4, dtype=np.int8).reshape(1, 1, 2, 2)
    >>> space_to_batch_nd(x, block_shape=[2, 2], paddings=[[0, 0], [0, 0]], pad_value=0)[:, 0, 0, 0]
    array([0, 1, 2, 3], dtype=int8)
    """
    block, pads = _spatial_args("space_to_batch_nd", x, block_shape, paddings, "paddings")
    return _space_to_batch(x, block, pads, pad_value, channels_last=False)


def batch_to_space_nd_nhwc(x: np.ndarray, *, block_shape: Sequence[int], crops: Sequence[Sequence[int]]
                           ) -> np.ndarray:
    """LiteRT's layout: NHWC ``[B, H, W, C]`` (or NHC) -> ``[B/(bh·bw), H·bh - crops, W·bw - crops, C]``."""
    block, cr = _spatial_args("batch_to_space_nd", x, block_shape, crops, "crops")
    return _batch_to_space(x, block, cr, channels_last=True)


def batch_to_space_nd(x: np.ndarray, *, block_shape: Sequence[int], crops: Sequence[Sequence[int]]) -> np.ndarray:
    """NCHW ``[B, C, H, W]`` (or NCH) -> ``[B/(bh·bw), C, H·bh - crops, W·bw - crops]``; inverse of
    :func:`space_to_batch_nd` when the crops equal the paddings."""
    block, cr = _spatial_args("batch_to_space_nd", x, block_shape, crops, "crops")
    return _batch_to_space(x, block, cr, channels_last=False)
