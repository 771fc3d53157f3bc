"""16-bit ops in the QOperator export: LiteRT's 16x8 arithmetic in ONNX Runtime's integer ops.

ONNX Runtime's QLinear kernels are 8-bit, and its own quantizer refuses 16-bit QOperator models. An
op that reads or writes int16 (a mixed-precision promotion, or ``activations="int16"``) used to take
its QDQ form here (DequantizeLinear → float op → QuantizeLinear): one QuantizeLinear per such op, so a
promoted model was a QDQ model in all but name. This module writes the integer arithmetic of quantir's
16x8 kernel instead, with ONNX ops that ONNX Runtime runs on integers, so the QOperator export keeps
one QuantizeLinear per model input. The results are the interpreter's integers (LiteRT's
``BUILTIN_REF``), not within a step of them:

=====================  =========================================================================
qnn op (int16)         ONNX (int64 arithmetic unless said)
=====================  =========================================================================
conv (16x8)            the int16 input as three unsigned 7-bit planes (``integer_arith.Planes``),
                       a ConvInteger of each with the int8 weights (its zero point the plane's),
                       summed with their weights 2^14, 2^7, 1 and the int64 bias, then the 64-bit
                       MBQM per channel (``mbqm64``) and the clamp; depthwise: group
fully_connected        the same planes, MatMulInteger each, the bias, then the reference kernel's
                       double-precision rounding: round-half-away(double(acc)·scale[c])
transpose_conv         kernel = stride: a 1x1 conv to C_out·s² phase channels, then
                       DepthToSpace (on the int16 values as float: exact); else a conv over the
                       planes stretched with zero-point rows and columns, kernel flipped
batch_matmul (16x16)   both operands as planes: nine MatMulInteger, then the 64-bit MBQM
add / sub              each input's rescale is a function of its int16 value: a 65,536-entry
                       table (Gather), then the sum and the 32-bit MBQM (or, with power-of-two
                       scales, the saturating add LiteRT runs)
mul                    the int64 product and the 32-bit MBQM
unary elementwise      a 65,536-entry table of quantir's own kernel (``tables.lookup``)
mean                   ReduceSum, then the 32-bit MBQM; over a dynamic axis 1/N is folded into the
                       multiplier in the graph, as LiteRT's Prepare folds it
average_pool           the window sums as a depthwise ConvInteger of ones over the planes, the
                       in-image tap counts the same way on a tensor of ones, then the division
                       rounded half away from zero (Sign, Div)
softmax                LiteRT's SoftmaxInt16: exp of (x - max) from a table, ReduceSum, the
                       leading-zero count by comparisons, the reciprocal from a table, shifts
max_pool, pad,         the same op on the int16 values widened (Cast to float or int32, exact;
resize_nearest         ONNX Runtime has no int16 MaxPool, Pad or Resize), cast back
concat, data movement  the same op on int16
=====================  =========================================================================

The fixed-point steps are ``integer_arith``'s: the 32-bit MBQM is gemmlowp's
``RDBPOT(SRDHM(x·2^left, M), right)`` and the 64-bit one ``floor((x·M16 + 2^(t-1)) / 2^t)``, each a
few int64 Mul, Add and Div. Every intermediate fits int64 in the domains the kernels accept. Anything
else on int16 keeps its QDQ form, named in the save's warning. This is exact, not fast: ONNX Runtime
runs each step as its own kernel (bench/real_models.py measures the latency); the QDQ export stays
the fast form.
"""
from __future__ import annotations


import numpy as np
import onnx

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...numerics import quantize_multiplier, requantize_multiplier, rounding_divide_by_pot
from ...runtime import qkernels as qk
from ...runtime.qkernels._common import multiply_by_quantized_multiplier
from ...runtime.qkernels.add import INT16_VALUES, AddPotParams, rescale_input
from ...runtime.qkernels.transpose_conv import prepare_transpose_conv
from ...types import TensorType, UniformQuantizedPerAxisType
from . import qdq
from .integer_arith import (F32, F64, I1, I32, I64, U8, Graph, Planes, bit_length, channel_view, mbqm, mbqm64,
                            mbqm_values, planes, planes_dot, powers_of_two)
