"""``quantir check`` rows for LiteRT's dynamic-range ("hybrid") ops (``ir/dialects/hybrid.py``).

What LiteRT's hybrid kernels assume of a file, op by op (docs/numerics.md §8):

- the input, the bias and the output are float32 (an embedding's ids are integers);
- the weight is an int8 constant, symmetric: every zero point 0 (the kernels never read it);
- its values lie in [-127, 127]: a -128 is a violation, LiteRT's x86 dot product negates it to
  -128 and returns wrong sums (``qkernels.hybrid.check_no_int8_min``);
- its scales are finite and positive, one per tensor or one per output channel along the right
  axis, in TFLite's terms: FULLY_CONNECTED 0 (``[C_out, K]``), CONV_2D 0 (OHWI),
  DEPTHWISE_CONV_2D 3 (``[1, KH, KW, C_out]``), BATCH_MATMUL the rhs's N axis, EMBEDDING_LOOKUP 0
  (one scale per row); the depthwise and grouped convolutions read one scale per channel.
"""
from __future__ import annotations

import numpy as np

from ..ir import Function, Operation
from ..ir.dialects import quant
from ..ir.dialects.hybrid import (HYBRID_BATCH_MATMUL, HYBRID_CONV, HYBRID_EMBEDDING_LOOKUP,
                                      HYBRID_FULLY_CONNECTED, HYBRID_OPS)
from ..types import FloatType, IntegerType, UniformQuantizedPerAxisType, UniformQuantizedType
from . import spec

__all__ = ["hybrid_rows", "hybrid_kind"]

_F32 = FloatType("f32")


def _depthwise(op: Operation) -> bool:
    group, x, w = int(op.attr("group") or 1), op.operands[0].type, op.operands[1].type
    return group > 1 and x.is_ranked and group == x.shape[1] and w.shape[1] == 1


def hybrid_kind(op: Operation) -> str:
    """The LiteRT builtin a hybrid op is, as ``quantir check`` names it."""
    base = {HYBRID_FULLY_CONNECTED: "FULLY_CONNECTED", HYBRID_BATCH_MATMUL: "BATCH_MATMUL",
            HYBRID_EMBEDDING_LOOKUP: "EMBEDDING_LOOKUP"}.get(op.opdef)
    if base is None:
        base = "DEPTHWISE_CONV_2D" if _depthwise(op) else "CONV_2D"
    return f"{base} (dynamic range)"


def _channel_axis(op: Operation) -> tuple[int, int, int]:
    """(IR axis of the output channels in the weight, the same axis in TFLite's layout, channels)."""
    w = op.operands[1].type
    if op.opdef is HYBRID_BATCH_MATMUL:
        axis = w.rank - 2 if op.attr("adj_y") else w.rank - 1
        return axis, axis, w.shape[axis]
    if op.opdef is HYBRID_CONV and _depthwise(op):
        return 0, 3, w.shape[0]
    return 0, 0, w.shape[0]


def _weight_problems(op: Operation) -> list[tuple[str, str]]:
    w = op.operands[1]
    q = w.type.element_type
    found = []
    if q.storage_type != IntegerType(8):
        found.append(("input 1", f"the weight must be int8, found {q.storage_type}"))
    zps = np.asarray(q.zero_points if isinstance(q, UniformQuantizedPerAxisType) else [q.zero_point])
    scales = np.asarray(q.scales if isinstance(q, UniformQuantizedPerAxisType) else [q.scale], np.float64)
    if np.any(zps != 0):
        found.append(("input 1", f"the weight must be symmetric (zero point 0): LiteRT's hybrid kernels ignore it, "
                                 f"found {np.unique(zps)[:4].tolist()}"))
    if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        found.append(("input 1", f"weight scales must be finite and positive, found {scales[:4].tolist()}"))
    data = quant.stored_constant(w)
    if data is None:
        found.append(("input 1", "the weight must be a constant (LiteRT has no hybrid kernel for two activations)"))
    elif np.any(np.asarray(data) == -128):
        n = int(np.sum(np.asarray(data) == -128))
        found.append(("input 1", f"weights must lie in [-127, 127], found -128 ({n} of {np.asarray(data).size}): "
                                 "LiteRT's x86 hybrid dot product negates -128 to -128 and returns wrong sums"))
    ir_axis, tfl_axis, channels = _channel_axis(op)
    if isinstance(q, UniformQuantizedPerAxisType) and len(q.scales) > 1:
        if q.quantized_dimension != ir_axis:
            found.append(("input 1", f"per-channel weights must be quantized along dimension {tfl_axis} (the output "
                                     f"channels), found another axis"))
        elif len(q.scales) != channels:
            found.append(("input 1", f"{len(q.scales)} weight scales for {channels} output channels"))
    elif op.opdef is HYBRID_CONV and (_depthwise(op) or int(op.attr("group") or 1) > 1) and channels > 1:
        found.append(("input 1", f"LiteRT's hybrid depthwise and grouped convolutions read one weight scale per "
                                 f"output channel ({channels}), found one"))
    elif not isinstance(q, (UniformQuantizedType, UniformQuantizedPerAxisType)):
        found.append(("input 1", f"unsupported weight quantization {q}"))
    return found


def _float_problems(op: Operation) -> list[tuple[str, str]]:
    found = []
    first = op.operands[0].type.element_type
    if op.opdef is HYBRID_EMBEDDING_LOOKUP:
        if first not in (IntegerType(32), IntegerType(64)):
            found.append(("input 0", f"the ids must be integers, found {first}"))
    elif first != _F32:
        found.append(("input 0", f"the activation must be float32 (quantized at run time), found {first}"))
    if len(op.operands) > 2 and op.operands[2].type.element_type != _F32:
        found.append(("input 2", f"the bias must be float32, found {op.operands[2].type.element_type}"))
    if op.results[0].type.element_type != _F32:
        found.append(("output 0", f"the result must be float32, found {op.results[0].type.element_type}"))
    return found


def hybrid_rows(fn: Function) -> tuple[int, list[spec.Violation]]:
    """(ops checked, violations) for the dynamic-range ops of ``fn``."""
    checked, found = 0, []
    for op in fn.ops:
        if op.opdef not in HYBRID_OPS:
            continue
        checked += 1
        kind = hybrid_kind(op)
        for where, message in _float_problems(op) + _weight_problems(op):
            found.append(spec.Violation(op.label or op.name, kind, where, message))
    return checked, found
