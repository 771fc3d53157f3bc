"""QOperator export: each ``qnn`` op as an ONNX Runtime operator on int8 tensors.

=====================  =========================================================================
qnn op                 ONNX (``ms:`` = ``com.microsoft`` contrib op; all run on the CPU EP, int8)
=====================  =========================================================================
conv                   QLinearConv (per-channel w_scale, int32 bias); group = C_in is depthwise
transpose_conv         (ONNX Runtime 1.32 has no QLinearConvTranspose) kernel = stride, no crop: a 1x1
                       QLinearConv to C_out·s² phase channels, then DepthToSpace on int8; otherwise
                       QLinearConv over the input stretched with s − 1 zero-point rows/columns per
                       pixel (Unsqueeze, Pad, Reshape on int8), padded k − 1 − pad, kernel flipped;
                       within a step
fully_connected        ms:QGemm (transB=1, per-column b_scale, int32 C); an input of rank > 2 is
                       Reshaped to 2-D on int8 and back
batch_matmul           QLinearMatMul (per tensor both sides), an operand with adj_x / adj_y
                       Transposed on int8 first; ONNX Runtime requantizes in float: within a step
add / mul              ms:QLinearAdd / ms:QLinearMul
average_pool           ms:QLinearAveragePool (count_include_pad=0)
max_pool               MaxPool on int8
mean                   ms:QLinearGlobalAveragePool: over H, W directly (+ Squeeze on int8 without
                       keepdims); over other axes after an int8 Transpose (reduced axes last) and
                       Reshape to (1, kept, reduced, 1), then Reshape to the result; within a step
concat                 ms:QLinearConcat
pad                    Pad on int8, the zero point (or the op's stored ``value``) as the constant
resize_nearest         Resize(nearest) on int8 (or two Gathers: see ``qdq.nearest``), whatever the
                       parameters: it copies stored integers, as LiteRT does
softmax                ms:QLinearSoftmax (beta folded into the input scale)
logistic               ms:QLinearSigmoid (equal to LiteRT's table on every value, measured)
elementwise, 1 input   GatherElements of a 256-entry table of quantir's own kernel at Cast(x, int32)
                       (``tables.py``): tanh, hard_swish, gelu, rsqrt, leaky_relu (whose
                       QLinearLeakyRelu rounds differently), requantize, a rescaling clamp; exact
elementwise, 2 inputs  a 65536-entry pair table at ``Cast(a)·256 + Cast(b)``: sub; exact
maximum / minimum      Max / Min on int8 (operands and result share parameters, as LiteRT requires)
clamp                  Clip on int8 to the exact integer range (equal input/output parameters)
data movement (nn)     the same op on int8 (Reshape, Flatten, Transpose, Squeeze, ...)
unidirectional_lstm    a Scan over time of LiteRT's integer recurrence (MatMulInteger, the int16 gate
                       and cell arithmetic, table sigmoid / tanh; integer_lstm.py): ONNX Runtime has
                       no LSTM on int8 activations; exact
=====================  =========================================================================

Which ops are tables is read from the declarations (``tables.is_unary_elementwise``), so a new
elementwise op gets one without an entry here.

An op that reads or writes **int16** (a mixed-precision promotion, ``activations="int16"``) cannot
take an 8-bit QLinear op: ``WIDE`` gives it LiteRT's 16x8 arithmetic in ONNX Runtime's integer ops
instead (``sixteen.py``: ConvInteger / MatMulInteger on the int16 values' 7-bit planes and the fixed-
point requantization in int64 Mul/Add/Mod/Div; elementwise ops as 65,536-entry tables; data movement
as itself), exact with the interpreter, so a promoted model's export still has one QuantizeLinear per
input (tests/quantize/test_op_coverage.py holds every op with a 16x8 kernel to it).

The rest takes its QDQ form (``qdq.py``: DequantizeLinear → float op → QuantizeLinear):

- resize_bilinear: ONNX Runtime's Resize(linear) runs on int8, but not with LiteRT's integer
  arithmetic (10-bit fixed-point weights, rounded): measured (ORT 1.32, 9 size/mode cases) up to 2
  steps off on 32-50% of the elements, where DQ → float Resize → Q is at most 1 step off on 5-16%;
- reduce_sum, l2_normalization, log_softmax and the comparisons' inputs; a mean
  whose kept and reduced element counts are both dynamic; a transpose_conv with computed weights;
- max pool and pad whose parameters differ between input and output.

A fused activation that clamps more than the int8 range becomes an int8 Clip to LiteRT's integer
range after the op: exact, it clamps the same integers LiteRT clamps.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...errors import UnsupportedOpError
from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...numerics import fused_activation_range
from ...types import IntegerType, TensorType, UniformQuantizedPerAxisType
from . import integer_lstm, qdq, sixteen, space_batch, tables
from .builder import (Builder, activation_of, activation_range, base_name, constant_array, pool_attributes, qtype,
                      same_params, scale_array, touches_16_bit, zero_point_array)


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


def transpose_conv(b: Builder, op: Operation) -> None:
    """TRANSPOSE_CONV as QLinearConv (ONNX Runtime has no QLinearConvTranspose): a stride-s transposed
    conv is a stride-1 conv over the input with s − 1 zero-point rows and columns after every pixel
    (Unsqueeze, Pad, Reshape on int8), padded by k − 1 − pad (a negative pad crops), with the kernel
    flipped in H and W. ONNX Runtime's requantization: within a step of LiteRT's."""
    x, w, *bias = op.operands
    r = op.results[0]
    label, name = op.label or base_name(r), base_name(r)
    ints = constant_array(b.value(w))
    shape = x.type.shape
    if ints is None or shape is None:
        return qdq.CONVERT[qnn.TRANSPOSE_CONV](b, op)
    strides, adjust = [int(s) for s in op.attr("strides")], [int(a) for a in op.attr("adjust")]
    kernel = ints.shape[2:]
    if tuple(kernel) == tuple(strides) and strides[0] == strides[1] and not any(adjust):
        return _transpose_conv_as_depth_to_space(b, op, ints, strides[0])
    begin = [max(-a, 0) // 2 for a in adjust]    # the crop qdq.transpose_conv writes as ConvTranspose pads
    q, zp = b.value(x), float(qtype(x.type).zero_point)
    if any(s > 1 for s in strides):
        (sh, sw), (n, c, h, wd) = strides, shape
        spread_t = x.type.clone(shape=(n, c, h, 1, wd, 1))
        q = b.emit(nn.UNSQUEEZE, [q], spread_t, name=f"{name}_spread", label=f"{label}/spread", like=op, axes=(3, 5))
        padded_t = x.type.clone(shape=(n, c, h, sh, wd, sw))
        q = b.emit(nn.PAD, [q], padded_t, name=f"{name}_zeros", label=f"{label}/zeros", like=op,
                   pads=(0, 0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1), constant_value=zp)
        stretched = (n, c, None if h is None else h * sh, None if wd is None else wd * sw)
        stretched_t = x.type.clone(shape=stretched)
        if sum(d is None for d in stretched) <= 1:
            q = b.emit(nn.RESHAPE, [q], stretched_t, name=f"{name}_stretched", label=f"{label}/stretch", like=op,
                       shape=tuple(-1 if d is None else d for d in stretched))
        else:   # several dynamic dims: the target is x's shape times the strides, read at run time
            dims = b.emit(nn.SHAPE, [b.value(x)], TensorType((4,), IntegerType(64)), name=f"{name}_dims",
                          label=f"{label}/dims", like=op)
            target = b.emit(nn.MUL, [dims, b.const(np.asarray([1, 1, sh, sw], np.int64), f"{name}_strides")],
                            dims.type, name=f"{name}_target", label=f"{label}/target", like=op)
            q = b.emit(nn.DYNAMIC_RESHAPE, [q, target], stretched_t, name=f"{name}_stretched",
                       label=f"{label}/stretch", like=op, dims=tuple(-1 if d is None else d for d in stretched))
        shape = stretched
    # conv pads around the stretched input (s·in long, s − 1 past the last pixel): k − 1 − begin before,
    # k + adjust + begin − s after, so the conv yields exactly the op's output rows
    before = [k - 1 - p for k, p in zip(kernel, begin)]
    after = [k + a + p - s for k, a, p, s in zip(kernel, adjust, begin, strides)]
    if any(before) or any(after):
        out_hw = tuple(None if d is None else d + p0 + p1 for d, p0, p1 in zip(shape[2:], before, after))
        q = b.emit(nn.PAD, [q], x.type.clone(shape=(*shape[:2], *out_hw)), name=f"{name}_padded",
                   label=f"{label}/pad", like=op, pads=(0, 0, *before, 0, 0, *after), constant_value=zp)
    flipped = b.stored_constant(ints[:, :, ::-1, ::-1], w.type, f"{w.name_hint or name + '_w'}_flipped")
    inputs = [q, b.scale(x), b.zero_point(x), flipped, b.scale(w), b.zero_point(w), *_out_params(b, op),
              *(b.value(v) for v in bias)]
    y = b.emit(nn.QLINEAR_CONV, inputs, r.type, name=_result_name(op), label=label, like=op, strides=(1, 1),
               pads=(0, 0, 0, 0), dilations=(1, 1), group=1)
    finish(b, op, y)


def _transpose_conv_as_depth_to_space(b: Builder, op: Operation, ints: np.ndarray, s: int) -> None:
    """Kernel = stride, no crop (PP-OCR's 2x2, stride-2 upsampling): the windows do not overlap, so
    output pixel (s·i + a, s·j + b) of channel o is input pixel (i, j) times w[o, :, a, b]. That is a
    1x1 QLinearConv to C_out·s² channels, (o, a, b) in DepthToSpace's CRD order, then DepthToSpace on
    int8: the MACs of the transposed conv itself (the stretched input would do s² times as many)."""
    x, w, *bias = op.operands
    r = op.results[0]
    label, name = op.label or base_name(r), base_name(r)
    c_out, c_in = ints.shape[:2]
    weights = ints.transpose(0, 2, 3, 1).reshape(c_out * s * s, c_in, 1, 1)
    w_t = TensorType(weights.shape, _per_phase(qtype(w.type), s * s))
    inputs = [b.value(x), b.scale(x), b.zero_point(x), b.stored_constant(weights, w_t, f"{name}_w_phases"),
              b.const(scale_array(w_t), f"{name}_w_phases_scale"),
              b.const(zero_point_array(w_t, f"{name}_w_phases"), f"{name}_w_phases_zero_point"), *_out_params(b, op)]
    if bias:
        values = constant_array(b.value(bias[0]))
        if values is None:
            return qdq.CONVERT[qnn.TRANSPOSE_CONV](b, op)
        b_t = TensorType((c_out * s * s,), _per_phase(qtype(bias[0].type), s * s))
        inputs.append(b.stored_constant(np.repeat(values, s * s), b_t, f"{name}_bias_phases"))
    n, _, h, wd = x.type.shape
    phases_t = r.type.clone(shape=(n, c_out * s * s, h, wd))
    q = b.emit(nn.QLINEAR_CONV, inputs, phases_t, name=f"{name}_phases", label=f"{label}/phases", like=op,
               strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1)
    q = b.emit(nn.DEPTH_TO_SPACE, [q], r.type, name=_result_name(op), label=f"{label}/depth_to_space", like=op,
               blocksize=s, mode="CRD")
    finish(b, op, q)


def _per_phase(q, phases: int):
    """A per-channel type with each channel's scale and zero point repeated for its ``phases`` channels."""
    if not isinstance(q, UniformQuantizedPerAxisType):
        return q
    zps = None if q.zero_points is None else tuple(np.repeat(q.zero_points, phases).tolist())
    return dataclasses.replace(q, scales=tuple(np.repeat(q.scales, phases).tolist()), zero_points=zps)


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


def batch_matmul(b: Builder, op: Operation) -> None:
    """QLinearMatMul; an operand with adj_x / adj_y has its last two dims swapped on int8 first."""
    inputs: list[Value] = []
    for v, adj in zip(op.operands, (op.attr("adj_x"), op.attr("adj_y"))):
        q = b.value(v)
        if adj:
            n, s = len(v.type.shape), v.type.shape
            q = b.emit(nn.TRANSPOSE, [q], v.type.clone(shape=(*s[:-2], s[-1], s[-2])), name=f"{base_name(v)}__adj",
                       label=f"{op.label or base_name(v)}/adj", like=op, perm=(*range(n - 2), n - 1, n - 2))
        inputs += [q, b.scale(v), b.zero_point(v)]
    finish(b, op, b.emit(nn.QLINEAR_MATMUL, [*inputs, *_out_params(b, op)], op.results[0].type,
                         name=_result_name(op), label=op.label, like=op))


def _binary(op_type: str):
    def convert(b: Builder, op: Operation) -> None:
        lhs, rhs = op.operands
        finish(b, op, b.contrib(op_type, [*b.qparams(lhs), *b.qparams(rhs), *_out_params(b, op)], op,
                                name=_result_name(op)))
    return convert


def average_pool(b: Builder, op: Operation) -> None:
    x = op.operands[0]
    finish(b, op, b.contrib("QLinearAveragePool", [*b.qparams(x), *_out_params(b, op)], op, name=_result_name(op),
                            count_include_pad=0, channels_last=0, **pool_attributes(op)))


def max_pool(b: Builder, op: Operation) -> None:
    x = op.operands[0]
    if not same_params(x.type, op.results[0].type):
        return qdq.CONVERT[qnn.MAX_POOL](b, op)
    finish(b, op, b.emit(nn.MAX_POOL, [b.value(x)], op.results[0].type, name=_result_name(op), label=op.label,
                         like=op, **pool_attributes(op)))


def mean(b: Builder, op: Operation) -> None:
    if not qdq.is_global_mean(op):
        return mean_as_pool(b, op)
    x, r = op.operands[0], op.results[0]
    keep = bool(op.attr("keepdims"))
    pooled_t = r.type if keep else r.type.clone(shape=(*r.type.shape, 1, 1))
    q = b.contrib("QLinearGlobalAveragePool", [*b.qparams(x), *_out_params(b, op)], op, result_type=pooled_t,
                  name=r.name_hint if keep else f"{base_name(r)}_pooled", channels_last=0)
    if not keep:
        q = b.emit(nn.SQUEEZE, [q], r.type, name=r.name_hint, label=f"{op.label or base_name(r)}/squeeze", like=op,
                   axes=(2, 3))
    b.define(r, q)


def mean_as_pool(b: Builder, op: Operation) -> None:
    """MEAN over any axes as QLinearGlobalAveragePool: the int8 input transposed so that the reduced
    axes come last, reshaped to (1, kept, reduced, 1), pooled over its H, W and reshaped to the result.
    ONNX Runtime's rounding (a float multiplier, ties to even), within a step of LiteRT's."""
    x, r = op.operands[0], op.results[0]
    shape, label, name = x.type.shape, op.label or base_name(r), base_name(r)
    if shape is None:
        raise UnsupportedOpError(f"{op.describe()}: MEAN needs a ranked input for the QOperator export")
    n = len(shape)
    axes = sorted({int(a) % n for a in op.attr("axes")})
    kept = [i for i in range(n) if i not in axes]
    rows, cols = _product(shape[i] for i in kept), _product(shape[i] for i in axes)
    if rows is None and cols is None:
        return qdq.CONVERT[qnn.MEAN](b, op)   # both products dynamic: one Reshape cannot say either
    q = b.value(x)
    if kept + axes != list(range(n)):
        perm = tuple(kept + axes)
        q = b.emit(nn.TRANSPOSE, [q], x.type.clone(shape=tuple(shape[i] for i in perm)), name=f"{name}_reduced_last",
                   label=f"{label}/transpose", like=op, perm=perm)
    grid_t = x.type.clone(shape=(1, rows, cols, 1))
    q = b.emit(nn.RESHAPE, [q], grid_t, name=f"{name}_grid", label=f"{label}/grid", like=op,
               shape=(1, -1 if rows is None else rows, -1 if rows is not None else cols, 1))
    pooled = b.contrib("QLinearGlobalAveragePool", [q, b.scale(x), b.zero_point(x), *_out_params(b, op)], op,
                       result_type=r.type.clone(shape=(1, rows, 1, 1)), name=f"{name}_pooled", channels_last=0)
    out = r.type.shape
    if sum(d is None for d in out) <= 1:
        y = b.emit(nn.RESHAPE, [pooled], r.type, name=r.name_hint, label=f"{label}/result", like=op,
                   shape=tuple(-1 if d is None else d for d in out))
    else:   # several dynamic dims: the target is x's kept dims (1 for the reduced ones), read at run time
        dims = b.emit(nn.SHAPE, [b.value(x)], TensorType((n,), IntegerType(64)), name=f"{name}_dims",
                      label=f"{label}/dims", like=op)
        if op.attr("keepdims"):
            keep = np.asarray([0 if i in axes else 1 for i in range(n)], np.int64)
            dims = b.emit(nn.MUL, [dims, b.const(keep, f"{name}_keep")], dims.type, name=f"{name}_kept",
                          label=f"{label}/kept", like=op)
            target = b.emit(nn.ADD, [dims, b.const(1 - keep, f"{name}_ones")], dims.type, name=f"{name}_target",
                            label=f"{label}/target", like=op)
        else:
            target = b.emit(nn.GATHER, [dims, b.const(np.asarray(kept, np.int64), f"{name}_kept_axes")],
                            TensorType((len(kept),), IntegerType(64)), name=f"{name}_target",
                            label=f"{label}/target", like=op, axis=0)
        y = b.emit(nn.DYNAMIC_RESHAPE, [pooled, target], r.type, name=r.name_hint, label=f"{label}/result", like=op,
                   dims=tuple(-1 if d is None else d for d in out))
    b.define(r, y)


def _product(dims) -> int | None:
    out = 1
    for d in dims:
        if d is None:
            return None
        out *= int(d)
    return out


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
        return tables.lookup(b, op)
    q = qtype(r.type)
    lo, hi = fused_activation_range(act, np.float32(q.scale), int(q.zero_point), q.storage_min, q.storage_max)
    b.define(r, b.emit(nn.CLIP, [b.value(x)], r.type, name=r.name_hint, label=op.label, like=op,
                       min=float(lo), max=float(hi)))


def _select(opdef):
    """MAXIMUM / MINIMUM: Max / Min on int8, comparing stored integers as LiteRT does when the operands
    and the result share parameters (its Prepare refuses anything else); otherwise the QDQ form."""
    def convert(b: Builder, op: Operation) -> None:
        r = op.results[0]
        if not all(same_params(v.type, r.type) for v in op.operands):
            return qdq.CONVERT[op.opdef](b, op)
        b.define(r, b.emit(opdef, [b.value(v) for v in op.operands], r.type, name=r.name_hint, label=op.label,
                           like=op))
    return convert


def resize_nearest(b: Builder, op: Operation) -> None:
    r = op.results[0]
    b.define(r, qdq.nearest(b, op, b.value(op.operands[0]), r.type))


def data_movement(b: Builder, op: Operation) -> None:
    """The op itself: it copies stored integers, exactly as the interpreter does."""
    b.clone(op)


def _fmt(shape) -> str:
    return "*" if shape is None else "x".join("?" if d is None else str(d) for d in shape)


CONVERT = {
    **qdq.CONVERT,    # resize_bilinear, ...: DQ → float op → Q
    **tables.qoperator_table(),   # elementwise ops (tanh, hard_swish, gelu, rsqrt, requantize, sub, ...): a table
    qnn.CONV: conv,
    qnn.FULLY_CONNECTED: fully_connected,
    qnn.BATCH_MATMUL: batch_matmul,
    qnn.TRANSPOSE_CONV: transpose_conv,
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
    qnn.CLAMP: clamp,
    qnn.MAXIMUM: _select(nn.VARIADIC["max"]),
    qnn.MINIMUM: _select(nn.VARIADIC["min"]),
    **{opdef: data_movement for opdef in qnn.DATA_MOVEMENT},
    **space_batch.QOPERATOR,   # the same moves on int8 (space_batch.py)
    qnn.UNIDIRECTIONAL_LSTM: integer_lstm.lstm_qoperator,   # a Scan of LiteRT's integer recurrence
}

# Why an op takes its QDQ form in this export (``why_requantized``): what the summary of a save says.
_WHY = {
    qnn.RESIZE_BILINEAR: "ONNX Runtime's int8 Resize(linear) does not round as LiteRT does (up to 2 steps off)",
    qnn.REDUCE_SUM: "ONNX Runtime has no int8 ReduceSum",
    qnn.L2_NORMALIZATION: "ONNX Runtime has no int8 L2 normalization",
    qnn.LOG_SOFTMAX: "ONNX Runtime has no int8 LogSoftmax",
    qnn.MEAN: "a mean whose kept and reduced element counts are both dynamic",
    qnn.TRANSPOSE_CONV: "a transpose_conv with computed weights",
    qnn.MAX_POOL: "a max pool whose input and output parameters differ",
    qnn.PAD: "a pad whose input and output parameters differ",
}
SIXTEEN_BIT = ("int16 tensors (mixed precision or activations='int16') with no 16-bit integer form in ONNX "
               "Runtime's ops (sixteen.py); Config(budget=None) (--budget off) gives an all-int8 model")


def why_requantized(op: Operation) -> str:
    """Why ``op`` is computed in float (DequantizeLinear → op → QuantizeLinear) in the QOperator export."""
    if touches_16_bit(op):
        return SIXTEEN_BIT
    return _WHY.get(op.opdef, f"no QOperator form for this {op.name}")


def requantized_message(requantized: list[tuple[str, str, str]]) -> str:
    """What a QOperator save computes in float (``(label, qnn op, why)`` each), grouped by why."""
    by_why: dict[str, list[str]] = {}
    for label, _, why in requantized:
        by_why.setdefault(why, []).append(label)
    parts = [f"{why}: {len(labels)} ({', '.join(labels[:3])}{', ...' if len(labels) > 3 else ''})"
             for why, labels in by_why.items()]
    return (f"QOperator export: {len(requantized)} op(s) computed in float between DequantizeLinear and "
            f"QuantizeLinear (their QDQ form). " + "; ".join(parts))


# ops on int16 values (the builder's ``wide`` table): LiteRT's 16x8 arithmetic in ONNX Runtime's integer
# ops (sixteen.py), elementwise ops as 65,536-entry tables, data movement as itself; the rest QDQ
WIDE = {
    **qdq.CONVERT,
    **{opdef: tables.lookup for opdef in tables.qoperator_table() if tables.is_unary_elementwise(opdef)},
    **{opdef: data_movement for opdef in qnn.DATA_MOVEMENT},
    **sixteen.CONVERT,
}

__all__ = ["CONVERT", "WIDE", "why_requantized", "requantized_message"]