from .dtypes import storage_element_type
from .builder import (Builder, activation_of, activation_range, base_name, constant_array, pool_attributes, qtype,
                      same_params)

__all__ = ["CONVERT"]


def _finish(g: Graph, x: Value, lo: int, hi: int, zero_point: int = 0) -> None:
    """``clamp(x + zp, lo, hi)`` stored in the result's type; the result becomes it."""
    r = g.op.results[0]
    if zero_point:
        x = g.binary("Add", x, g.i64(zero_point, "zero_point"))
    x = g.node("Clip", [x, g.i64(lo, "lo"), g.i64(hi, "hi")], I64, what="clamp")
    g.b.define(r, g.b.emit(nn.CAST, [x], r.type, name=r.name_hint, label=f"{g.label}/store", like=g.op,
                           to=storage_element_type(r.type)))


def _widen(g: Graph, v: Value, element=I64) -> Value:
    return g.cast(g.b.value(v), element)


def _planes(b: Builder, v: Value, op: Operation) -> Planes:
    """An int16 value as three 7-bit planes (``integer_arith.Planes``), made once per value."""
    cache = b.__dict__.setdefault("_sixteen_planes", {})
    if v not in cache:
        cache[v] = planes(Graph(b, op, name=f"{base_name(v)}_planes"), b.value(v), 16)
    return cache[v]


def _is_int16(v: Value) -> bool:
    q = qtype(v.type)
    return q is not None and q.storage_width == 16 and q.is_signed


def _scale(v: Value) -> float:
    return float(qtype(v.type).scale)


def _scales(v: Value) -> np.ndarray:
    q = qtype(v.type)
    return np.asarray(q.scales if isinstance(q, UniformQuantizedPerAxisType) else [q.scale], np.float64)


def _zp(v: Value) -> int:
    return int(qtype(v.type).zero_point)


# -- converters -------------------------------------------------------------------------------------

def _requires(*values: Value) -> bool:
    """Every operand and result that should be int16 is (a mixed 8/16 op keeps its QDQ form)."""
    return all(_is_int16(v) for v in values)


def _weights(b: Builder, w: Value) -> np.ndarray | None:
    ints = constant_array(b.value(w))
    return None if ints is None else np.asarray(ints).astype(np.int8)


def _bias(b: Builder, bias: list[Value]) -> np.ndarray | None:
    if not bias:
        return None
    values = constant_array(b.value(bias[0]))
    return None if values is None else np.asarray(values, np.int64)


def _int32_bias(b: Builder, bias: list[Value]) -> bool:
    """Is the op's bias stored int32 (LiteRT's quantized_bias_type INT32: an int32 accumulator)?"""
    return bool(bias) and np.asarray(constant_array(b.value(bias[0]))).dtype == np.int32


def _weighted(b: Builder, op: Operation):
    """``(x, w, bias operands, result, int8 weights, int64 bias or None)`` of a conv-like op with int16
    input and result and constant weights and bias; None (after writing its QDQ form) otherwise."""
    x, w, *bias = op.operands
    r = op.results[0]
    ints, bias_values = _weights(b, w), _bias(b, bias)
    if not _requires(x, r) or ints is None or (bias and bias_values is None) or x.type.shape is None:
        qdq.CONVERT[op.opdef](b, op)
        return None
    return x, w, bias, r, ints, bias_values


def conv(b: Builder, op: Operation) -> None:
    parts = _weighted(b, op)
    if parts is None:
        return
    x, w, _, r, ints, bias_values = parts
    g = Graph(b, op)
    p = qk.prepare_conv2d(_scale(x), _scales(w), _scale(r), _zp(r), activation_of(op), channels=ints.shape[0],
                          storage=np.int16, input_zero_point=_zp(x))
    attrs = {k: op.attr(k) for k in ("strides", "pads", "dilations", "group", "auto_pad") if op.attr(k) is not None}
    acc = planes_dot(g, _planes(b, x, op), "ConvInteger", g.const(ints, "w"), **attrs)
    if bias_values is not None:
        acc = g.binary("Add", acc, g.i64(bias_values.reshape(-1, 1, 1), "bias"))
    _finish(g, mbqm64(g, acc, channel_view(p.multiplier, 4, 1), channel_view(p.shift, 4, 1)),
            p.act_min, p.act_max)


