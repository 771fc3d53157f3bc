"""QOperator export: each ``qnn`` op as an ONNX Runtime operator on int8 tensors.

=====================  =========================================================================
qnn op                 ONNX (``ms:`` = ``com.microsoft`` contrib op; all run on the CPU EP, int8)
=====================  =========================================================================
conv                   QLinearConv (per-channel w_scale, int32 bias); group = C_in is depthwise
fully_connected        ms:QGemm (transB=1, per-column b_scale, int32 C); an input of rank > 2 is
                       Reshaped to 2-D on int8 and back
add / mul              ms:QLinearAdd / ms:QLinearMul
average_pool           ms:QLinearAveragePool (count_include_pad=0)
max_pool               MaxPool on int8
mean over H, W         ms:QLinearGlobalAveragePool (+ Squeeze on int8 without keepdims)
concat                 ms:QLinearConcat
pad                    Pad on int8, the zero point (or the op's stored ``value``) as the constant
resize_nearest         Resize(nearest) on int8 (or two Gathers: see ``qdq.nearest``), whatever the
                       parameters: it copies stored integers, as LiteRT does
softmax                ms:QLinearSoftmax (beta folded into the input scale)
logistic               ms:QLinearSigmoid
leaky_relu             ms:QLinearLeakyRelu
clamp                  Clip on int8 to the exact integer range (equal input/output parameters)
data movement (nn)     the same op on int8 (Reshape, Flatten, Transpose, Squeeze, ...)
=====================  =========================================================================

Everything else takes its QDQ form (``qdq.py``: DequantizeLinear → float op → QuantizeLinear):
sub, tanh, hard_swish, resize_bilinear and requantize, which have no int8 kernel in ONNX Runtime
1.32 (``QLinearReduceMean`` is a schema without a CPU kernel, so other means too), and the ops
above whose parameters do not fit the integer form (a max pool or pad that rescales, a clamp that
rescales or has no activation).

A fused activation that clamps more than the int8 range becomes an int8 Clip to LiteRT's integer
range after the op: exact, it clamps the same integers LiteRT clamps.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedOpError
from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...numerics import fused_activation_range
from ...types import IntegerType, TensorType
from . import qdq, space_batch
from .builder import Builder, activation_of, activation_range, base_name, qtype, same_params


def _result_name(op: Operation) -> str | None:
    """The qnn result's name, or a provisional one when an activation Clip will carry it."""
    r = op.results[0]
    return r.name_hint if activation_range(op) is None else f"{base_name(r)}__unclamped"


def finish(b: Builder, op: Operation, q: Value) -> None:
    """The fused activation as an int8 Clip when it is not a no-op; ``q`` becomes the result."""
    r = op.results[0]
    bounds = activation_range(op)
    if bounds is not None:
        q = b.emit(nn.CLIP, [q], r.type, name=r.name_hint, label=f"{op.label or base_name(r)}/clip", like=op,
                   min=float(bounds[0]), max=float(bounds[1]))
    b.define(r, q)


def _out_params(b: Builder, op: Operation) -> list[Value]:
    r = op.results[0]
    return [b.scale(r), b.zero_point(r)]


# -- converters -----------------------------------------------------------------------------------

def conv(b: Builder, op: Operation) -> None:
    x, w, *bias = op.operands
    inputs = [*b.qparams(x), *b.qparams(w), *_out_params(b, op), *(b.value(v) for v in bias)]
    attrs = {k: op.attr(k) for k in ("strides", "pads", "dilations", "group", "auto_pad") if op.attr(k) is not None}
    q = b.emit(nn.QLINEAR_CONV, inputs, op.results[0].type, name=_result_name(op), label=op.label, like=op, **attrs)
    finish(b, op, q)


