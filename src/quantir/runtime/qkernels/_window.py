"""Sliding windows over NCHW tensors (views, no copies) for convolution and pooling."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from quantir.runtime.qkernels.padding import normalize_pads, output_size


def out_hw(shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
           pads: Sequence[int], op: str) -> tuple[int, int]:
    top, left, bottom, right = normalize_pads(pads, op)
    oh = output_size(shape[-2], kernel[0], strides[0], dilations[0], top, bottom)
    ow = output_size(shape[-1], kernel[1], strides[1], dilations[1], left, right)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: a {kernel[0]}x{kernel[1]} window (dilation {tuple(dilations)}) does not fit "
                         f"the {shape[-2]}x{shape[-1]} input with pads {tuple(pads)}")
    return oh, ow


def pad_hw(x: np.ndarray, pads: Sequence[int], value) -> np.ndarray:
    top, left, bottom, right = pads
    if not any(pads):
        return x
    # np.pad is several times slower than filling and copying the interior
    out = np.full((*x.shape[:-2], x.shape[-2] + top + bottom, x.shape[-1] + left + right), value, dtype=x.dtype)
    out[..., top:top + x.shape[-2], left:left + x.shape[-1]] = x
    return out


def windows(xp: np.ndarray, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
            out: tuple[int, int]) -> np.ndarray:
    """View ``[..., OH, OW, KH, KW]`` of the already padded ``xp`` (``[..., H, W]``)."""
    kh, kw = kernel
    eff_h, eff_w = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    v = sliding_window_view(xp, (eff_h, eff_w), axis=(-2, -1))
    v = v[..., ::strides[0], ::strides[1], ::dilations[0], ::dilations[1]]
    return v[..., :out[0], :out[1], :, :]
