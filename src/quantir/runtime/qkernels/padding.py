"""Explicit spatial padding: TFLite's SAME/VALID rule and output sizes.

Kernels take ONNX-style explicit pads ``(top, left, bottom, right)`` — begins then ends
per spatial axis. :func:`tflite_pads` converts TFLite's ``Padding`` enum into those pads
the way ``tflite/kernels/padding.h`` does: for SAME, ``out = ceil(in / stride)`` and the
odd extra pixel of the total padding goes at the end (bottom/right).

>>> tflite_pads("same", (28, 28), (3, 3), (2, 2))
(0, 0, 1, 1)
>>> tflite_pads("valid", (28, 28), (3, 3))
(0, 0, 0, 0)
"""
from __future__ import annotations

from collections.abc import Sequence

__all__ = ["tflite_pads", "output_size", "normalize_pads"]


def _effective(kernel: int, dilation: int) -> int:
    return (kernel - 1) * dilation + 1


def tflite_pads(padding: str, input_hw: Sequence[int], kernel_hw: Sequence[int], strides: Sequence[int] = (1, 1),
                dilations: Sequence[int] = (1, 1)) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` for TFLite ``SAME`` or ``VALID`` (``ComputePaddingHeightWidth``)."""
    mode = padding.lower()
    if mode not in ("same", "valid"):
        raise ValueError(f"tflite_pads: padding must be 'same' or 'valid', found {padding!r}")
    begins, ends = [], []
    for size, k, s, d in zip(input_hw, kernel_hw, strides, dilations):
        eff = _effective(k, d)
        out = (size + s - 1) // s if mode == "same" else (size + s - eff) // s
        total = max((out - 1) * s + eff - size, 0)
        begins.append(total // 2)
        ends.append(total // 2 + total % 2)
    return begins[0], begins[1], ends[0], ends[1]


def output_size(size: int, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int) -> int:
    """Number of window positions along one axis: ``(size + pads - eff) // stride + 1``."""
    return (size + pad_begin + pad_end - _effective(kernel, dilation)) // stride + 1


def normalize_pads(pads: Sequence[int], op: str) -> tuple[int, int, int, int]:
    p = tuple(int(v) for v in pads)
    if len(p) != 4 or min(p) < 0:
        raise ValueError(f"{op}: pads must be four non-negative ints (top, left, bottom, right), found {pads}")
    return p  # type: ignore[return-value]
