"""LiteRT's fixed-point arithmetic written as ONNX integer ops (what ``sixteen.py`` and ``lstm.py`` build).

The helpers take a graph ``g`` with two methods, ``node`` (one ONNX node) and ``const`` (one
initializer); ``Graph`` emits them into the export through the ``Builder``, ``Subgraph`` into a
GraphProto of its own (a Scan body). Everything else is shared:

- ``floor_pot``: ``floor((x + add) / 2^e)`` as one int64 Div of a dividend moved up by ``2^bits``
  (positive, and a multiple of ``2^e``), then ``2^(bits-e)`` taken off; ``floor_div`` with Mod
  (floored, fmod=0) where the divisor is only known at run time;
- ``rdbpot``: gemmlowp's ``RoundingDivideByPOT`` (half away from zero);
- ``mbqm``: LiteRT's 32-bit ``MultiplyByQuantizedMultiplier`` (double rounding: SRDHM, then
  ``rdbpot``); ``mbqm64``: its 64-bit form (a 15-bit multiplier, one rounding half up).

Each is equal to its ``quantir.numerics`` counterpart on the domain LiteRT's kernels accept
(tests/backends/onnx/test_qoperator_16bit.py compares them on edge values).
"""
from __future__ import annotations

import base64

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...ir import Operation, Value
from ...ir.dialects import nn
from ...types import FloatType, IntegerType, TensorType
from .builder import Builder, base_name

__all__ = ["Graph", "Subgraph", "Planes", "planes", "planes_dot", "weighted_sum", "powers_of_two", "bit_length",
           "I64", "I32", "I16", "I8", "U8", "I1", "F32", "F64", "rdbpot", "mbqm", "mbqm_values", "mbqm64",
           "channel_view"]

I64, I32, I16, I8 = IntegerType(64), IntegerType(32), IntegerType(16), IntegerType(8)
U8, I1 = IntegerType(8, "unsigned"), IntegerType(1)
F32 = FloatType("f32")
F64 = FloatType("f64")
_ONNX = {I64: onnx.TensorProto.INT64, I32: onnx.TensorProto.INT32, I16: onnx.TensorProto.INT16,
         I8: onnx.TensorProto.INT8, U8: onnx.TensorProto.UINT8, F32: onnx.TensorProto.FLOAT,
         F64: onnx.TensorProto.DOUBLE}


# -- emitting ONNX integer ops ----------------------------------------------------------------------

class _Arith:
    """The arithmetic shared by ``Graph`` and ``Subgraph`` (which give ``node`` and ``const``)."""

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


class Graph(_Arith):
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


class Subgraph(_Arith):
    """Nodes and initializers of a GraphProto of their own (a Scan body), named ``<prefix><k>``."""

    def __init__(self, prefix: str, opset: int):
        self.prefix, self.opset = prefix, opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.count = 0

    def _name(self, what: str) -> str:
        self.count += 1
        return f"{self.prefix}{what}{self.count}"

    def node(self, op_type: str, inputs: list, element=None, shape=None, *, what: str = "", **attrs) -> str:
        out = self._name(what or op_type.lower())
        self.nodes.append(helper.make_node(op_type, [v or "" for v in inputs], [out], **attrs))
        return out

    def const(self, array, what: str) -> str:
        name = self._name(what)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def graph(self, name: str, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto]
              ) -> onnx.GraphProto:
        return helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)


def channel_view(values, rank: int, axis: int) -> np.ndarray:
    """A per-channel parameter shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    a = np.asarray(values, np.int64).reshape(-1)
    if a.size == 1 or rank == 0:
        return a.reshape(())
    view = [1] * (rank - axis % rank)
    view[0] = -1
    return a.reshape(view)


def rdbpot(g, x: Value, right) -> Value:
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


def mbqm(g, x: Value, multiplier, shift) -> Value:
    """LiteRT's 32-bit ``MultiplyByQuantizedMultiplier`` (the double-rounding build): SRDHM of
    ``x·2^left`` by M (``floor((a·M + 2^30) / 2^31)``; M >= 0 rules out its one saturating case),
    then ``RoundingDivideByPOT`` by ``right``."""
    shift = np.asarray(shift, np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    return mbqm_values(g, x, g.i64(multiplier, "multiplier"),
                        g.i64(np.left_shift(np.int64(1), left), "left") if left.any() else None, right)


def mbqm_values(g, x: Value, multiplier: Value, left: Value | None, right) -> Value:
    """``mbqm`` with the multiplier and ``2^left`` as Values (``right``: as ``rdbpot`` takes it).
    ``|x·2^left| < 2^31`` and ``M < 2^31`` (LiteRT's domain): ``|a·M + 2^30| < 2^62``."""
    if left is not None:
        x = g.binary("Mul", x, left)
    high = g.floor_pot(g.binary("Mul", x, multiplier), np.int64(31), 62, add=1 << 30)
    return rdbpot(g, high, right)


def mbqm64(g, x: Value, multiplier, shift) -> Value:
    """LiteRT's 64-bit ``MultiplyByQuantizedMultiplier`` (16x8 accumulators): the multiplier rounded
    to 15 bits, one rounding half up: ``floor((x·M16 + 2^(t-1)) / 2^t)`` with ``t = 15 - shift``."""
    m = np.asarray(multiplier, np.int64)
    m16 = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, np.int64)
    # |x| < 2^47 and M16 < 2^15: |x·M16 + 2^(t-1)| < 2^62
    return g.floor_pot(g.binary("Mul", x, g.i64(m16, "multiplier16")), total, 62,
                       add=np.left_shift(np.int64(1), total - 1))


