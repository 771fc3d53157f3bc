"""MAXIMUM and MINIMUM on int8/uint8 (``kernels/maximum_minimum.cc``): element-wise selection of stored q.

LiteRT compares the raw q of the two inputs (numpy broadcasting) and copies the winner; it
checks no quantization parameters. The selection means max/min of the real values only when
both inputs and the output share scale and zero point, which is the int8 spec's rule and
what :func:`prepare_maximum_minimum` enforces. Layout-free (element-wise).
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._common import check_quantized
from quantir.runtime.qkernels._same_params import check_same_params

__all__ = ["prepare_maximum_minimum", "maximum", "minimum"]


def prepare_maximum_minimum(op: str, input1: tuple[float, int], input2: tuple[float, int],
                            output: tuple[float, int]) -> None:
    """Check that both ``(scale, zero_point)`` pairs equal the output's; ``op`` is "maximum" or "minimum"."""
    check_same_params(op, [input1, input2], output)


def _operands(op: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = check_quantized(a, op, "input1", (np.int8, np.uint8))
    b = check_quantized(b, op, "input2", (np.int8, np.uint8))
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: inputs must share one dtype (LiteRT requires it), found {a.dtype} and {b.dtype}")
    return a, b


def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The larger stored value of ``a`` and ``b`` per element (broadcast).

    >>> maximum(np.array([-3, 4], np.int8), np.array([1], np.int8))
    array([1, 4], dtype=int8)
    """
    return np.maximum(*_operands("maximum", a, b))


def minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smaller stored value of ``a`` and ``b`` per element (broadcast)."""
    return np.minimum(*_operands("minimum", a, b))