def fully_connected(b: Builder, op: Operation) -> None:
    x, w, *bias = op.operands
    r = op.results[0]
    shape = x.type.shape
    a = b.value(x)
    flat = shape is None or len(shape) != 2
    if flat:
        k = w.type.shape[1]
        a = b.emit(nn.RESHAPE, [a], x.type.clone(shape=(None, k)), name=f"{base_name(x)}_2d",
                   label=f"{op.label or base_name(r)}/flatten", like=op, shape=(-1, k))
    inputs = [a, b.scale(x), b.zero_point(x), *b.qparams(w), b.value(bias[0]) if bias else None,
              *_out_params(b, op)]
    rows = None if shape is None or None in shape[:-1] else int(np.prod(shape[:-1]))
    out_t = TensorType((rows, w.type.shape[0]), qtype(r.type)) if flat else r.type
    q = b.contrib("QGemm", inputs, op, result_type=out_t, name=f"{base_name(r)}_2d" if flat else _result_name(op),
                  transB=1)
    if flat:
        out_shape = r.type.shape
        if out_shape is None:
            raise UnsupportedOpError(f"{op.describe()}: QGemm on an input of shape "
                                     f"{_fmt(shape)} needs a ranked input")
        if sum(d is None for d in out_shape) > 1:
            # several dynamic leading dims: the unflatten target is x's leading dims, read at run time
            lead = b.emit(nn.SHAPE, [b.value(x)], TensorType((len(shape) - 1,), IntegerType(64)),
                          name=f"{base_name(r)}_lead", label=f"{op.label or base_name(r)}/lead", like=op, end=-1)
            n = b.const(np.asarray([w.type.shape[0]], np.int64), f"{base_name(r)}_n")
            target = b.emit(nn.CONCAT, [lead, n], TensorType((len(out_shape),), IntegerType(64)),
                            name=f"{base_name(r)}_target", label=f"{op.label or base_name(r)}/target", like=op, axis=0)
            q = b.emit(nn.DYNAMIC_RESHAPE, [q, target], r.type, name=_result_name(op),
                       label=f"{op.label or base_name(r)}/unflatten", like=op,
                       dims=tuple(-1 if d is None else d for d in out_shape))
        else:
            q = b.emit(nn.RESHAPE, [q], r.type, name=_result_name(op),
                       label=f"{op.label or base_name(r)}/unflatten",
                       like=op, shape=tuple(-1 if d is None else d for d in out_shape))
    finish(b, op, q)


def _binary(op_type: str):
    def convert(b: Builder, op: Operation) -> None:
        lhs, rhs = op.operands
        finish(b, op, b.contrib(op_type, [*b.qparams(lhs), *b.qparams(rhs), *_out_params(b, op)], op,
                                name=_result_name(op)))
    return convert


def _pool_attrs(op: Operation) -> dict:
    kernel = tuple(op.attr("kernel_shape"))
    pads = ({"auto_pad": op.attr("auto_pad")} if op.attr("auto_pad") else
            {"pads": tuple(op.attr("pads") or (0,) * (2 * len(kernel)))})
    return {"kernel_shape": kernel, "strides": tuple(op.attr("strides") or (1,) * len(kernel)), **pads}


def average_pool(b: Builder, op: Operation) -> None:
    x = op.operands[0]
    finish(b, op, b.contrib("QLinearAveragePool", [*b.qparams(x), *_out_params(b, op)], op, name=_result_name(op),
                            count_include_pad=0, channels_last=0, **_pool_attrs(op)))


def max_pool(b: Builder, op: Operation) -> None:
    x = op.operands[0]
    if not same_params(x.type, op.results[0].type):
        return qdq.CONVERT[qnn.MAX_POOL](b, op)
    finish(b, op, b.emit(nn.MAX_POOL, [b.value(x)], op.results[0].type, name=_result_name(op), label=op.label,
                         like=op, **_pool_attrs(op)))


def mean(b: Builder, op: Operation) -> None:
    if not qdq.is_global_mean(op):
        return qdq.CONVERT[qnn.MEAN](b, op)
    x, r = op.operands[0], op.results[0]
    keep = bool(op.attr("keepdims"))
    pooled_t = r.type if keep else r.type.clone(shape=(*r.type.shape, 1, 1))
    q = b.contrib("QLinearGlobalAveragePool", [*b.qparams(x), *_out_params(b, op)], op, result_type=pooled_t,
                  name=r.name_hint if keep else f"{base_name(r)}_pooled", channels_last=0)
    if not keep:
        q = b.emit(nn.SQUEEZE, [q], r.type, name=r.name_hint, label=f"{op.label or base_name(r)}/squeeze", like=op,
                   axes=(2, 3))
    b.define(r, q)


