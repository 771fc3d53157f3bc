"""Spec views of quantir's integer IR: each operand and result as ``rules.QParams``.

Weight axes may be mapped from quantir's layout to TFLite's (``axis_map``), so that the spec
rows, written in TFLite's terms, apply to quantir's IR, ONNX QDQ models and .tflite files alike.
"""
from __future__ import annotations

import numpy as np

from ..ir import Operation, Value
from ..ir.dialects import quant
from ..types import QuantizedType, TensorType, UniformQuantizedPerAxisType, UniformQuantizedType
from .rules import QParams, QuantizedOp


def qparams_of(v: Value, axis_map: dict[int, int] | None = None) -> QParams | None:
    t = v.type
    q = t.element_type if isinstance(t, TensorType) else t
    if not isinstance(q, QuantizedType):
        return QParams(str(getattr(q, "numpy_dtype", q)))
    dtype = f"{'int' if q.is_signed else 'uint'}{q.storage_width}"
    values = quant.stored_constant(v)
    if isinstance(q, UniformQuantizedPerAxisType):
        axis = q.quantized_dimension
        return QParams(dtype, np.asarray(q.scales), np.asarray(q.zero_points),
                       axis=(axis_map or {}).get(axis, axis), values=values)
    if isinstance(q, UniformQuantizedType):
        return QParams(dtype, np.float64(q.scale), np.int64(q.zero_point), values=values)
    return QParams(dtype)


def plain_view(op: Operation, kind: str) -> QuantizedOp:
    """``op`` as LiteRT ``kind``, every operand and result as it is."""
    return QuantizedOp(kind, op.label or op.name, tuple(qparams_of(v) for v in op.operands),
                       tuple(qparams_of(r) for r in op.results))
