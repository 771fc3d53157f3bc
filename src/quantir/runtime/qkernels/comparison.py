"""EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL on int8/uint8 (``kernels/comparisons.cc``,
``reference_ops::ComparisonWithScaling``, docs/numerics.md §2.20).

LiteRT does not compare the stored q: it first maps each input to a fixed-point value of its
real number, then compares those int32 values::

    v = MBQM<1((q - zp)·2**8, M, shift)        (M, shift) = QuantizeMultiplier(double(scale))

where ``MBQM<1`` is ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` (the scale itself is
the multiplier: ``v ≈ (q - zp)·256·scale``). The result is a bool tensor, broadcast like
numpy. Two consequences the quantizer must know:

* **Comparisons are lossy for small scales, even when both inputs share them.** With
  ``scale < 2**-8`` neighbouring q map to the same ``v``: at scale 0.001, q = -1, 0 and 1 all
  give ``v = 0``, so EQUAL(1, 0) is true and LESS(0, 1) is false. The integers below
  reproduce that.
* **A scale of 1 or more is refused.** LiteRT picks ``QuantizeMultiplierGreaterThanOne`` for
  it, which aborts the process at exactly 1.0 (``TFLITE_CHECK``) and otherwise yields a
  positive shift that ``MBQM<1`` turns into a negative shift count (undefined behaviour in
  C; the pip build collapses every value to its sign). :func:`prepare_comparison` raises
  :class:`QKernelError` for it.

The kernel evaluates the rescaling on every possible stored value (256 of them) once, then
gathers — the same integers as per-element arithmetic. Layout-free (element-wise).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from quantir.numerics import (
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier_smaller_than_one_exp,
)
from quantir.runtime.qkernels._common import KernelParams, QKernelError, check_quantized, check_zero_point, lookup_table

__all__ = ["ComparisonKind", "ComparisonParams", "prepare_comparison", "compare", "rescale_for_comparison"]

LEFT_SHIFT = 8  # comparisons.cc: headroom before the scale multiplier, for int8 and uint8 alike


class ComparisonKind(StrEnum):
    """The six LiteRT comparison builtins (GREATER* are LESS* with the operands swapped in LiteRT)."""

    EQUAL = "equal"
    NOT_EQUAL = "not_equal"
    LESS = "less"
    LESS_EQUAL = "less_equal"
    GREATER = "greater"
    GREATER_EQUAL = "greater_equal"


_UFUNCS = {ComparisonKind.EQUAL: np.equal, ComparisonKind.NOT_EQUAL: np.not_equal, ComparisonKind.LESS: np.less,
           ComparisonKind.LESS_EQUAL: np.less_equal, ComparisonKind.GREATER: np.greater,
           ComparisonKind.GREATER_EQUAL: np.greater_equal}

_ZERO_POINT_RANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}


@dataclass(frozen=True)
class ComparisonParams(KernelParams):
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int


def _scale_multiplier(scale: float, op: str, name: str) -> tuple[int, int]:
    s = float(np.float32(scale))  # the file's float32, widened to double as comparisons.cc does
    if not 0.0 < s < 1.0:
        raise QKernelError(f"{op}: {name} scale must be in (0, 1), found {s:g}; LiteRT aborts at 1.0 "
                           "(QuantizeMultiplierGreaterThanOne) and its int8 comparison is undefined above "
                           "(a negative shift count). Keep this comparison in float or narrow the input range.")
    return quantize_multiplier_smaller_than_one_exp(s)


def prepare_comparison(input1_scale: float, input2_scale: float, op: str = "comparison") -> ComparisonParams:
    """The two ``QuantizeMultiplier(scale)`` pairs of LiteRT's quantized comparison."""
    return ComparisonParams(*_scale_multiplier(input1_scale, op, "input1"),
                            *_scale_multiplier(input2_scale, op, "input2"))


def rescale_for_comparison(q: np.ndarray, zero_point: int, multiplier: int, shift: int) -> np.ndarray:
    """``MBQM<1((q - zp)·2**8, M, shift)`` as int64: the value LiteRT compares."""
    return multiply_by_quantized_multiplier_smaller_than_one_exp((q.astype(np.int64) - zero_point) << LEFT_SHIFT,
                                                                  multiplier, shift)


def _rescaled(x: np.ndarray, zero_point: int, multiplier: int, shift: int, op: str, name: str) -> np.ndarray:
    lo, hi = _ZERO_POINT_RANGES[x.dtype]
    zp = check_zero_point(zero_point, op, f"{name} zero point", lo, hi)
    info = np.iinfo(x.dtype)
    table = rescale_for_comparison(np.arange(info.min, info.max + 1, dtype=np.int64), zp, multiplier, shift)
    return lookup_table(x, table)


def compare(kind: ComparisonKind | str, a: np.ndarray, b: np.ndarray, *, input1_zero_point: int,
            input2_zero_point: int, input1_multiplier: int, input1_shift: int, input2_multiplier: int,
            input2_shift: int) -> np.ndarray:
    """LiteRT's quantized ``kind`` of ``a`` and ``b`` (both int8 or both uint8, numpy broadcasting): a bool array.

    >>> p = prepare_comparison(0.001, 0.001)
    >>> q = np.array([-1, 0, 1, 2], np.int8)
    >>> compare("equal", q, np.zeros(4, np.int8), input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())
    array([ True,  True,  True, False])
    """
    kind = ComparisonKind(kind)
    op = kind.value
    a = check_quantized(a, op, "input1", (np.int8, np.uint8))
    b = check_quantized(b, op, "input2", (np.int8, np.uint8))
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: inputs must share one dtype (LiteRT requires it), found {a.dtype} and {b.dtype}")
    va = _rescaled(a, input1_zero_point, input1_multiplier, input1_shift, op, "input1")
    vb = _rescaled(b, input2_zero_point, input2_multiplier, input2_shift, op, "input2")
    return _UFUNCS[kind](va, vb)
