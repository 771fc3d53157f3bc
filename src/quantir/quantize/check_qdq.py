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
from ..types import FloatType
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
    # dynamic-range ops: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(x_scale * w_scale)
    checked, violations = dynamic_rows(module.main if isinstance(module, Module) else module)
    report.checked += checked
    report.violations.extend(violations)
    return report


# -- dynamic-range rows ------------------------------------------------------------------------------
# A dynamic export (quantize/dynamic.py) computes each quantized MatMul as
#   DynamicQuantizeLinear(x) -> MatMulInteger(xq, Wq, x_zp, w_zp) -> Cast f32 -> Mul(x_scale * w_scale)
# and with per-row activations x is first divided by its row scale r, which multiplies the product back.
# ConvInteger is the same with the output channels on axis 1; an int8 table is Gather -> Cast -> Mul by
# Gather(row scales) with the same indices (LiteRT's dynamic-range EMBEDDING_LOOKUP).
# which is LiteRT's dynamic-range ("hybrid") FULLY_CONNECTED, or BATCH_MATMUL for a weight of rank > 2.
# The file holds the weight scale only in the rescale, so that is where the row reads it.

def _result_of(v: Value, opdef, index: int) -> Operation | None:
    """The op ``opdef`` that produced ``v`` as its result ``index``, or None."""
    op = _producer(v, opdef)
    return op if op is not None and getattr(v, "index", None) == index else None


def _rescale_factors(acc: Value) -> tuple[list[Value], Operation | None]:
    """The factors the float accumulator is multiplied by and the Mul that ends the rescale (None
    without one). The scale product may be formed first, Mul(acc, Mul(x_scale, w_scale)), or applied
    in two Muls; the walk stops once it has a run-time scale and a constant, so a float Mul after the
    layer (an attention's 1/sqrt(d)) is not taken for part of the rescale."""
    casts = [u for u, _ in acc.uses if u.opdef is nn.CAST]
    if len(acc.uses) != 1 or not casts:
        return [], None
    v, leaves, last = casts[0].results[0], [], None
    for _ in range(2):
        if len(v.uses) != 1 or v.uses[0][0].opdef is not nn.MUL:
            break
        last, i = v.uses[0]
        todo = [last.operands[1 - i]]
        while todo:
            f = todo.pop()
            inner = _producer(f, nn.MUL)
            if inner is not None:
                todo.extend(inner.operands)
            else:
                leaves.append(f)
        if any(_result_of(f, nn.DYNAMIC_QUANTIZE_LINEAR, 1) for f in leaves) and any(
                _const(f) is not None for f in leaves):
            break
        v = last.results[0]
    return leaves, last


def _dynamic_row(op: Operation) -> tuple[str, list[tuple[str, str]]]:
    """(LiteRT kind, [(where, message)]) for one MatMulInteger of a dynamic export."""
    found: list[tuple[str, str]] = []
    w = _const(op.operands[1]) if len(op.operands) > 1 else None
    conv = op.opdef is nn.CONV_INTEGER
    if conv:   # weights [O, I/g, kh, kw]: the output channel is axis 0, the scales [1, O, 1, 1]
        kind = "DEPTHWISE_CONV_2D" if (op.attr("group") or 1) > 1 else "CONV_2D"
    else:
        kind = "BATCH_MATMUL" if w is not None and w.ndim > 2 else "FULLY_CONNECTED"
    kind += " (dynamic range)"
    # the activation: uint8, quantized at run time, with its own zero point
    dql = _result_of(op.operands[0], nn.DYNAMIC_QUANTIZE_LINEAR, 0)
    if dql is None:
        found.append(("input 0", "the activation must be quantized at run time by DynamicQuantizeLinear (uint8)"))
    elif len(op.operands) < 3 or op.operands[2] is not dql.results[2]:
        found.append(("input 0", "the activation zero point must be its DynamicQuantizeLinear's zero point"))
    # the weight: int8 constant, symmetric, narrow range
    if w is None:
        found.append(("input 1", "the weight must be a constant (LiteRT has no hybrid kernel for two activations)"))
        return kind, found
    if w.dtype != np.int8:
        found.append(("input 1", f"the weight must be stored as int8, found {w.dtype}"))
    elif w.size and (w.min() < -127 or w.max() > 127):
        found.append(("input 1", f"weight values must be in [-127, 127] (symmetric), found [{w.min()}, {w.max()}]"))
    channels = (w.shape[0] if conv else w.shape[-1]) if w.ndim else 1
    wz = _const(op.operands[3]) if len(op.operands) > 3 and op.operands[3] is not None else np.zeros((), np.int8)
    if wz is None:
        found.append(("input 1", "the weight zero point must be a constant 0"))
    elif np.any(wz != 0):
        found.append(("input 1", f"the weight is symmetric: its zero point must be 0, "
                                 f"found {np.unique(wz)[:4].tolist()}"))
    elif wz.size not in (1, channels):
        found.append(("input 1", f"{wz.size} weight zero points for {channels} output channels"))
    # the rescale: exactly this input's run-time scale times the weight scales
    leaves, last = _rescale_factors(op.results[0])
    consts = [c for c in (_const(v) for v in leaves) if c is not None]
    x_scales = [v for v in leaves if _result_of(v, nn.DYNAMIC_QUANTIZE_LINEAR, 1) is not None]
    if last is None:
        found.append(("output 0", "the accumulator must be cast to float and multiplied by x_scale * w_scale"))
    elif dql is not None and (len(x_scales) != 1 or x_scales[0] is not dql.results[1]):
        found.append(("output 0", "the rescale must use the scale of the DynamicQuantizeLinear that quantized "
                                  "this input, once"))
    elif len(consts) != 1 or len(leaves) != 2:
        found.append(("output 0", "the rescale must be x_scale times one constant weight scale"))
    else:
        s = consts[0]
        axis = 1 if conv else -1   # where the output channels lie in the product
        per_tensor = s.size == 1
        per_channel = s.ndim >= (2 if conv else 1) and s.shape[axis] == channels and s.size == channels
        if not (per_tensor or per_channel):
            found.append(("output 0", f"weight scales of shape {list(s.shape)}: one per tensor or one per output "
                                      f"channel ({channels}, the weight's {'first' if conv else 'last'} axis)"))
        elif not np.all(np.isfinite(s)) or np.any(s <= 0):
            found.append(("output 0", "weight scales in the rescale must be finite and positive"))
    if dql is not None and last is not None:
        found += _row_restore(dql, last)
    return kind, found


