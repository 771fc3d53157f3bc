"""Additive attention masks: masked scores saturate instead of stretching the softmax input's scale.

An encoder adds a mask bias to its attention scores before Softmax: 0 where a token is attended,
a huge negative number where it is padding (Hugging Face: ``finfo(float32).min``, -3.4e38;
original BERT: -10000). Calibrated as it is, the bias stretches the scale of the sum to ~1e36 per
step and every real score rounds to the same value. Softmax only needs masked scores to be "very
negative": a score ``SATURATION`` below the row maximum weighs ``e**-16``, nothing at int8 or
int16 output precision. So quantir:

1. bounds the constant that makes the bias (the ``attention_mask`` expansion, before calibration):
   a constant of magnitude above ``MASK_LIMIT`` multiplying a tensor computed from the integer
   graph inputs alone, on its way to an Add that feeds Softmax, becomes ``±MASK_LIMIT``. ``e**-1e4``
   is 0 in float32, so the float model computes the same values, and the integer MUL that makes
   the bias can express it;
2. gives the Add's output (``masked_range``) the range of the scores alone, extended down to
   ``hi - SATURATION`` at least, and the bias (``bias_range``) the range ``[-K, 0]`` with ``K``
   past that output's span by SATURATION: any masked position lands SATURATION below the bottom of
   the scores' range (and saturates there in int8), while the attended scores keep a fine scale.

A row of padding only (a mask of zeros) gets uniform attention over saturated scores, where the
float model attends uniformly too; the pooling that follows weighs such rows by the mask.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import BlockArgument, Operation, Value
from ..ir.dialects import nn
from ..rewrite import Match, Pat, Rule
from ..types import FloatType, TensorType
from .regions import Annotation, Region, constant_array

MASK_LIMIT = 1.0e4     # |bias| beyond this adds nothing in float32: e**-1e4 underflows to 0
SATURATION = 16.0      # how far below the largest score the masked scores' floor lies at least
BIAS_MARGIN = 1.25     # the bias reaches this far past the span, so rounding cannot lift a masked score

# ops a mask value passes through unchanged in meaning (it is still "the mask")
_MOVEMENT = (nn.RESHAPE, nn.DYNAMIC_RESHAPE, nn.TRANSPOSE, nn.SQUEEZE, nn.UNSQUEEZE)
# ops a mask is made with: element-wise arithmetic, logic and casts of the mask input, moved
# around; never a lookup or a contraction (token ids become activations through a Gather)
_MASK_MAKING = {"cast", "add", "sub", "mul", "div", "neg", "where", "equal", "not", "less", "greater",
                "less_or_equal", "greater_or_equal", "and", "or", "clip", "min", "max", "expand", "dynamic_expand",
                "reshape", "dynamic_reshape", "transpose", "squeeze", "unsqueeze"}


def input_derived(v: Value, _seen: dict[int, bool] | None = None) -> bool:
    """Is ``v`` a mask: made from integer graph inputs and constants by element-wise ops and data
    movement alone (no lookup or contraction, which is how token ids become activations)?"""
    seen = {} if _seen is None else _seen
    if id(v) in seen:
        return seen[id(v)]
    if isinstance(v, BlockArgument):
        t = v.type
        result = isinstance(t, TensorType) and not isinstance(t.element_type, FloatType)
    else:
        op = v.owner
        seen[id(v)] = False   # a cycle cannot occur in SSA; this only guards the recursion
        name = op.opdef.name.split(".")[-1]
        # a run-time shape operand (Expand's, Reshape's) is arithmetic on dims, not data
        data = op.operands[:1] if name in ("dynamic_expand", "dynamic_reshape") else op.operands
        result = constant_array(v) is not None or (
            name in _MASK_MAKING and all(input_derived(o, seen) for o in data if o is not None))
    seen[id(v)] = result
    return result


def _readers(v: Value) -> list[Operation]:
    """The ops reading ``v``, looking through data movement."""
    out = []
    for op, _ in v.uses:
        if op.opdef in _MOVEMENT and op.results:
            out.extend(_readers(op.results[0]))
        else:
            out.append(op)
    return out


def is_masked_add(op: Operation) -> bool:
    """An Add of attention scores and an input-derived bias, read by Softmax only."""
    if op.opdef is not nn.ADD or len(op.operands) != 2 or not op.results:
        return False
    derived = [input_derived(o) and constant_array(o) is None for o in op.operands]
    readers = _readers(op.results[0])
    return derived.count(True) == 1 and bool(readers) and all(r.opdef is nn.SOFTMAX for r in readers)


def _feeds_masked_add(v: Value) -> bool:
    return any(is_masked_add(op) for op in _readers(v))


# -- 1. the float rewrite ------------------------------------------------------------------------

def _check_bound(m: Match) -> str | None:
    if not input_derived(m.values["x"]):
        return "the other operand depends on float activations: not an attention mask"
    if not _feeds_masked_add(m.ops["op"].results[0]):
        return "the product does not reach an Add read by Softmax"
    return None


def _bound(rw, m: Match) -> list[Value]:
    op = m.ops["op"]
    const = rw.f32_constant(np.clip(np.asarray(m.consts["c"], np.float32), -MASK_LIMIT, MASK_LIMIT),
                            f"{op.results[0].name_hint or 'mask'}.bounded")
    operands = [const if o is m.values["c"] else o for o in op.operands]
    new = op.opdef.build(operands, [op.results[0].type])
    new.label = op.label
    out = rw.insert(new).result
    out.name_hint = op.results[0].name_hint
    return [out]


def _huge(c: np.ndarray | None) -> bool:
    return c is not None and c.size > 0 and bool(np.any(np.abs(np.asarray(c, np.float64)) > MASK_LIMIT))


# mask · C (the original BERT), or where(mask, C, x) (Hugging Face's masked_fill of the bias)
_MUL_BY_CONST = Pat.alt(Pat.op(nn.MUL, Pat.any("x"), Pat.const("c", where=_huge), name="op"),
                        Pat.op(nn.MUL, Pat.const("c", where=_huge), Pat.any("x"), name="op"),
                        Pat.op(nn.WHERE, Pat.any("w"), Pat.const("c", where=_huge), Pat.any("x"), name="op"),
                        Pat.op(nn.WHERE, Pat.any("w"), Pat.any("x"), Pat.const("c", where=_huge), name="op"))

BOUND_ATTENTION_MASK = Rule(
    "attention_mask", _MUL_BY_CONST, _bound, check=_check_bound,
    doc="mask · (huge constant) feeding Add -> Softmax: the constant becomes ±1e4 (same float32 "
        "result); the Add's output is given the scores' range and masked positions saturate")


def _check_select(m: Match) -> str | None:
    op = m.ops["op"]
    cond, scores = m.values["w"], m.values["x"]
    if not input_derived(cond) or input_derived(scores):
        return "the condition is not made from the mask alone, or the kept branch is"
    readers = _readers(op.results[0])
    if not readers or any(r.opdef is not nn.SOFTMAX for r in readers):
        return "the selection is not read by Softmax alone"
    if getattr(scores.type, "shape", None) is None or getattr(cond.type, "shape", None) is None:
        return "unranked operands"
    return None


def _additive(rw, m: Match) -> list[Value]:
    """``where(c, scores, F)`` -> ``scores + where(c, 0, F')`` with F' = F bounded to ±1e4 (the
    mask then takes the additive path above; the same float32 softmax)."""
    op, cond, scores = m.ops["op"], m.values["w"], m.values["x"]
    name = op.results[0].name_hint or "masked"
    fill = rw.f32_constant(np.clip(np.asarray(m.consts["c"], np.float32), -MASK_LIMIT, MASK_LIMIT), f"{name}.fill")
    zero = rw.f32_constant(0.0, f"{name}.keep")
    branches = [zero, fill] if op.operands[1] is scores else [fill, zero]
    bias_t = TensorType(tuple(cond.type.shape), scores.type.element_type)
    bias = rw.insert(nn.WHERE.build([cond, *branches], [bias_t])).result
    bias.name_hint = f"{name}.bias"
    bias.owner.label = op.label
    new = nn.ADD.build([scores, bias], [op.results[0].type])
    new.label = op.label
    out = rw.insert(new).result
    out.name_hint = op.results[0].name_hint
    return [out]


_SELECT = Pat.alt(Pat.op(nn.WHERE, Pat.any("w"), Pat.any("x"), Pat.const("c", where=_huge), name="op"),
                  Pat.op(nn.WHERE, Pat.any("w"), Pat.const("c", where=_huge), Pat.any("x"), name="op"))

ADDITIVE_ATTENTION_MASK = Rule(
    "attention_mask_select", _SELECT, _additive, check=_check_select,
    doc="where(mask, scores, -inf/finfo.min) -> Softmax becomes scores + where(mask, 0, -1e4) (same "
        "float32 softmax), an additive mask")


# -- 2. the ranges -------------------------------------------------------------------------------

def masked_range(scores: tuple[float, float]) -> tuple[float, float]:
    """The masked Add's output range from the attended scores' range alone."""
    lo, hi = scores
    return min(lo, hi - SATURATION), hi


def bias_range(spans: list[float]) -> tuple[float, float]:
    """The bias's range: past the widest span of the masked Adds reading it and SATURATION more, so
    a masked score (at most the top of the range) plus the bias lands SATURATION below the bottom:
    below every row's maximum by that much even where the range does not saturate it (an int16
    range is symmetric, its bottom can lie below the scores')."""
    return -(BIAS_MARGIN * max(spans) + SATURATION), 0.0


@dataclass
class MaskedAdds:
    """The masked Adds of an annotated graph: each one's scores operand, and the bias values."""

    scores: dict[int, Value]            # id(Add region output) -> its scores operand
    biases: dict[int, list[int]]        # id(bias operand) -> ids of the Add outputs reading it
    made: dict[int, tuple[float, float]]   # id(value the biases are made from) -> its mask_range

    @staticmethod
    def find(annotation: Annotation) -> "MaskedAdds":
        scores: dict[int, Value] = {}
        biases: dict[int, list[int]] = {}
        made: dict[int, tuple[float, float]] = {}
        for region in annotation.regions:
            op = region.match.ops.get("op")
            if op is None or region.output is None or not is_masked_add(op):
                continue
            a, b = op.operands
            bias, s = (a, b) if input_derived(a) else (b, a)
            scores[id(region.output)] = s
            biases.setdefault(id(bias), []).append(id(region.output))
            stack = [bias]
            while stack:
                v = stack.pop()
                if id(v) in made or constant_array(v) is not None or isinstance(v, BlockArgument):
                    continue
                r = mask_range(v)
                if r is not None:
                    made[id(v)] = r
                stack.extend(o for o in v.owner.operands if o is not None)
        return MaskedAdds(scores, biases, made)

    def __bool__(self) -> bool:
        return bool(self.scores)


def masked_region(masks: MaskedAdds, region: Region) -> Value | None:
    """The scores operand when ``region`` is a masked Add, else None."""
    return masks.scores.get(id(region.output)) if region.output is not None else None


# -- 3. the mask's own values --------------------------------------------------------------------

# A mask holds 0 (padding) and 1 (attended). Calibration data of one sentence per sample hold no
# padding, so the calibrated range of ``1 - mask`` would be [0, 0] and padding would vanish from
# the integer model. The values a mask-made tensor can take are instead enumerated from {0, 1}.
MASK_VALUES = (0, 1)
_ELEMENTWISE = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "neg": np.negative,
    "equal": np.equal, "not": np.logical_not, "less": np.less, "greater": np.greater,
    "less_or_equal": np.less_equal, "greater_or_equal": np.greater_equal, "and": np.logical_and,
    "or": np.logical_or, "min": np.minimum, "max": np.maximum, "where": np.where,
}
_MAX_VALUES = 64   # a tensor made from a mask holds a handful of distinct values; beyond, give up