def concat(b: Builder, op: Operation) -> None:
    inputs = [*_out_params(b, op)]
    for v in op.operands:
        inputs += b.qparams(v)
    b.define(op.results[0], b.contrib("QLinearConcat", inputs, op, axis=int(op.attr("axis"))))


def pad(b: Builder, op: Operation) -> None:
    x, r = op.operands[0], op.results[0]
    if not same_params(x.type, r.type):
        return qdq.CONVERT[qnn.PAD](b, op)
    value = qtype(r.type).zero_point if op.attr("value") is None else op.attr("value")
    b.define(r, b.emit(nn.PAD, [b.value(x)], r.type, name=r.name_hint, label=op.label, like=op,
                       pads=tuple(op.attr("pads")), constant_value=float(value)))


def softmax(b: Builder, op: Operation) -> None:
    """beta scales the logits, so it folds into the input scale: softmax(beta·s·(q - zp))."""
    x = op.operands[0]
    scale = np.float32(float(np.float32(qtype(x.type).scale)) * float(op.attr("beta")))
    x_scale = b.const(np.asarray(scale), f"{base_name(x)}_softmax_scale")
    b.define(op.results[0], b.contrib("QLinearSoftmax", [b.value(x), x_scale, b.zero_point(x),
                                                          *_out_params(b, op)], op, axis=-1, opset=13))


def _unary(op_type: str, **attrs):
    def convert(b: Builder, op: Operation) -> None:
        values = {k: (v(op) if callable(v) else v) for k, v in attrs.items()}
        b.define(op.results[0], b.contrib(op_type, [*b.qparams(op.operands[0]), *_out_params(b, op)], op, **values))
    return convert


def clamp(b: Builder, op: Operation) -> None:
    x, r = op.operands[0], op.results[0]
    act = activation_of(op)
    if act == "none" or not same_params(x.type, r.type):
        return qdq.CONVERT[qnn.CLAMP](b, op)
    q = qtype(r.type)
    lo, hi = fused_activation_range(act, np.float32(q.scale), int(q.zero_point), q.storage_min, q.storage_max)
    b.define(r, b.emit(nn.CLIP, [b.value(x)], r.type, name=r.name_hint, label=op.label, like=op,
                       min=float(lo), max=float(hi)))


def resize_nearest(b: Builder, op: Operation) -> None:
    r = op.results[0]
    b.define(r, qdq.nearest(b, op, b.value(op.operands[0]), r.type))


def data_movement(b: Builder, op: Operation) -> None:
    """The op itself: it copies stored integers, exactly as the interpreter does."""
    b.clone(op)


def _fmt(shape) -> str:
    return "*" if shape is None else "x".join("?" if d is None else str(d) for d in shape)


CONVERT = {
    **qdq.CONVERT,    # sub, tanh, hard_swish, resize_bilinear, requantize: DQ → float op → Q
    qnn.CONV: conv,
    qnn.FULLY_CONNECTED: fully_connected,
    qnn.ADD: _binary("QLinearAdd"),
    qnn.MUL: _binary("QLinearMul"),
    qnn.AVERAGE_POOL: average_pool,
    qnn.MAX_POOL: max_pool,
    qnn.MEAN: mean,
    qnn.CONCAT: concat,
    qnn.PAD: pad,
    qnn.RESIZE_NEAREST: resize_nearest,
    qnn.SOFTMAX: softmax,
    qnn.LOGISTIC: _unary("QLinearSigmoid"),
    qnn.LEAKY_RELU: _unary("QLinearLeakyRelu", alpha=lambda op: float(op.attr("alpha"))),
    qnn.CLAMP: clamp,
    **{opdef: data_movement for opdef in qnn.DATA_MOVEMENT},
    **space_batch.QOPERATOR,   # the same moves on int8 (space_batch.py)
}

__all__ = ["CONVERT"]