def fully_connected(b: Builder, op: Operation) -> None:
    parts = _weighted(b, op)
    if parts is None:
        return
    x, w, bias, r, ints, bias_values = parts
    g = Graph(b, op)
    per_axis = isinstance(qtype(w.type), UniformQuantizedPerAxisType)
    p = qk.prepare_fully_connected(
        _scale(x), _scales(w) if per_axis else _scales(w)[0], _scale(r), _zp(r), activation_of(op),
        channels=ints.shape[0], storage=np.int16, input_zero_point=_zp(x),
        bias_type="int32" if _int32_bias(b, bias) else "int64")
    acc = planes_dot(g, _planes(b, x, op), "MatMulInteger", g.const(np.ascontiguousarray(ints.T), "w_t"))
    if bias_values is not None:
        acc = g.binary("Add", acc, g.i64(bias_values, "bias"))
    # BUILTIN_REF's 16x8 FULLY_CONNECTED rounds in double: round-half-away(double(acc)·scale[c])
    scaled = g.binary("Mul", g.cast(acc, F64),
                      g.const(np.broadcast_to(np.asarray(p.effective_scale, np.float64).reshape(-1),
                                              (ints.shape[0],)).copy(), "scale"), F64)
    _finish(g, _round_half_away(g, scaled), p.act_min, p.act_max, int(p.output_zero_point))


def _round_half_away(g: Graph, a: Value) -> Value:
    """Round to nearest, ties away from zero, of a double tensor, as int64: Round (ties to even)
    corrected where a tie went toward zero."""
    r = g.node("Round", [a], F64, what="round")
    tie = g.binary("Equal", g.node("Abs", [g.binary("Sub", a, r, F64)], F64, what="abs"),
                   g.const(np.float64(0.5), "half"), I1)
    toward_zero = g.binary("Less", g.node("Abs", [r], F64, what="abs"), g.node("Abs", [a], F64, what="abs"), I1)
    stepped = g.binary("Add", r, g.node("Sign", [a], F64), F64)
    away = g.node("Where", [g.binary("And", tie, toward_zero, I1), stepped, r], F64, what="away")
    return g.cast(away, I64)


def batch_matmul(b: Builder, op: Operation) -> None:
    a, c = op.operands
    r = op.results[0]
    if not _requires(a, c, r):
        return qdq.CONVERT[op.opdef](b, op)
    g = Graph(b, op)
    p = qk.prepare_batch_matmul(_scale(a), _scale(c), _scale(r), _zp(r))
    operands = []
    for v, adj in ((a, op.attr("adj_x")), (c, op.attr("adj_y"))):
        pl = _planes(b, v, op)
        if adj:
            n = v.type.rank
            perm = (*range(n - 2), n - 1, n - 2)
            pl = Planes([g.node("Transpose", [t], U8, what="adj", perm=perm) for t in pl.values], pl.zero_points)
        operands.append(pl)
    lhs, rhs = operands
    acc = planes_dot(g, lhs, "MatMulInteger", rhs)
    _finish(g, mbqm64(g, acc, p.output_multiplier, p.output_shift), -32768, 32767)


def _add_sub(sign: int):
    def convert(b: Builder, op: Operation) -> None:
        a, c = op.operands
        r = op.results[0]
        if not _requires(a, c, r):
            return qdq.CONVERT[op.opdef](b, op)
        g = Graph(b, op)
        prepare = qk.prepare_add if sign > 0 else qk.prepare_sub
        p = prepare(_scale(a), _scale(c), _scale(r), _zp(r), activation_of(op), storage=np.int16,
                    input_zero_points=(_zp(a), _zp(c)))
        if isinstance(p, AddPotParams):
            tables_ = [rounding_divide_by_pot(INT16_VALUES, int(s)) for s in (p.pot_input1_shift,
                                                                                   p.pot_input2_shift)]
        else:
            tables_ = [rescale_input(INT16_VALUES, 0, int(m), int(s), int(p.left_shift))
                       for m, s in ((p.input1_multiplier, p.input1_shift), (p.input2_multiplier, p.input2_shift))]
        terms = []
        for v, table, what in zip((a, c), tables_, ("rescale1", "rescale2")):
            t = g.const(_by_stored_value(np.asarray(table, np.int64)), f"{what}_table")
            terms.append(g.node("Gather", [t, _widen(g, v, I32)], I64, what=what, axis=0))
        total = g.binary("Add" if sign > 0 else "Sub", *terms)
        if isinstance(p, AddPotParams):
            # SaturatingAdd/Sub to int16, then the activation clamp (within int16): one clamp
            return _finish(g, total, p.act_min, p.act_max)
        _finish(g, mbqm(g, total, p.output_multiplier, p.output_shift), p.act_min, p.act_max)
    return convert


