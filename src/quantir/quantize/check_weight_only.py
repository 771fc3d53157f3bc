"""``quantir check`` rows for weight-only storage: an int8 or int4 constant dequantized to float32
(``quant.dcast`` of a stored constant; a .tflite DEQUANTIZE, an ONNX DequantizeLinear) that float
ops then read — what ``quantize_weights`` writes and TFLite's converter writes for weight-only
quantization.

What LiteRT's DEQUANTIZE and the float kernel reading its result need of the file:

- the storage is int8 or int4 (int4 packed two per byte; DEQUANTIZE has no other weight types);
- scales finite and positive, zero points inside the storage range;
- per channel, the axis is the output-channel axis of the op that reads the weight, followed
  through transposes: a MatMul's B column (FULLY_CONNECTED's row), a convolution's O. A file
  quantized along the reduction axis is valid but is not per-channel quantization of that op;
  quantir reports it, since a scale per input channel cannot be folded into the output.
"""
from __future__ import annotations

import numpy as np

from ..ir import Function, Operation, Value
from ..ir.dialects import nn, quant
from ..types import IntegerType, UniformQuantizedPerAxisType
from . import spec

__all__ = ["weight_only_rows"]

_STORAGE = (IntegerType(8), IntegerType(4))


def _output_axis(v: Value, axis: int) -> int | None:
    """The axis of the dequantized weight ``v`` that is its reader's output channel, followed back
    through transposes; None when no MatMul/Gemm/Conv reads it (a Gather table, a shared weight)."""
    users = [(u, i) for u, i in v.uses]
    if len(users) != 1:
        return None
    user, slot = users[0]
    if user.opdef is nn.TRANSPOSE:
        perm = tuple(user.attr("perm"))
        inner = _output_axis(user.results[0], axis)
        return None if inner is None else perm[inner]
    if user.opdef is nn.MATMUL and slot == 1 and v.type.is_ranked:
        return v.type.rank - 1
    if user.opdef is nn.GEMM and slot == 1:
        return 0 if user.attr("trans_b") else 1
    if user.opdef in (nn.CONV,) and slot == 1:
        return 0
    return None


def _problems(op: Operation) -> list[tuple[str, str]]:
    q = op.operands[0].type.element_type
    found = []
    if q.storage_type not in _STORAGE:
        found.append(("input 0", f"weight-only storage must be int8 or int4, found {q.storage_type}"))
    per_axis = isinstance(q, UniformQuantizedPerAxisType)
    scales = np.asarray(q.scales if per_axis else [q.scale], np.float64)
    zps = np.asarray(q.zero_points if per_axis else [q.zero_point], np.int64)
    if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        found.append(("input 0", f"weight scales must be finite and positive, found {scales[:4].tolist()}"))
    lo, hi = q.storage_min, q.storage_max
    if np.any(zps < lo) or np.any(zps > hi):
        found.append(("input 0", f"zero points must lie in the storage range [{lo}, {hi}], found "
                                 f"{zps[(zps < lo) | (zps > hi)][:4].tolist()}"))
    if per_axis and len(scales) > 1:
        want = _output_axis(op.results[0], q.quantized_dimension)
        if want is not None and want != q.quantized_dimension:
            found.append(("input 0", f"per-channel scales along dimension {q.quantized_dimension}, but the op reading "
                                     f"the weight has its output channels on dimension {want}"))
    return found


def weight_only_rows(fn: Function) -> tuple[int, list[spec.Violation]]:
    """(weights checked, violations) for the dequantized constant weights of ``fn``."""
    checked, found = 0, []
    for op in fn.ops:
        if op.opdef is not quant.DCAST or quant.stored_constant(op.operands[0]) is None:
            continue
        checked += 1
        for where, message in _problems(op):
            found.append(spec.Violation(op.label or op.results[0].name_hint or op.name, "DEQUANTIZE (weight-only)",
                                        where, message))
    return checked, found
