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
conv (16x8)            the int16 input split into bytes, x = 256·hi + lo (hi int8, lo uint8),
                       two ConvInteger (int8 weights), 256·hi + lo + int64 bias, then the
                       64-bit MBQM per channel (``_mbqm64``) and the clamp; depthwise: group
fully_connected        the same split, two MatMulInteger, the bias, then the reference kernel's
                       double-precision rounding: round-half-away(double(acc)·scale[c])
transpose_conv         kernel = stride: a 1x1 conv to C_out·s² phase channels, then
                       DepthToSpace (on the int16 values as float: exact); else the QDQ form
batch_matmul (16x16)   both operands split: four MatMulInteger, then the 64-bit MBQM
add / sub              each input's rescale is a function of its int16 value: a 65,536-entry
                       int32 table (Gather), then the sum and the 32-bit MBQM (or, with
                       power-of-two scales, the saturating add LiteRT runs)
mul                    the int64 product and the 32-bit MBQM
unary elementwise      a 65,536-entry table of quantir's own kernel (``tables.lookup``)
mean                   ReduceSum, then the 32-bit MBQM
average_pool           the window sums as a depthwise ConvInteger of ones (bytes split), the
                       in-image tap counts the same way on a tensor of ones, then the division
                       rounded half away from zero (Sign, Div)
softmax                LiteRT's SoftmaxInt16: exp of (x - max) from a table, ReduceSum, the
                       leading-zero count by comparisons, the reciprocal from a table, shifts
max_pool, pad,         the same op on the int16 values widened (Cast to float or int32, exact;
resize_nearest         ONNX Runtime has no int16 MaxPool, Pad or Resize), cast back
concat, data movement  the same op on int16
=====================  =========================================================================