def mask_values(v: Value, _memo: dict[int, np.ndarray | None] | None = None) -> np.ndarray | None:
    """The distinct values ``v`` can hold when every integer graph input it is made from holds 0
    or 1 (``input_derived``), or None when that cannot be enumerated."""
    memo = {} if _memo is None else _memo
    if id(v) in memo:
        return memo[id(v)]
    memo[id(v)] = None
    out: np.ndarray | None = None
    const = constant_array(v)
    if const is not None:
        out = np.unique(const)
    elif isinstance(v, BlockArgument):
        out = np.asarray(MASK_VALUES, np.float64) if input_derived(v) else None
    else:
        op = v.owner
        name = op.opdef.name.split(".")[-1]
        # data movement and broadcasting keep the values of operand 0 (the others are shapes)
        moved = name in ("cast", "expand", "dynamic_expand") or op.opdef in _MOVEMENT
        sets = [mask_values(o, memo) for o in (op.operands[:1] if moved else op.operands) if o is not None]
        if any(s is None or s.size > _MAX_VALUES for s in sets):
            out = None
        elif moved:
            out = sets[0]
        elif name in _ELEMENTWISE:
            grids = np.meshgrid(*sets, indexing="ij")
            with np.errstate(all="ignore"):
                out = np.unique(np.asarray(_ELEMENTWISE[name](*grids), np.float64))
    memo[id(v)] = out
    return out


def mask_range(v: Value) -> tuple[float, float] | None:
    """The range of a mask-made tensor from ``mask_values`` (0 included, as every range)."""
    values = mask_values(v)
    if values is None or values.size == 0 or not np.all(np.isfinite(values)):
        return None
    return min(float(values.min()), 0.0), max(float(values.max()), 0.0)