# -- integer products on 7-bit planes ---------------------------------------------------------------

class Planes:
    """A signed integer tensor ``v`` as unsigned 7-bit planes: ``v + offset = Σ_k 2^(7k)·p_k`` with every
    ``p_k`` in [0, 127] (uint8), and ``offset = Σ_k 2^(7k)·zp_k``, so ``v = Σ_k 2^(7k)·(p_k - zp_k)``.

    Why 7 bits, not bytes: ONNX Runtime's u8 x s8 integer GEMM (ConvInteger, MatMulInteger) runs on
    x86 CPUs without VNNI as ``vpmaddubsw``, which saturates the sum of two adjacent products to
    int16. With operands of at most 127 in magnitude, no pair sum reaches it (``2·127·127 < 2^15``),
    so the products are exact on every CPU. ``zp_k`` goes in as the op's zero point, which also fills
    the padding, so a padded tap contributes 0."""

    def __init__(self, values: list, zero_points: list[int]):
        self.values, self.zero_points = values, zero_points

    @property
    def weights(self) -> list[int]:
        return [1 << (7 * k) for k in range(len(self.values))]


def planes(g, v, bits: int, stored_offset: int = 0) -> Planes:
    """The 7-bit planes of ``v``, a signed ``bits``-wide integer tensor (8 or 16) stored as itself, or
    plus ``stored_offset`` (128 for a uint8-stored int8 value)."""
    offset = 1 << (bits - 1)
    count = -(-bits // 7)
    u = g.cast(v, I32)
    if offset != stored_offset:
        u = g.binary("Add", u, g.const(np.int32(offset - stored_offset), "offset"), I32)
    values, zero_points = [], []
    for k in range(count):
        part = g.binary("Div", u, g.const(np.int32(1 << (7 * k)), "plane_pot"), I32) if k else u
        if k < count - 1:
            part = g.node("Mod", [part, g.const(np.int32(128), "plane_mod")], I32, what="plane", fmod=0)
        values.append(g.cast(part, U8))
        zero_points.append((offset >> (7 * k)) & 127)
    return Planes(values, zero_points)


def planes_dot(g, a: Planes, op_type: str, rhs, rhs_zero_point=None, **attrs):
    """``Σ_k 2^(7k) · op_type(p_k - zp_k, rhs)`` in int64: ``op_type`` is ConvInteger or MatMulInteger,
    ``rhs`` the int8 weights, a uint8 plane with ``rhs_zero_point``, or Planes (an activation on
    both sides: the double sum over both operands' planes)."""
    if isinstance(rhs, Planes):
        return weighted_sum(g, [(planes_dot(g, a, op_type, value, zp, **attrs), weight)
                                for value, zp, weight in zip(rhs.values, rhs.zero_points, rhs.weights)])
    terms = []
    for value, zp, weight in zip(a.values, a.zero_points, a.weights):
        inputs = [value, rhs, g.const(np.uint8(zp), "plane_zero_point")]
        if rhs_zero_point is not None:
            inputs.append(g.const(np.uint8(rhs_zero_point), "plane_zero_point"))
        terms.append((g.cast(g.node(op_type, inputs, I32, what=op_type.lower(), **attrs), I64), weight))
    return weighted_sum(g, terms)


def weighted_sum(g, terms: list) -> object:
    """``Σ weight·value`` of int64 ``(value, weight)`` pairs (no Mul for a weight of 1)."""
    total = None
    for value, weight in terms:
        part = value if weight == 1 else g.binary("Mul", value, g.i64(weight, "plane_weight"))
        total = part if total is None else g.binary("Add", total, part)
    return total


def powers_of_two(g) -> object:
    """``[2^0, 2^1, ..., 2^62]`` (int64): Gather reads ``2^e`` for an exponent computed at run time."""
    return g.i64(np.left_shift(np.int64(1), np.arange(63, dtype=np.int64)), "pow2")


def bit_length(g, v) -> object:
    """The bit length of each positive int64 element of ``v``: how many powers of two it reaches,
    counted by comparisons (ONNX has no CountLeadingZeros)."""
    column = g.node("Unsqueeze", [v, g.i64([-1], "last")], I64, what="column")
    reached = g.cast(g.binary("GreaterOrEqual", column, powers_of_two(g), I1), I64)
    return g.node("ReduceSum", [reached, g.i64([-1], "last")], I64, what="bits", keepdims=0)