def _by_stored_value(values: np.ndarray) -> np.ndarray:
    """A table over every int16 value (ascending from -32768) laid out at ``value mod 65536``, so that
    Gather reads the stored integer as its index (a negative index counts from the end)."""
    return np.roll(values, -32768)


def mul(b: Builder, op: Operation) -> None:
    a, c = op.operands
    r = op.results[0]
    if not _requires(a, c, r):
        return qdq.CONVERT[op.opdef](b, op)
    g = Graph(b, op)
    p = qk.prepare_mul(_scale(a), _scale(c), _scale(r), _zp(r), activation_of(op), storage=np.int16,
                       input_zero_points=(_zp(a), _zp(c)))
    product = g.binary("Mul", _widen(g, a), _widen(g, c))
    _finish(g, mbqm(g, product, p.multiplier, p.shift), p.act_min, p.act_max)


def mean(b: Builder, op: Operation) -> None:
    """ReduceSum, then the 32-bit MBQM with 1/N folded into the multiplier as LiteRT's Prepare folds it
    (``numerics.mean_multiplier``); over a dynamic axis N is read at run time and the folding runs in
    the graph: ``k = min(floor(log2 N), 32, 31 + shift)``, ``M' = (M·2^k) // N``, ``shift' = shift - k``."""
    x, r = op.operands[0], op.results[0]
    shape = x.type.shape
    if not _requires(x, r) or shape is None:
        return qdq.CONVERT[op.opdef](b, op)
    axes = [int(a) % len(shape) for a in op.attr("axes")]
    g = Graph(b, op)
    total = g.node("ReduceSum", [_widen(g, x), g.i64(axes, "axes")], I64, what="sum",
                   keepdims=int(bool(op.attr("keepdims"))))
    if all(shape[a] is not None for a in axes):
        count = int(np.prod([shape[a] for a in axes]))
        p = qk.prepare_mean(_scale(x), _zp(x), _scale(r), _zp(r), count=count, storage=np.int16)
        return _finish(g, mbqm(g, total, p.multiplier, p.shift), -32768, 32767, int(p.output_offset))
    big_m, shift = quantize_multiplier(requantize_multiplier(_scale(x), _scale(r)))
    dims = g.node("Shape", [b.value(x)], I64, (len(shape),), what="dims")
    n = g.node("ReduceProd", [g.node("Gather", [dims, g.i64(axes, "reduced")], I64, what="reduced", axis=0)], I64,
               what="count", keepdims=0)
    powers = powers_of_two(g)
    log2_n = g.binary("Sub", bit_length(g, n), g.i64(1, "one"))
    k = g.node("Min", [log2_n, g.i64(min(32, 31 + int(shift)), "k_max")], I64, what="k")
    pow_k = g.node("Gather", [powers, k], I64, what="pow_k", axis=0)
    folded = g.binary("Div", g.binary("Mul", g.i64(int(big_m), "multiplier"), pow_k), n)
    folded_shift = g.binary("Sub", g.i64(int(shift), "shift"), k)
    left = g.node("Gather", [powers, g.node("Max", [folded_shift, g.i64(0, "zero")], I64, what="left")], I64,
                  what="pow_left", axis=0)
    right = g.node("Gather", [powers, g.node("Max", [g.node("Neg", [folded_shift], I64), g.i64(0, "zero")], I64,
                                             what="right")], I64, what="pow_right", axis=0)
    _finish(g, mbqm_values(g, total, folded, left, right), -32768, 32767)


