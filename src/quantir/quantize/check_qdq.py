"""Spec views of ONNX QDQ models, for ``spec.check`` (``quantir check model.onnx``).

In a QDQ model each quantized op is a float op whose inputs come from DequantizeLinear and
whose output goes into QuantizeLinear. The view takes each input's parameters from its
DequantizeLinear (scale, zero point, axis, and the stored integers when they are constant) and
the output's from the QuantizeLinear. The model must be imported without constant folding,
which would fold the weights' DequantizeLinear away. Weight axes follow ONNX layouts: conv OIHW
axis 0 (depthwise too, mapped to TFLite's dim 3), Gemm with transB=1 axis 0, MatMul [K, N]
axis 1 (mapped to FULLY_CONNECTED's dim 0).
"""
from __future__ import annotations

import numpy as np

from ..ir import Function, Module, Operation, Value
from ..ir.dialects import arith, nn
from . import ops, spec

def _kinds() -> dict:
    """The float op a QDQ model shows each declared op as -> its LiteRT kind. A Resize is
    RESIZE_BILINEAR here and RESIZE_NEAREST_NEIGHBOR in mode nearest (``views``)."""
    kinds = {}
    for decl in ops.DECLARATIONS.values():
        for opdef in decl.qdq_ops:
            kinds.setdefault(opdef, decl.builtin.name)
    return kinds


_KINDS = _kinds()
_DTYPES = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8", np.dtype(np.int16): "int16",
           np.dtype(np.int32): "int32"}


def _const(v: Value) -> np.ndarray | None:
    op = getattr(v, "op", None)
    if op is not None and op.opdef is arith.CONSTANT:
        return getattr(op.attributes.get("value"), "array", None)
    return None


def _params(q_or_dq: Operation, axis_map: dict[int, int] | None = None) -> spec.QParams | None:
    scale = _const(q_or_dq.operands[1])
    zp = _const(q_or_dq.operands[2]) if len(q_or_dq.operands) > 2 else None
    if scale is None:
        return None
    stored = q_or_dq.operands[0] if q_or_dq.opdef is nn.DEQUANTIZE_LINEAR else q_or_dq.results[0]
    dtype = zp.dtype if zp is not None else np.dtype(np.uint8)
    if q_or_dq.opdef is nn.DEQUANTIZE_LINEAR:
        values = _const(stored)
        if values is not None:
            dtype = values.dtype
    else:
        values = None
    axis = q_or_dq.attr("axis") if np.ndim(scale) == 1 else None
    if axis is not None and axis < 0:
        rank = len(_shape(stored) or ())
        axis = axis + rank if rank else None   # unknown rank: the axis cannot be placed
    return spec.QParams(_DTYPES.get(np.dtype(dtype), str(dtype)), np.asarray(scale, np.float64),
                        np.asarray(zp if zp is not None else 0, np.int64),
                        axis=(axis_map or {}).get(axis, axis), values=values)


def _shape(v: Value) -> tuple | None:
    """The value's dims, or None when its type has no shape (an unranked graph input)."""
    return getattr(v.type, "shape", None)


def _producer(v: Value, opdef) -> Operation | None:
    op = getattr(v, "op", None)
    return op if op is not None and op.opdef is opdef else None


def views(module: Module | Function) -> list[spec.QuantizedOp]:
    fn = module.main if isinstance(module, Module) else module
    out = []
    for op in fn.ops:
        kind = _KINDS.get(op.opdef)
        if kind is None:
            continue
        if op.opdef is nn.RESIZE and op.attr("mode") == "nearest":
            kind = "RESIZE_NEAREST_NEIGHBOR"
        dqs = [_producer(v, nn.DEQUANTIZE_LINEAR) for v in op.operands]
        qs = [u for u, _ in op.results[0].uses if u.opdef is nn.QUANTIZE_LINEAR]
        if not any(dqs) or not qs:
            continue   # a float op outside any quantized region
        axis_map = None
        if op.opdef is nn.CONV:
            w, x = _shape(op.operands[1]), _shape(op.operands[0])
            channels = x[1] if x is not None and len(x) > 1 else None   # a graph input may have no shape
            if (w is not None and len(w) > 1 and w[1] == 1 and (op.attr("group") or 1) == channels
                    and channels not in (None, 1)):
                kind, axis_map = "DEPTHWISE_CONV_2D", {0: 3}
        elif op.opdef is nn.MATMUL or (op.opdef is nn.GEMM and not op.attr("trans_b")):
            axis_map = {1: 0}   # weights stored [K, N]: the output channel is dim 1
        inputs = tuple(_params(dq, axis_map if i == 1 else None) if dq is not None else None
                       for i, dq in enumerate(dqs))
        if op.opdef in (nn.RESHAPE, nn.FLATTEN, nn.TRANSPOSE, nn.PAD, nn.RESIZE, nn.SLICE) or kind == "MEAN":
            inputs = inputs[:1]
        out.append(spec.QuantizedOp(kind, op.label or op.name, inputs, (_params(qs[0]),)))
    return out


def unchecked(module: Module | Function) -> list[str]:
    """Ops that read DequantizeLinear outputs and feed a QuantizeLinear, but have no spec kind:
    quantized in the model, and not something quantir can check."""
    fn = module.main if isinstance(module, Module) else module
    return [op.name for op in fn.ops
            if op.opdef not in _KINDS and op.opdef not in (nn.QUANTIZE_LINEAR, nn.DEQUANTIZE_LINEAR)
            and op.results and any(_producer(v, nn.DEQUANTIZE_LINEAR) for v in op.operands)
            and any(u.opdef is nn.QUANTIZE_LINEAR for u, _ in op.results[0].uses)]


def check_qdq(module: Module | Function) -> spec.CheckReport:
    report = spec.check(views(module))
    report.unknown.extend(unchecked(module))
    # weight-only ops: float ops whose weights are DequantizeLinear of 8- or 4-bit integers
    from .weight_only import weight_only_rows
    checked, violations = weight_only_rows(module.main if isinstance(module, Module) else module)
    report.checked += checked
    report.violations.extend(violations)
    return report