def _row_restore(dql: Operation, last: Operation) -> list[tuple[str, str]]:
    """Per-row activations (``DynamicConfig.activations``): the input was divided by a run-time row
    scale r before its DynamicQuantizeLinear, so the rescaled product must be multiplied by the same
    r, before anything else reads it (the output is then x·W, not (x / r)·W)."""
    div = _producer(dql.operands[0], nn.DIV)
    if div is None or _const(div.operands[1]) is not None:
        return []   # no row scaling (a constant divisor is float arithmetic before the layer)
    r = div.operands[1]
    y = last.results[0]
    restore = y.uses[0] if len(y.uses) == 1 else None
    if restore is None or restore[0].opdef is not nn.MUL or restore[0].operands[1 - restore[1]] is not r:
        return [("output 0", "the input was divided by its run-time row scale before quantization: the rescaled "
                             "product must be multiplied by that same row scale")]
    return []


def _table_row(op: Operation) -> list[tuple[str, str]] | None:
    """[(where, message)] for a Gather of an integer constant table that is cast to float (an int8
    embedding table of a dynamic export, LiteRT's dynamic-range EMBEDDING_LOOKUP); None for any other
    Gather. Each looked-up row must be multiplied by its own scale: a Gather of constant positive
    scales, one per table row, with the same indices."""
    table = _const(op.operands[0])
    if table is None or table.dtype not in (np.dtype(np.int8), np.dtype(np.uint8)):
        return None   # (an int64 constant of shapes or positions is not a table of weights)
    y = op.results[0]
    casts = [u for u, _ in y.uses if u.opdef is nn.CAST and isinstance(u.attr("to"), FloatType)]
    if len(y.uses) != 1 or not casts:
        return None
    found: list[tuple[str, str]] = []
    if table.dtype != np.int8:
        found.append(("input 0", f"the table must be stored as int8, found {table.dtype}"))
    elif table.size and (table.min() < -127 or table.max() > 127):
        found.append(("input 0", f"table values must be in [-127, 127] (symmetric), found [{table.min()}, "
                                 f"{table.max()}]"))
    v = casts[0].results[0]
    mul = v.uses[0] if len(v.uses) == 1 and v.uses[0][0].opdef is nn.MUL else None
    g = _producer(mul[0].operands[1 - mul[1]], nn.GATHER) if mul is not None else None
    scales = _const(g.operands[0]) if g is not None else None
    if (g is None or scales is None or g.operands[1] is not op.operands[1]
            or (g.attr("axis") or 0) != (op.attr("axis") or 0)):
        found.append(("output 0", "the looked-up rows must be multiplied by their own scales: a Gather of constant "
                                  "scales with the same indices"))
    elif not (scales.size == 1 or (scales.ndim >= 1 and scales.shape[0] == table.shape[0]
                                   and scales.size == table.shape[0])):
        found.append(("output 0", f"row scales of shape {list(scales.shape)}: one per table row ({table.shape[0]})"))
    elif not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        found.append(("output 0", "row scales must be finite and positive"))
    return found


def dynamic_rows(fn: Function) -> tuple[int, list[spec.Violation]]:
    """(ops checked, violations) for the MatMulIntegers, ConvIntegers and int8 Gather tables of a dynamic export."""
    checked, found = 0, []
    for op in fn.ops:
        if op.opdef is nn.GATHER:
            problems = _table_row(op)
            if problems is not None:
                checked += 1
                found += [spec.Violation(op.label or op.name, "EMBEDDING_LOOKUP (dynamic range)", where, m)
                          for where, m in problems]
            continue
        if op.opdef is not nn.MATMUL_INTEGER and op.opdef is not nn.CONV_INTEGER:
            continue
        checked += 1
        kind, problems = _dynamic_row(op)
        found += [spec.Violation(op.label or op.name, kind, where, m) for where, m in problems]
    return checked, found