def average_pool(b: Builder, op: Operation) -> None:
    x, r = op.operands[0], op.results[0]
    shape = x.type.shape
    if not _requires(x, r) or shape is None or len(shape) != 4 or shape[1] is None:
        return qdq.CONVERT[op.opdef](b, op)
    g = Graph(b, op)
    p = qk.prepare_average_pool(_scale(x), _zp(x), _scale(r), _zp(r), activation_of(op), storage=np.int16)
    attrs = pool_attributes(op)
    kernel = attrs.pop("kernel_shape")
    channels = int(shape[1])
    ones = g.const(np.ones((channels, 1, *kernel), np.int8), "ones")
    sums = planes_dot(g, _planes(b, x, op), "ConvInteger", ones, group=channels, **attrs)
    # the in-image taps of each window: the same windows over a one-channel image of ones
    dims = g.node("Shape", [b.value(x)], I64, (4,), what="dims")
    one_channel = g.binary("Mul", dims, g.i64([1, 0, 1, 1], "one_channel_mask"))
    one_channel = g.binary("Add", one_channel, g.i64([0, 1, 0, 0], "one_channel"))
    image = g.node("ConstantOfShape", [one_channel], U8, what="image",
                   value=onnx.helper.make_tensor("one", onnx.TensorProto.UINT8, [1], [1]))
    counts = g.cast(g.node("ConvInteger", [image, g.const(np.ones((1, 1, *kernel), np.uint8), "taps")], I32,
                           what="counts", **attrs), I64)
    half = g.binary("Div", counts, g.i64(2, "two"))
    nudged = g.binary("Add", sums, g.binary("Mul", g.node("Sign", [sums], I64), half))
    _finish(g, g.binary("Div", nudged, counts), p.act_min, p.act_max)


def softmax(b: Builder, op: Operation) -> None:
    x, r = op.operands[0], op.results[0]
    if not _requires(x, r):
        return qdq.CONVERT[op.opdef](b, op)
    g = Graph(b, op)
    p = qk.prepare_softmax(_scale(x), float(op.attr("beta")), _scale(r), _zp(r), storage=np.int16,
                           input_zero_point=_zp(x))
    q = _widen(g, x)
    row_max = g.node("ReduceMax", [q, g.i64([-1], "last")], I64, what="max", keepdims=1)
    diff = g.binary("Sub", q, row_max)                                           # [-65535, 0]
    # exp of every possible difference, as the kernel computes it (its MBQM, clip and LUT)
    diffs = np.arange(-65535, 1, dtype=np.int64)
    scaled = multiply_by_quantized_multiplier(diffs, p.input_multiplier, p.input_left_shift)
    exp_table = np.asarray(p.exp_values)[np.clip(scaled + 32767, -32768, 32767) + 32768].astype(np.int64)
    exps = g.node("Gather", [g.const(exp_table, "exp_table"), g.binary("Add", diff, g.i64(65535, "diff_offset"))],
                  I64, what="exp", axis=0)
    total = g.node("ReduceSum", [exps, g.i64([-1], "last")], I64, what="sum", keepdims=1)
    # CountLeadingZeros(total) of an int32 >= 1: 32 minus its bit length
    headroom = g.binary("Sub", g.i64(32, "word"), bit_length(g, total))
    pow2 = powers_of_two(g)
    at = lambda e, what: g.node("Gather", [pow2, e], I64, what=what, axis=0)   # noqa: E731
    shifted = g.binary("Mul", total, at(g.binary("Sub", headroom, g.i64(1, "one")), "headroom"))
    normalized = g.binary("Div", g.binary("Add", shifted, g.i64(1 << 13, "round13")), g.i64(1 << 14, "pot14"))
    # the reciprocal LUT at normalized − 3·2^15, clipped to int16, over normalized's range [2^16, 2^17]
    span = np.arange(1 << 16, (1 << 17) + 1, dtype=np.int64)
    recip_table = np.asarray(p.reciprocal_values)[np.clip(span - 3 * (1 << 15), -32768, 32767) + 32768]
    recip = g.node("Gather", [g.const(recip_table.astype(np.int64), "reciprocal_table"),
                              g.binary("Sub", normalized, g.i64(1 << 16, "span_offset"))], I64, what="reciprocal",
                   axis=0)
    right = g.binary("Sub", g.i64(31, "thirty_one"), headroom)
    out = g.binary("Div", g.binary("Add", g.binary("Mul", exps, recip),
                                   at(g.binary("Sub", right, g.i64(1, "one")), "round")), at(right, "pot"))
    _finish(g, out, 0, 32767)


