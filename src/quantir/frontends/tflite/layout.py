"""Layouts as permutations: how an IR value relates to the TFLite tensor it stands for.

TFLite's builtin ops are NHWC; quantir's ``qnn`` ops are NCHW. The importer keeps, per
TFLite tensor, one IR value per layout it was needed in. A layout is the permutation
``to_tflite`` with ``np.transpose(ir_array, to_tflite) == tflite_array``:

- the identity: the IR value *is* the TFLite tensor (graph inputs, outputs, reshapes);
- ``channels_first(4) == (0, 2, 3, 1)``: the IR value is NCHW, the tensor NHWC.

So TFLite axis ``a`` is IR axis ``to_tflite[a]``, and the IR shape is the TFLite shape
permuted by the inverse. Everything below is arithmetic on those tuples.

>>> channels_first(4), ir_shape((1, 5, 7, 3), channels_first(4))
((0, 2, 3, 1), (1, 3, 5, 7))
>>> transpose_perm(identity(4), channels_first(4))   # nn.transpose perm NHWC -> NCHW
(0, 3, 1, 2)
>>> drop_axes(channels_first(4), {1, 2})             # MEAN over H, W without keep_dims
(0, 1)
"""
from __future__ import annotations

from collections.abc import Collection, Sequence

Perm = tuple[int, ...]

__all__ = ["Perm", "identity", "is_identity", "inverse", "channels_first", "ir_shape", "transpose_perm",
           "compose", "drop_axes", "same_memory_order", "tag"]


def identity(rank: int) -> Perm:
    return tuple(range(rank))


def is_identity(p: Sequence[int]) -> bool:
    return tuple(p) == identity(len(p))


def inverse(p: Sequence[int]) -> Perm:
    inv = [0] * len(p)
    for i, a in enumerate(p):
        inv[a] = i
    return tuple(inv)


def channels_first(rank: int) -> Perm:
    """``to_tflite`` of the channels-first form of a channels-last tensor (NCHW for NHWC)."""
    return (0, *range(2, rank), 1) if rank >= 3 else identity(rank)


def ir_shape(shape: Sequence, p: Sequence[int]) -> tuple:
    """The IR shape of a TFLite shape held in layout ``p``."""
    return tuple(shape[i] for i in inverse(p))


def transpose_perm(src: Sequence[int], dst: Sequence[int]) -> Perm:
    """The ``nn.transpose`` perm turning a value in layout ``src`` into layout ``dst``.

    ``ir_dst`` axis ``j`` is TFLite axis ``inverse(dst)[j]``, which ``ir_src`` holds at
    ``src[inverse(dst)[j]]``.
    """
    return tuple(src[k] for k in inverse(dst))


def compose(p: Sequence[int], perm: Sequence[int]) -> Perm:
    """Layout of ``transpose(tflite, perm)`` (a TFLite TRANSPOSE) read from a value in layout ``p``:
    ``transpose(transpose(ir, p), perm) == transpose(ir, compose(p, perm))``."""
    return tuple(p[k] for k in perm)


def drop_axes(p: Sequence[int], removed: Collection[int]) -> Perm:
    """The layout left when TFLite axes ``removed`` (and their IR axes) disappear (a reduction)."""
    kept = [a for a in range(len(p)) if a not in removed]
    ir_kept = sorted(p[a] for a in kept)
    return tuple(ir_kept.index(p[a]) for a in kept)


def same_memory_order(shape: Sequence, p: Sequence[int]) -> bool:
    """Whether the IR value and the TFLite tensor hold their elements in the same order.

    True when the axes of size other than 1 (dynamic ones included) appear in the same order
    in both layouts: an NCHW ``1x1x1xC`` tensor can then be reshaped without a transpose.
    """
    ir_axes = [p[a] for a, d in enumerate(shape) if d != 1]
    return ir_axes == sorted(ir_axes)


def tag(p: Sequence[int]) -> str:
    """A short name for a layout, used to suffix IR value names (``x__nchw``)."""
    if is_identity(p):
        return "tfl"
    if tuple(p) == channels_first(len(p)):
        return "nchw"
    return "p" + "".join(str(a) for a in p)