The 32-bit MBQM (``_mbqm``) is gemmlowp's ``RDBPOT(SRDHM(x·2^left, M), right)`` written with
Mul, Add, Mod (floored: fmod=0) and Div, the rounding corrections with Less/Greater and Cast; the
64-bit one (``_mbqm64``) is ``floor((x·M16 + 2^(t-1)) / 2^t)``. Every intermediate fits int64 in the
domains the kernels accept. Anything else on int16 keeps its QDQ form, named in the save's warning.
This is exact, not fast: ONNX Runtime runs each step as its own kernel (bench/real_models.py measures
the latency); the QDQ export stays the fast form.
"""
from __future__ import annotations

import base64

import numpy as np
import onnx

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...numerics import quantize_multiplier, requantize_multiplier, rounding_divide_by_pot
from ...runtime import qkernels as qk
from ...runtime.qkernels._common import multiply_by_quantized_multiplier
from ...runtime.qkernels.add import INT16_VALUES, AddPotParams, rescale_input
from ...runtime.qkernels.transpose_conv import prepare_transpose_conv
from ...types import FloatType, IntegerType, TensorType, UniformQuantizedPerAxisType
from . import qdq, tables
from .builder import Builder, activation_of, base_name, constant_array, qtype, same_params

__all__ = ["CONVERT", "is_16_bit_table_op"]

I64, I32, I8, U8, I1 = IntegerType(64), IntegerType(32), IntegerType(8), IntegerType(8, "unsigned"), IntegerType(1)
F32 = FloatType("f32")
F64 = FloatType("f64")
_ONNX = {I64: onnx.TensorProto.INT64, I32: onnx.TensorProto.INT32, I8: onnx.TensorProto.INT8,
         U8: onnx.TensorProto.UINT8, F32: onnx.TensorProto.FLOAT, F64: onnx.TensorProto.DOUBLE}


# -- emitting ONNX integer ops ----------------------------------------------------------------------

class _Graph:
    """ONNX nodes standing for one qnn op, named ``<result>_<what><k>`` and labelled ``<op>/<what>``."""

    def __init__(self, b: Builder, op: Operation, name: str | None = None):
        self.b, self.op = b, op
        r = op.results[0]
        self.name = name or base_name(r)
        self.label = op.label or base_name(r)
        self.count = 0

    def node(self, op_type: str, inputs: list[Value | None], element, shape=None, *, what: str = "", **attrs) -> Value:
        self.count += 1
        what = what or op_type.lower()
        node = onnx.helper.make_node(op_type, [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)],
                                     ["y"], **attrs)
        t = element if isinstance(element, TensorType) else TensorType(shape, element)
        return self.b.emit(nn.ONNX_OP, [v for v in inputs if v is not None], t,
                           name=f"{self.name}_{what}{self.count}", label=f"{self.label}/{what}", like=self.op,
                           op_type=op_type, domain="", opset=self.b.opset,
                           node=base64.b64encode(node.SerializeToString()).decode("ascii"))

    def const(self, array, what: str) -> Value:
        return self.b.const(np.asarray(array), f"{self.name}_{what}")

    def i64(self, array, what: str) -> Value:
        return self.const(np.asarray(array, np.int64), what)

    def cast(self, v: Value, element, shape=None) -> Value:
        return self.node("Cast", [v], element, shape, what="cast", to=_ONNX[element])

    def binary(self, op_type: str, a: Value, c: Value, element=I64, shape=None) -> Value:
        return self.node(op_type, [a, c], element, shape, what=op_type.lower())

    def floor_div(self, x: Value, d: Value) -> tuple[Value, Value]:
        """``(floor(x / d), x mod d)`` for int64 ``x`` and positive ``d`` (Mod with fmod=0 takes the
        divisor's sign, so ``x - rem`` is a multiple of ``d`` and Div's truncation is exact)."""
        rem = self.node("Mod", [x, d], I64, what="mod", fmod=0)
        return self.binary("Div", self.binary("Sub", x, rem), d), rem

    def floor_pot(self, x: Value, exponent, bits: int, add=0) -> Value:
        """``floor((x + add) / 2^e)`` for ``|x + add| < 2^bits`` (``e <= bits <= 62``, ``add`` constant):
        Div truncates toward zero, so the dividend is first moved up by ``2^bits`` (a multiple of every
        ``2^e``, and positive after it), and ``2^(bits - e)`` taken off the quotient. (Div on int64 is
        one of ONNX Runtime's slower kernels; this needs no Mod, as ``floor_div`` does.)"""
        e = np.asarray(exponent, np.int64)
        shifted = self.binary("Add", x, self.i64(np.asarray(add, np.int64) + (1 << bits), "offset"))
        q = self.binary("Div", shifted, self.i64(np.left_shift(np.int64(1), e), "pot"))
        return self.binary("Sub", q, self.i64(np.left_shift(np.int64(1), bits - e), "offset_quotient"))


def _channel_view(values, rank: int, axis: int) -> np.ndarray:
    """A per-channel parameter shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    a = np.asarray(values, np.int64).reshape(-1)
    if a.size == 1 or rank == 0:
        return a.reshape(())
    view = [1] * (rank - axis % rank)
    view[0] = -1
    return a.reshape(view)


def _rdbpot(g: _Graph, x: Value, right) -> Value:
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2^right`` rounded half away from zero, for ``|x| <= 2^31``.
    That is ``floor((x + 2^(e-1) - [x < 0]) / 2^e)`` where ``e > 0`` (gemmlowp's ``(x >> e) + (rem >
    threshold)``, ``threshold = 2^(e-1) - 1 + [x < 0]``), and ``x`` where ``e = 0``. ``right`` is an
    array of exponents, or a Value holding ``2^right`` (a MEAN's, computed at run time)."""
    if isinstance(right, Value):
        negative = g.cast(g.binary("Less", x, g.i64(0, "zero"), I1), I64)
        divisor = right
        threshold = g.binary("Div", g.binary("Sub", divisor, g.i64(1, "one")), g.i64(2, "two"))
        q, rem = g.floor_div(x, divisor)
        up = g.binary("Greater", rem, g.binary("Add", threshold, negative), I1)
        return g.binary("Add", q, g.cast(up, I64))
    right = np.asarray(right, np.int64)
    if not right.any():
        return x
    negative = g.cast(g.binary("Less", x, g.i64(0, "zero"), I1), I64)
    if not right.all():   # per channel, some exponents 0: no nudge there
        negative = g.binary("Mul", negative, g.i64((right > 0).astype(np.int64), "shifted"))
    half = np.where(right > 0, np.left_shift(np.int64(1), np.maximum(right - 1, 0)), 0)
    return g.floor_pot(g.binary("Sub", x, negative), right, 40, add=half)


def _mbqm(g: _Graph, x: Value, multiplier, shift) -> Value:
    """LiteRT's 32-bit ``MultiplyByQuantizedMultiplier`` (the double-rounding build): SRDHM of
    ``x·2^left`` by M (``floor((a·M + 2^30) / 2^31)``; M >= 0 rules out its one saturating case),
    then ``RoundingDivideByPOT`` by ``right``."""
    shift = np.asarray(shift, np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    return _mbqm_values(g, x, g.i64(multiplier, "multiplier"),
                        g.i64(np.left_shift(np.int64(1), left), "left") if left.any() else None, right)


def _mbqm_values(g: _Graph, x: Value, multiplier: Value, left: Value | None, right) -> Value:
    """``_mbqm`` with the multiplier and ``2^left`` as Values (``right``: as ``_rdbpot`` takes it).
    ``|x·2^left| < 2^31`` and ``M < 2^31`` (LiteRT's domain): ``|a·M + 2^30| < 2^62``."""
    if left is not None:
        x = g.binary("Mul", x, left)
    high = g.floor_pot(g.binary("Mul", x, multiplier), np.int64(31), 62, add=1 << 30)
    return _rdbpot(g, high, right)


def _mbqm64(g: _Graph, x: Value, multiplier, shift) -> Value:
    """LiteRT's 64-bit ``MultiplyByQuantizedMultiplier`` (16x8 accumulators): the multiplier rounded
    to 15 bits, one rounding half up: ``floor((x·M16 + 2^(t-1)) / 2^t)`` with ``t = 15 - shift``."""
    m = np.asarray(multiplier, np.int64)
    m16 = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, np.int64)
    # |x| < 2^47 and M16 < 2^15: |x·M16 + 2^(t-1)| < 2^62
    return g.floor_pot(g.binary("Mul", x, g.i64(m16, "multiplier16")), total, 62,
                       add=np.left_shift(np.int64(1), total - 1))


def _finish(g: _Graph, x: Value, lo: int, hi: int, zero_point: int = 0) -> None:
    """``clamp(x + zp, lo, hi)`` stored in the result's type; the result becomes it."""
    r = g.op.results[0]
    if zero_point:
        x = g.binary("Add", x, g.i64(zero_point, "zero_point"))
    x = g.node("Clip", [x, g.i64(lo, "lo"), g.i64(hi, "hi")], I64, what="clamp")
    g.b.define(r, g.b.emit(nn.CAST, [x], r.type, name=r.name_hint, label=f"{g.label}/store", like=g.op,
                           to=qtype(r.type).storage_type))


def _widen(g: _Graph, v: Value, element=I64) -> Value:
    return g.cast(g.b.value(v), element)


def _bytes(b: Builder, v: Value, op: Operation) -> tuple[Value, Value]:
    """An int16 value as two byte planes, ``v = 256·hi + lo`` (hi int8, lo uint8), made once per value."""
    cache = b.__dict__.setdefault("_sixteen_bytes", {})
    if v not in cache:
        g = _Graph(b, op, name=f"{base_name(v)}_bytes")
        wide = _widen(g, v, I32)
        lo = g.node("Mod", [wide, g.const(np.int32(256), "256")], I32, what="low", fmod=0)
        hi = g.node("Div", [g.binary("Sub", wide, lo, I32), g.const(np.int32(256), "256")], I32, what="high")
        cache[v] = (g.cast(hi, I8), g.cast(lo, U8))
    return cache[v]


def _split_sum(g: _Graph, high: Value, low: Value, scale: int = 256) -> Value:
    """``scale·high + low`` in int64, from two int32 partial results."""
    return g.binary("Add", g.binary("Mul", g.cast(high, I64), g.i64(scale, "byte")), g.cast(low, I64))


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

def _requires(op: Operation, *values: Value) -> bool:
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


def conv(b: Builder, op: Operation) -> None:
    x, w, *bias = op.operands
    r = op.results[0]
    ints, bias_values = _weights(b, w), _bias(b, bias)
    if not _requires(op, x, r) or ints is None or (bias and bias_values is None):
        return qdq.CONVERT[op.opdef](b, op)
    g = _Graph(b, op)
    p = qk.prepare_conv2d(_scale(x), _scales(w), _scale(r), _zp(r), activation_of(op), channels=ints.shape[0],
                          storage=np.int16, input_zero_point=_zp(x))
    hi, lo = _bytes(b, x, op)
    attrs = {k: op.attr(k) for k in ("strides", "pads", "dilations", "group", "auto_pad") if op.attr(k) is not None}
    weights = g.const(ints, "w")
    acc = _split_sum(g, g.node("ConvInteger", [hi, weights], I32, what="conv_high", **attrs),
                     g.node("ConvInteger", [lo, weights], I32, what="conv_low", **attrs))
    if bias_values is not None:
        acc = g.binary("Add", acc, g.i64(bias_values.reshape(-1, 1, 1), "bias"))
    _finish(g, _mbqm64(g, acc, _channel_view(p.multiplier, 4, 1), _channel_view(p.shift, 4, 1)),
            p.act_min, p.act_max)


def fully_connected(b: Builder, op: Operation) -> None:
    x, w, *bias = op.operands
    r = op.results[0]
    ints, bias_values = _weights(b, w), _bias(b, bias)
    if not _requires(op, x, r) or ints is None or (bias and bias_values is None):
        return qdq.CONVERT[op.opdef](b, op)
    g = _Graph(b, op)
    per_axis = isinstance(qtype(w.type), UniformQuantizedPerAxisType)
    stored_bias = constant_array(b.value(bias[0])) if bias else None
    p = qk.prepare_fully_connected(
        _scale(x), _scales(w) if per_axis else _scales(w)[0], _scale(r), _zp(r), activation_of(op),
        channels=ints.shape[0], storage=np.int16, input_zero_point=_zp(x),
        bias_type="int32" if stored_bias is not None and np.asarray(stored_bias).dtype == np.int32 else "int64")
    hi, lo = _bytes(b, x, op)
    weights = g.const(np.ascontiguousarray(ints.T), "w_t")
    acc = _split_sum(g, g.node("MatMulInteger", [hi, weights], I32, what="matmul_high"),
                     g.node("MatMulInteger", [lo, weights], I32, what="matmul_low"))
    if bias_values is not None:
        acc = g.binary("Add", acc, g.i64(bias_values, "bias"))
    # BUILTIN_REF's 16x8 FULLY_CONNECTED rounds in double: round-half-away(double(acc)·scale[c])
    scaled = g.binary("Mul", g.cast(acc, F64),
                      g.const(np.broadcast_to(np.asarray(p.effective_scale, np.float64).reshape(-1),
                                              (ints.shape[0],)).copy(), "scale"), F64)
    _finish(g, _round_half_away(g, scaled), p.act_min, p.act_max, int(p.output_zero_point))


def _round_half_away(g: _Graph, a: Value) -> Value:
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
    if not _requires(op, a, c, r):
        return qdq.CONVERT[op.opdef](b, op)
    g = _Graph(b, op)
    p = qk.prepare_batch_matmul(_scale(a), _scale(c), _scale(r), _zp(r))
    planes = []
    for v, adj in ((a, op.attr("adj_x")), (c, op.attr("adj_y"))):
        hi, lo = _bytes(b, v, op)
        if adj:
            n = v.type.rank
            perm = (*range(n - 2), n - 1, n - 2)
            hi, lo = (g.node("Transpose", [t], t.type.element_type, what="adj", perm=perm) for t in (hi, lo))
        planes.append((hi, lo))
    (ah, al), (ch, cl) = planes
    mm = lambda u, v, what: g.cast(g.node("MatMulInteger", [u, v], I32, what=what), I64)   # noqa: E731
    high = g.binary("Add", mm(ah, cl, "matmul_hl"), mm(al, ch, "matmul_lh"))
    acc = g.binary("Add", g.binary("Add", g.binary("Mul", mm(ah, ch, "matmul_hh"), g.i64(65536, "word")),
                                   g.binary("Mul", high, g.i64(256, "byte"))), mm(al, cl, "matmul_ll"))
    _finish(g, _mbqm64(g, acc, p.output_multiplier, p.output_shift), -32768, 32767)


def _add_sub(sign: int):
    def convert(b: Builder, op: Operation) -> None:
        a, c = op.operands
        r = op.results[0]
        if not _requires(op, a, c, r):
            return qdq.CONVERT[op.opdef](b, op)
        g = _Graph(b, op)
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
        _finish(g, _mbqm(g, total, p.output_multiplier, p.output_shift), p.act_min, p.act_max)
    return convert


def _by_stored_value(values: np.ndarray) -> np.ndarray:
    """A table over every int16 value (ascending from -32768) laid out at ``value mod 65536``, so that
    Gather reads the stored integer as its index (a negative index counts from the end)."""
    return np.roll(values, -32768)


def mul(b: Builder, op: Operation) -> None:
    a, c = op.operands
    r = op.results[0]
    if not _requires(op, a, c, r):
        return qdq.CONVERT[op.opdef](b, op)
    g = _Graph(b, op)
    p = qk.prepare_mul(_scale(a), _scale(c), _scale(r), _zp(r), activation_of(op), storage=np.int16,
                       input_zero_points=(_zp(a), _zp(c)))
    product = g.binary("Mul", _widen(g, a), _widen(g, c))
    _finish(g, _mbqm(g, product, p.multiplier, p.shift), p.act_min, p.act_max)


def mean(b: Builder, op: Operation) -> None:
    """ReduceSum, then the 32-bit MBQM with 1/N folded into the multiplier as LiteRT's Prepare folds it
    (``numerics.mean_multiplier``); over a dynamic axis N is read at run time and the folding runs in
    the graph: ``k = min(floor(log2 N), 32, 31 + shift)``, ``M' = (M·2^k) // N``, ``shift' = shift - k``."""
    x, r = op.operands[0], op.results[0]
    shape = x.type.shape
    if not _requires(op, x, r) or shape is None:
        return qdq.CONVERT[op.opdef](b, op)
    axes = [int(a) % len(shape) for a in op.attr("axes")]
    g = _Graph(b, op)
    total = g.node("ReduceSum", [_widen(g, x), g.i64(axes, "axes")], I64, what="sum",
                   keepdims=int(bool(op.attr("keepdims"))))
    if all(shape[a] is not None for a in axes):
        count = int(np.prod([shape[a] for a in axes]))
        p = qk.prepare_mean(_scale(x), _zp(x), _scale(r), _zp(r), count=count, storage=np.int16)
        return _finish(g, _mbqm(g, total, p.multiplier, p.shift), -32768, 32767, int(p.output_offset))
    big_m, shift = quantize_multiplier(requantize_multiplier(_scale(x), _scale(r)))
    dims = g.node("Shape", [b.value(x)], I64, (len(shape),), what="dims")
    n = g.node("ReduceProd", [g.node("Gather", [dims, g.i64(axes, "reduced")], I64, what="reduced", axis=0)], I64,
               what="count", keepdims=0)
    powers = g.i64(np.left_shift(np.int64(1), np.arange(63, dtype=np.int64)), "pow2")
    log2_n = g.binary("Sub", g.node("ReduceSum", [g.cast(g.binary("GreaterOrEqual", g.node(
        "Unsqueeze", [n, g.i64([0], "first")], I64, what="column"), powers, I1), I64)], I64, what="bits",
        keepdims=0), g.i64(1, "one"))
    k = g.node("Min", [log2_n, g.i64(min(32, 31 + int(shift)), "k_max")], I64, what="k")
    pow_k = g.node("Gather", [powers, k], I64, what="pow_k", axis=0)
    folded = g.binary("Div", g.binary("Mul", g.i64(int(big_m), "multiplier"), pow_k), n)
    folded_shift = g.binary("Sub", g.i64(int(shift), "shift"), k)
    left = g.node("Gather", [powers, g.node("Max", [folded_shift, g.i64(0, "zero")], I64, what="left")], I64,
                  what="pow_left", axis=0)
    right = g.node("Gather", [powers, g.node("Max", [g.node("Neg", [folded_shift], I64), g.i64(0, "zero")], I64,
                                             what="right")], I64, what="pow_right", axis=0)
    _finish(g, _mbqm_values(g, total, folded, left, right), -32768, 32767)


def average_pool(b: Builder, op: Operation) -> None:
    x, r = op.operands[0], op.results[0]
    shape = x.type.shape
    if not _requires(op, x, r) or shape is None or len(shape) != 4 or shape[1] is None:
        return qdq.CONVERT[op.opdef](b, op)
    g = _Graph(b, op)
    p = qk.prepare_average_pool(_scale(x), _zp(x), _scale(r), _zp(r), activation_of(op), storage=np.int16)
    attrs = _pool_attributes(op)
    kernel = attrs.pop("kernel_shape")
    channels = int(shape[1])
    ones = g.const(np.ones((channels, 1, *kernel), np.int8), "ones")
    hi, lo = _bytes(b, x, op)
    sums = _split_sum(g, g.node("ConvInteger", [hi, ones], I32, what="sum_high", group=channels, **attrs),
                      g.node("ConvInteger", [lo, ones], I32, what="sum_low", group=channels, **attrs))
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
    if not _requires(op, x, r):
        return qdq.CONVERT[op.opdef](b, op)
    g = _Graph(b, op)
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
    # CountLeadingZeros(total) of an int32 >= 1: 32 minus its bit length, the powers of two it reaches
    powers = g.i64(np.left_shift(np.int64(1), np.arange(32, dtype=np.int64)), "powers")
    reached = g.binary("GreaterOrEqual", g.node("Unsqueeze", [total, g.i64([-1], "last")], I64, what="column"),
                       powers, I1)
    bits = g.node("ReduceSum", [g.cast(reached, I64), g.i64([-1], "last")], I64, what="bits", keepdims=0)
    headroom = g.binary("Sub", g.i64(32, "word"), bits)
    pow2 = g.i64(np.left_shift(np.int64(1), np.arange(63, dtype=np.int64)), "pow2")
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
        if not _requires(op, x, r) or not same_params(x.type, r.type):
            return qdq.CONVERT[op.opdef](b, op)
        g = _Graph(b, op)
        wide = g.cast(b.value(x), element)
        out = build(g, op, wide, r.type.clone(element_type=element))
        b.define(r, b.emit(nn.CAST, [out], r.type, name=r.name_hint, label=f"{g.label}/store", like=op,
                           to=qtype(r.type).storage_type))
    return convert


def _pool_attributes(op: Operation) -> dict:
    kernel = tuple(op.attr("kernel_shape"))
    pads = ({"auto_pad": op.attr("auto_pad")} if op.attr("auto_pad") else
            {"pads": tuple(op.attr("pads") or (0,) * (2 * len(kernel)))})
    return {"kernel_shape": kernel, "strides": tuple(op.attr("strides") or (1,) * len(kernel)), **pads}


def _max_pool(g: _Graph, op: Operation, x: Value, t: TensorType) -> Value:
    return g.b.emit(nn.MAX_POOL, [x], t, name=f"{g.name}_pooled", label=g.label, like=op, **_pool_attributes(op))


def _pad(g: _Graph, op: Operation, x: Value, t: TensorType) -> Value:
    value = qtype(op.results[0].type).zero_point if op.attr("value") is None else op.attr("value")
    return g.b.emit(nn.PAD, [x], t, name=f"{g.name}_padded", label=g.label, like=op, pads=tuple(op.attr("pads")),
                    constant_value=float(value))


def _resize_nearest(g: _Graph, op: Operation, x: Value, t: TensorType) -> Value:
    return qdq.nearest(g.b, op, x, t)


def transpose_conv(b: Builder, op: Operation) -> None:
    """kernel = stride, no crop (PP-OCR's upsampling): a 1x1 16x8 conv to C_out·s² phase channels
    (``conv`` above, per-phase parameters), then DepthToSpace on the int16 values as float (exact)."""
    x, w, *bias = op.operands
    r = op.results[0]
    ints, bias_values = _weights(b, w), _bias(b, bias)
    strides, adjust = [int(s) for s in op.attr("strides")], [int(a) for a in op.attr("adjust")]
    if (not _requires(op, x, r) or ints is None or (bias and bias_values is None) or x.type.shape is None
            or tuple(ints.shape[2:]) != tuple(strides) or strides[0] != strides[1] or any(adjust)):
        return qdq.CONVERT[op.opdef](b, op)
    s = strides[0]
    c_out, c_in = ints.shape[:2]
    g = _Graph(b, op)
    p = prepare_transpose_conv(_scale(x), _scales(w), _scale(r), _zp(r), activation_of(op), channels=c_out,
                                  storage=np.int16, input_zero_point=_zp(x))
    phases = ints.transpose(0, 2, 3, 1).reshape(c_out * s * s, c_in, 1, 1)
    hi, lo = _bytes(b, x, op)
    weights = g.const(phases, "w_phases")
    acc = _split_sum(g, g.node("ConvInteger", [hi, weights], I32, what="conv_high"),
                     g.node("ConvInteger", [lo, weights], I32, what="conv_low"))
    if bias_values is not None:
        acc = g.binary("Add", acc, g.i64(np.repeat(bias_values, s * s).reshape(-1, 1, 1), "bias"))
    m = np.repeat(np.broadcast_to(np.asarray(p.multiplier).reshape(-1), (c_out,)), s * s)
    sh = np.repeat(np.broadcast_to(np.asarray(p.shift).reshape(-1), (c_out,)), s * s)
    bias_is_32 = bias and np.asarray(constant_array(b.value(bias[0]))).dtype == np.int32
    scaled = (_mbqm(g, acc, _channel_view(m, 4, 1), _channel_view(sh, 4, 1)) if bias_is_32
              else _mbqm64(g, acc, _channel_view(m, 4, 1), _channel_view(sh, 4, 1)))
    clamped = g.node("Clip", [scaled, g.i64(p.act_min, "lo"), g.i64(p.act_max, "hi")], I64, what="clamp")
    spread = g.node("DepthToSpace", [g.cast(clamped, F32)], F32, what="depth_to_space", blocksize=s, mode="CRD")
    b.define(r, b.emit(nn.CAST, [spread], r.type, name=r.name_hint, label=f"{g.label}/store", like=op,
                       to=qtype(r.type).storage_type))


def concat(b: Builder, op: Operation) -> None:
    """Concat on int16 when every input shares the result's parameters (what the 16x8 quantizer gives
    a concat); otherwise the QDQ form."""
    r = op.results[0]
    if not all(_is_int16(v) and same_params(v.type, r.type) for v in op.operands):
        return qdq.CONVERT[op.opdef](b, op)
    b.define(r, b.emit(nn.CONCAT, [b.value(v) for v in op.operands], r.type, name=r.name_hint, label=op.label,
                       like=op, axis=int(op.attr("axis"))))


def is_16_bit_table_op(opdef) -> bool:
    """An elementwise op whose 16-bit form is a 65,536-entry table (``tables.lookup``)."""
    return tables.is_unary_elementwise(opdef)


def _table_lookup(b: Builder, op: Operation) -> None:
    tables.lookup(b, op)


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