def _widened_op(element, build):
    """An op ONNX Runtime has no int16 kernel for, on the int16 values widened exactly (Cast), cast back."""
    def convert(b: Builder, op: Operation) -> None:
        x, r = op.operands[0], op.results[0]
        if not _requires(x, r) or not same_params(x.type, r.type):
            return qdq.CONVERT[op.opdef](b, op)
        g = Graph(b, op)
        wide = g.cast(b.value(x), element)
        out = build(g, op, wide, r.type.clone(element_type=element))
        bounds = activation_range(op)   # a fused activation (MAX_POOL's) clamps the stored integers
        if bounds is not None:
            dtype = np.float32 if element == F32 else np.int32
            out = g.node("Clip", [out, g.const(dtype(bounds[0]), "lo"), g.const(dtype(bounds[1]), "hi")], element,
                         what="clamp")
        b.define(r, b.emit(nn.CAST, [out], r.type, name=r.name_hint, label=f"{g.label}/store", like=op,
                           to=storage_element_type(r.type)))
    return convert


def _max_pool(g: Graph, op: Operation, x: Value, t: TensorType) -> Value:
    return g.b.emit(nn.MAX_POOL, [x], t, name=f"{g.name}_pooled", label=g.label, like=op, **pool_attributes(op))


def _pad(g: Graph, op: Operation, x: Value, t: TensorType) -> Value:
    value = qtype(op.results[0].type).zero_point if op.attr("value") is None else op.attr("value")
    return g.b.emit(nn.PAD, [x], t, name=f"{g.name}_padded", label=g.label, like=op, pads=tuple(op.attr("pads")),
                    constant_value=float(value))


def _resize_nearest(g: Graph, op: Operation, x: Value, t: TensorType) -> Value:
    return qdq.nearest(g.b, op, x, t)


def transpose_conv(b: Builder, op: Operation) -> None:
    """TRANSPOSE_CONV 16x8. Kernel = stride, no crop (PP-OCR's upsampling): a 1x1 conv to C_out·s² phase
    channels, then DepthToSpace (on the int16 values as float: exact). Otherwise, as the int8 export
    does it: a stride-1 conv over the input stretched with s − 1 zero rows and columns per pixel,
    padded k − 1 − pad, kernel flipped; here on each 7-bit plane, the plane's zero point filling."""
    parts = _weighted(b, op)
    if parts is None:
        return
    x, w, bias, r, ints, bias_values = parts
    strides, adjust = [int(s) for s in op.attr("strides")], [int(a) for a in op.attr("adjust")]
    c_out, c_in = ints.shape[:2]
    kernel = [int(k) for k in ints.shape[2:]]
    g = Graph(b, op)
    p = prepare_transpose_conv(_scale(x), _scales(w), _scale(r), _zp(r), activation_of(op), channels=c_out,
                               storage=np.int16, input_zero_point=_zp(x))
    m = np.broadcast_to(np.asarray(p.multiplier).reshape(-1), (c_out,))
    sh = np.broadcast_to(np.asarray(p.shift).reshape(-1), (c_out,))
    # the kernel's accumulator follows the bias: an int32 one (the IR's) means the 32-bit MBQM
    wide_acc = not _int32_bias(b, bias)
    if kernel == strides and strides[0] == strides[1] and not any(adjust):
        s = strides[0]
        phases = ints.transpose(0, 2, 3, 1).reshape(c_out * s * s, c_in, 1, 1)
        acc = planes_dot(g, _planes(b, x, op), "ConvInteger", g.const(phases, "w_phases"))
        if bias_values is not None:
            acc = g.binary("Add", acc, g.i64(np.repeat(bias_values, s * s).reshape(-1, 1, 1), "bias"))
        clamped = _requantize(g, acc, np.repeat(m, s * s), np.repeat(sh, s * s), wide_acc, p)
        spread = g.node("DepthToSpace", [g.cast(clamped, F32)], F32, what="depth_to_space", blocksize=s, mode="CRD")
        b.define(r, b.emit(nn.CAST, [spread], r.type, name=r.name_hint, label=f"{g.label}/store", like=op,
                           to=storage_element_type(r.type)))
        return
    pl = _planes(b, x, op)
    stretched = Planes([_stretch(g, v, zp, strides, kernel, adjust) for v, zp in zip(pl.values, pl.zero_points)],
                       pl.zero_points)
    acc = planes_dot(g, stretched, "ConvInteger", g.const(np.ascontiguousarray(ints[:, :, ::-1, ::-1]), "w_flipped"))
    if bias_values is not None:
        acc = g.binary("Add", acc, g.i64(bias_values.reshape(-1, 1, 1), "bias"))
    clamped = _requantize(g, acc, m, sh, wide_acc, p)
    b.define(r, b.emit(nn.CAST, [clamped], r.type, name=r.name_hint, label=f"{g.label}/store", like=op,
                       to=storage_element_type(r.type)))


