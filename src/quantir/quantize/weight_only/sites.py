"""Which weights: the constant weight of each op and its axes, or the reason it stays float."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir import Function, Operation, Value
from ...ir.dialects import arith, nn
from .config import WeightOnlyConfig
from .result import FloatWeight


@dataclass(frozen=True)
class Site:
    op: Operation
    operand: int          # the weight's operand index
    channel_axis: int     # output channel (per-channel scales)
    block_axis: int       # reduction axis (blocks)
    kind: str             # "matmul", "gemm", "conv", "gather"


def _constant(v: Value) -> np.ndarray | None:
    op = getattr(v, "op", None)
    if op is None or op.opdef is not arith.CONSTANT:
        return None
    a = getattr(op.attributes.get("value"), "array", None)
    return None if a is None or not np.issubdtype(np.asarray(a).dtype, np.floating) else np.asarray(a)


def candidate(op: Operation) -> tuple[Site | None, str | None]:
    """The weight site of ``op`` or the reason its constant weight cannot be one; (None, None) for an
    op that has no constant weight of these kinds."""
    if op.opdef is nn.MATMUL and len(op.operands) > 1 and _constant(op.operands[1]) is not None:
        w = _constant(op.operands[1])
        if w.ndim != 2:
            return None, f"a constant B of rank {w.ndim} (batched weights are not quantized)"
        return Site(op, 1, 1, 0, "matmul"), None
    if op.opdef is nn.GEMM and _constant(op.operands[1]) is not None:
        tb = bool(op.attr("trans_b"))
        return Site(op, 1, 0 if tb else 1, 1 if tb else 0, "gemm"), None
    if op.opdef is nn.CONV and _constant(op.operands[1]) is not None:
        return Site(op, 1, 0, 1, "conv"), None
    if op.opdef is nn.GATHER and _constant(op.operands[0]) is not None:
        w = _constant(op.operands[0])
        if (op.attr("axis") or 0) % max(w.ndim, 1) != 0 or w.ndim != 2:
            return None, "a gather from a constant that is not a [rows, columns] table read along its rows"
        return Site(op, 0, 0, 1, "gather"), None
    return None, None


def _refusal(site: Site, w: np.ndarray, config: WeightOnlyConfig) -> str | None:
    if site.kind not in config.ops:
        return f"{site.kind} weights not chosen (ops: {', '.join(config.ops)})"
    if w.size < config.min_elements:
        return f"{w.size} elements, under min_elements {config.min_elements} (LiteRT keeps small weights float)"
    b = config.block_size
    if b is not None and w.shape[site.block_axis] % b:
        return (f"block size {b} does not divide dimension {site.block_axis} ({w.shape[site.block_axis]}): "
                f"blocks are whole, the weight is not padded")
    return None


def find_sites(fn: Function, config: WeightOnlyConfig) -> tuple[list[Site], list[FloatWeight]]:
    sites, left = [], []
    for op in fn.ops:
        site, why = candidate(op)
        if site is None:
            if why is not None:
                left.append(_float_weight(op, op.operands[1], op.name.split(".")[-1], why))
            continue
        v = op.operands[site.operand]
        w = _constant(v)
        why = _refusal(site, w, config)
        if why is None and any(u is not op for u, _ in v.uses):
            readers = {u.label or u.name for u, _ in v.uses if u is not op}
            if not all(candidate(u)[0] is not None and candidate(u)[0].operand == i
                       and candidate(u)[0].kind == site.kind for u, i in v.uses):
                why = f"also read by {', '.join(sorted(readers))}, which needs it float"
        if why is None:
            sites.append(site)
        else:
            left.append(_float_weight(op, v, site.kind, why))
    return sites, left


def _float_weight(op: Operation, v: Value, kind: str, why: str) -> FloatWeight:
    w = _constant(v)
    return FloatWeight(v.name_hint or "?", op.label or op.name, kind, int(w.size) if w is not None else 0, why)
