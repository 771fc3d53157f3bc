"""Masked mean pooling, the head of sentence encoders, as L2_NORMALIZATION, MUL and BATCH_MATMUL.

Sentence-transformers pool the token embeddings ``x`` [B, L, C] over the real tokens:

    sum(x · m, axis=1) / clamp(sum(m, axis=1), min=eps)        m = mask[..., None], 0 or 1

Two of those ops are a problem for an integer runtime. LiteRT's int8 DIV is recent and missing
from most deployed runtimes. Its int8 SUM is usable, but ``BUILTIN_REF`` — the reference kernels
quantir is checked against — reads the int8 bytes as unsigned (-1 counts as 255; see
``runtime/qkernels/reduce_sum.py``), so a model with SUM cannot be verified there. The rewrite,
before calibration (an expansion: every interior value is observed and gets its parameters):

    row = transpose(m)                                   [B, 1, L]
    h   = row / max(||row||, 1e-12)                      [B, 1, L]   L2_NORMALIZATION: 1/sqrt(count)
    w   = h · h                                          [B, 1, L]   1/count at real tokens, 0 at padding
    y   = w @ x                                          [B, 1, C]   BATCH_MATMUL: the mean itself

No tensor holds a count or a sum, so no range depends on the sentence's length or its padding: the
mean has the range of the token embeddings however many tokens are averaged, where a masked sum
(or a count) grows with the length and saturates on sentences longer than any calibrated one;
L2_NORMALIZATION's output is fixed at (1/128, 0) for any count. What rounding costs falls on the
weights, which hold one value per row (every real token gets the same ``1/count``): a per-row
scale error (h on the 1/128 grid: under 1% up to 30 tokens, 6% at 512), which the L2 normalization
of sentence embeddings removes entirely. The matmul accumulates the exact products of the stored
integers in int32 and rounds once, where MUL then SUM would round every x·m first.

What it matches, and why the float result is the same: ``m`` is made from the integer graph
inputs alone and holds only 0 and 1 (``attention_mask.mask_values``), so ``||row||² = count``,
0 or at least 1, and eps < 1 leaves a count of at least 1 alone; ``h · h = m / count`` there. A
row of padding only (count 0) gives 0 in the original (0 / eps) and here (0 / 1e-12, squared),
and in LiteRT, whose L2_NORMALIZATION of a zero row is zero. The order of the additions differs,
as any matmul's.
"""
from __future__ import annotations

import numpy as np

from ...ir import Value
from ...ir.dialects import nn
from ...rewrite import Match, NamedOps, Pat, Rule
from ...types import TensorType
from ..attention_mask import mask_values
from ..regions import commutative, rank
from .registry import declare_expansion

NORM_EPSILON = 1e-12          # the floor of the mask row's norm (torch.nn.functional.normalize's): 0 rows stay 0

_SUM = Pat.op(nn.REDUCE["sum"], commutative(nn.MUL, Pat.any("x"), Pat.any("mask"), "product").one_use(),
              name="sum").one_use()
_COUNT = Pat.op(nn.REDUCE["sum"], Pat.any("counted"), name="count").one_use()
_POOLED = Pat.op(nn.DIV, _SUM, Pat.op(nn.CLIP, _COUNT, name="clip").one_use(), name="op")


def _token_axis(op, r: int) -> tuple[int, ...]:
    return tuple(sorted(int(a) % r for a in (op.attr("axes") or ())))


def _check(m: Match) -> str | None:
    x, mask = m.values["x"], m.values["mask"]
    if m.values["counted"] is not mask:
        return "the count sums another tensor than the one the embeddings are multiplied by"
    if rank(x) != 3 or rank(mask) != 3 or mask.type.shape[2] != 1:
        return "not token embeddings [B, L, C] times a mask [B, L, 1]"
    for what in ("sum", "count"):
        op = m.ops[what]
        if _token_axis(op, 3) != (1,) or op.attr("noop_with_empty_axes"):
            return f"the {what} is not over the token axis (1)"
    if bool(m.ops["sum"].attr("keepdims")) != bool(m.ops["count"].attr("keepdims")):
        return "the sum and the count keep different dims"
    clip = m.ops["clip"]
    lo, hi = float(clip.attr("min")), float(clip.attr("max"))
    if not 0.0 < lo < 1.0 or hi != np.inf:
        return (f"Clip({lo:g}, {hi:g}) is not a guard against dividing by zero (a lower bound in (0, 1), no "
                "upper bound, so that a count of at least 1 is left alone)")
    values = mask_values(mask)
    if values is None:
        return "the mask is not made from the integer inputs alone"
    if not set(values.tolist()) <= {0.0, 1.0}:
        return f"the mask holds {values.tolist()[:6]}, not only 0 and 1: the count is not a sum of squares"
    return None


def _expand(rw, m: Match) -> list[Value]:
    op = m.ops["op"]
    x, mask = m.values["x"], m.values["mask"]
    b, length, channels = x.type.shape
    et = x.type.element_type
    ops = NamedOps(rw, op, "mean_pooling")

    def emit(opdef, operands, shape, what: str, **attrs) -> Value:
        return ops.op(opdef, operands, TensorType(tuple(shape), et), what, **attrs)
    row = emit(nn.TRANSPOSE, [mask], (b, 1, length), "mask_row", perm=(0, 2, 1))
    norm = emit(nn.REDUCE["l2"], [row], (b, 1, 1), "count_sqrt", axes=(2,), keepdims=1)
    guarded = emit(nn.CLIP, [norm], (b, 1, 1), "count_sqrt_eps", min=NORM_EPSILON)
    half = emit(nn.DIV, [row, guarded], (b, 1, length), "half_weights")
    weights = emit(nn.MUL, [half, half], (b, 1, length), "weights")
    out = emit(nn.MATMUL, [weights, x], (b, 1, channels), "mean")
    if not m.ops["sum"].attr("keepdims"):
        out = emit(nn.SQUEEZE, [out], (b, channels), "mean_rows", axes=(1,))
    out.name_hint = op.results[0].name_hint
    return [out]


MEAN_POOLING = declare_expansion(Rule(
    "mean_pooling", _POOLED, _expand, check=_check,
    doc="sum(x·mask) / clamp(sum(mask), eps) -> BATCH_MATMUL(h·h, x), h = L2_NORMALIZATION(maskᵀ): weights "
        "1/count, no count, no SUM, no DIV"))
