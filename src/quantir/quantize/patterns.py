"""Annotation: which float ops become which integer ops (the TVM RFC's patterns as rewrites).

The patterns are the declared ones (``quantize.ops``): each quantized op declares the float
subgraphs that become it. ``annotate`` walks a function from its outputs back so the longest
fusion claims its ops first, and records every op that stays float with its reason.
"""
from __future__ import annotations

from typing import Sequence

from ..ir import Function, Operation, Value
from ..ir.dialects import arith, func, nn
from ..rewrite import match
from ..types import FloatType, TensorType
from .config import Config
from .ops import PATTERNS
from .ops.resize import LITERT_NEAREST_MODES, litert_nearest_mode, onnx_nearest_indices  # noqa: F401
from .regions import Annotation, QuantizerPattern, Region  # noqa: F401  (the annotation's types)


def _not_float(values: Sequence[Value], what: str) -> str | None:
    """Only float tensors are quantized: integer and bool arithmetic (token ids, masks, shape
    math, a model that is integer already) keeps its exact values."""
    for v in values:
        et = v.type.element_type if isinstance(v.type, TensorType) else v.type
        if not isinstance(et, FloatType):
            return f"its {what} is {et}, not float: integer arithmetic is kept as it is"
    return None


def _integer_result(ops: Sequence[Operation]) -> str | None:
    return _not_float([r for o in ops for r in o.results], "result")


SHAPE_READERS = (nn.SHAPE, nn.SIZE)   # read a tensor's shape, never its values


def is_integer_computation(op: Operation) -> bool:
    """An op left as it is because it computes integers (shape arithmetic: Shape, Gather, Concat,
    Unsqueeze... on i64), not a float island: every result is an integer or bool tensor, and it
    reads integers or only a tensor's shape. An op reading float values (ArgMax, a Cast of data to
    int) is not one: it stays float."""
    def integer(v: Value) -> bool:
        return _not_float([v], "") is not None
    return bool(op.results) and all(integer(r) for r in op.results) and \
        (op.opdef in SHAPE_READERS or all(integer(v) for v in op.operands))


JOINS = ("concat",)   # same-scale patterns with many data inputs


def _join_float_islands(regions: list[Region], claimed: dict, refused: dict) -> None:
    """A Concat of float ops' results (two LSTMs kept float, excluded branches) stays float with
    them: quantized, it would take a quantize per input where after it one does, and it moves data
    exactly either way. Program order, so a Concat of such Concats follows."""
    for region in list(regions):
        if region.pattern.name not in JOINS:
            continue
        producers = {v: getattr(v, "op", None) for v in region.inputs}
        floated = {v for v, o in producers.items()
                   if o is not None and o.opdef is not arith.CONSTANT and o not in claimed}
        if len(floated) < 2 or any(v not in floated and (o is None or o.opdef is not arith.CONSTANT)
                                   for v, o in producers.items()) or \
                any(is_integer_computation(producers[v]) for v in floated):
            continue
        regions.remove(region)
        for op in region.ops:
            del claimed[op]
            refused[op] = ("kept float with its inputs, which are float: quantized it would take a quantize "
                           f"per input ({len(floated)}), after it at most one does")


# Float ops quantir keeps float on purpose, and why (the report shows it instead of "no pattern").
KEPT_FLOAT: dict = {}


def annotate(fn: Function, config: Config, patterns: Sequence[QuantizerPattern] = PATTERNS) -> Annotation:
    """Assign float ops to patterns, outputs first, and say why the others stay float."""
    assert fn.body is not None
    claimed: dict[Operation, Region] = {}
    refused: dict[Operation, str] = {}
    regions: list[Region] = []
    enabled = [p for p in patterns if p.name not in config.exclude and p.kind not in config.exclude]
    position = {op: i for i, op in enumerate(fn.body.ops)}   # a region's ops in program order, without a rescan
    for op in reversed(fn.body.ops):
        if op in claimed or op.opdef in (arith.CONSTANT, func.RETURN) or not op.results:
            continue
        for p in enabled:
            m = match(p.pattern, op.results[0])
            if m is None:
                continue
            ops = [o for o in m.ops.values()]
            if any(o in claimed for o in ops):
                continue
            excluded = next((o for o in ops if config.excludes(o.label, o.name)), None)
            if excluded is not None:
                refused.setdefault(op, f"excluded by the configuration ({excluded.label or excluded.name})")
                continue
            # an op whose result is not quantized (a comparison's bool) must read float inputs
            reason = (_integer_result(ops) if p.op.output_quantized else
                      _not_float(Region(p, m, ops, op).inputs, "operand")) or (p.check(m) if p.check else None)
            if reason is not None:
                refused.setdefault(op, reason)
                continue
            ordered = sorted(set(ops), key=position.__getitem__)
            region = Region(p, m, ordered, op)
            regions.append(region)
            for o in ops:
                claimed[o] = region
            break
    regions.reverse()
    _join_float_islands(regions, claimed, refused)
    float_ops = []
    for op in fn.body.ops:
        if op in claimed or op.opdef in (arith.CONSTANT, func.RETURN):
            continue
        float_ops.append((op, refused.get(op, KEPT_FLOAT.get(op.opdef) or f"no quantizer pattern for '{op.name}'")))
    return Annotation(regions, float_ops)