def _requantize(g: Graph, acc: Value, m: np.ndarray, sh: np.ndarray, wide_acc: bool, p) -> Value:
    """The per-channel requantization of a transposed conv's accumulator and its clamp (int64)."""
    mv, sv = channel_view(m, 4, 1), channel_view(sh, 4, 1)
    scaled = mbqm64(g, acc, mv, sv) if wide_acc else mbqm(g, acc, mv, sv)
    return g.node("Clip", [scaled, g.i64(p.act_min, "lo"), g.i64(p.act_max, "hi")], I64, what="clamp")


def _stretch(g: Graph, v: Value, zp: int, strides: list[int], kernel: list[int], adjust: list[int]) -> Value:
    """One uint8 plane ``[N, C, H, W]`` stretched (s − 1 zero-point rows / columns after each pixel) and
    padded for the stride-1 conv that computes the transposed one (qoperator.transpose_conv's geometry)."""
    fill = g.const(np.uint8(zp), "plane_zero_point")
    sh, sw = strides
    q = v
    if sh > 1 or sw > 1:
        q = g.node("Unsqueeze", [q, g.i64([3, 5], "spread_axes")], U8, what="spread")
        q = g.node("Pad", [q, g.i64([0, 0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1], "zeros_pads"), fill], U8,
                   what="zeros")
        target = g.binary("Mul", g.node("Shape", [v], I64, (4,), what="dims"), g.i64([1, 1, sh, sw], "strides"))
        q = g.node("Reshape", [q, target], U8, what="stretched")
    begin = [max(-a, 0) // 2 for a in adjust]
    before = [k - 1 - p for k, p in zip(kernel, begin)]
    after = [k + a + p - s for k, a, p, s in zip(kernel, adjust, begin, strides)]
    if any(before) or any(after):
        q = g.node("Pad", [q, g.i64([0, 0, *before, 0, 0, *after], "pads"), fill], U8, what="padded")
    return q


def concat(b: Builder, op: Operation) -> None:
    """Concat on int16 when every input shares the result's parameters (what the 16x8 quantizer gives
    a concat); otherwise the QDQ form."""
    r = op.results[0]
    if not all(_is_int16(v) and same_params(v.type, r.type) for v in op.operands):
        return qdq.CONVERT[op.opdef](b, op)
    b.define(r, b.emit(nn.CONCAT, [b.value(v) for v in op.operands], r.type, name=r.name_hint, label=op.label,
                       like=op, axis=int(op.attr("axis"))))


CONVERT: dict = {
    qnn.CONV: conv,
    qnn.FULLY_CONNECTED: fully_connected,
    qnn.BATCH_MATMUL: batch_matmul,
    qnn.TRANSPOSE_CONV: transpose_conv,
    qnn.ADD: _add_sub(1),
    qnn.SUB: _add_sub(-1),
    qnn.MUL: mul,
    qnn.MEAN: mean,
    qnn.AVERAGE_POOL: average_pool,
    qnn.SOFTMAX: softmax,
    qnn.CONCAT: concat,
    qnn.MAX_POOL: _widened_op(F32, _max_pool),
    qnn.PAD: _widened_op(I32, _pad),
    qnn.RESIZE_NEAREST: _widened_op(I32, _resize_nearest),
}
