"""``qnn.unidirectional_lstm`` in the QOperator export: LiteRT's integer recurrence as an ONNX Scan.

ONNX Runtime has no LSTM on int8 activations (its ``DynamicQuantizeLSTM`` reads a float input and
writes a float output), so the QOperator export once dequantized before each LSTM and quantized
after it. This writes the recurrence of quantir's kernel (``runtime/qkernels/unidirectional_lstm``,
LiteRT's ``EvalInteger8x8_16``) in ONNX Runtime's integer ops instead, equal to the interpreter:

- before the loop, the input part of the four gates at every step: MatMulInteger of the int8
  sequence (as 7-bit planes, ``integer_arith.Planes``) with the input weights ``[I, 4H]``, the folded
  bias, the 32-bit MBQM per gate, saturated to int16 (Q3.12);
- a Scan over time (reversed with ``reverse``) whose state is the int8 hidden state and the int16
  cell state (held in int64). Each step: MatMulInteger of h (7-bit planes) with the recurrent weights ``[H, 4H]``,
  the folded bias, the MBQM per gate, added to the input part with int16 saturation; the sigmoid and
  tanh of the Q3.12 gates from 65,536-entry tables of gemmlowp's int16 functions; the cell update
  ``sat16(wrap16(RDBPOT(f·c, 15)) + wrap16(RDBPOT(i·g, 30 + cs)))`` (clipped when the op has a
  cell clip); ``h = clamp(MBQM(o · tanh(c), M_h) + zp, -128, 127)``.

The MBQM and rounding shifts are ``integer_arith``'s, the same helpers the 16x8 ops use.
"""
from __future__ import annotations

import base64

import numpy as np
import onnx
from onnx import helper

from ...errors import UnsupportedOpError
from ...ir import Operation
from ...ir.dialects import nn, qnn
from ...numerics.gemmlowp16 import logistic_16, tanh_16, wrap_int16
from ...runtime.qkernels.unidirectional_lstm import GATE_INTEGER_BITS, prepare_unidirectional_lstm
from ...types import IntegerType, TensorType
from .builder import Builder, constant_array, qtype
from .dtypes import storage_element_type
from .integer_arith import I8, I32, I64, Graph, Subgraph, mbqm, planes, planes_dot, rdbpot

__all__ = ["lstm_qoperator"]

_ALL_INT16 = wrap_int16(np.arange(65536, dtype=np.int64))   # entry u holds f(int16(u)): Gather reads v < 0 from the end


def _constant(b: Builder, op: Operation, index: int, what: str) -> np.ndarray:
    ints = constant_array(b.value(op.operands[index]))
    if ints is None:
        raise UnsupportedOpError(f"qnn.unidirectional_lstm '{op.label or op.name}': its {what} are not a constant")
    return np.asarray(ints, np.int64)


def _offset(v) -> int:
    """128 for uint8 storage (``activations="uint8"``: the int8 value + 128), else 0."""
    return 0 if qtype(v.type).is_signed else 128


def _params(op: Operation):
    """The kernel's Prepare, on the int8 zero points (a uint8-stored tensor's minus 128)."""
    x, w, r, y = op.operands[0], op.operands[1], op.operands[2], op.results[0]
    qx, qy = qtype(x.type), qtype(y.type)
    zx, zy = int(qx.zero_point) - _offset(x), int(qy.zero_point) - _offset(y)
    return prepare_unidirectional_lstm(float(qx.scale), zx, tuple(qnn.scales_of(w.type)),
                                       tuple(qnn.scales_of(r.type)), float(qy.scale), zy,
                                       op.attr("cell_scale_log2"), float(qy.scale), zy,
                                       cell_clip=op.attr("cell_clip") or 0.0)


def _gate(s: Subgraph, v: str, k: int) -> str:
    """Gate ``k`` of a ``[B, 4, H]`` tensor, ``[B, H]``."""
    return s.node("Gather", [v, s.i64(k, f"gate{k}")], what=f"gate{k}_", axis=1)


def _wrap16(s: Subgraph, v: str) -> str:
    """The int16 cast of an int64 (two's complement wrap, as the C++ ``static_cast<int16_t>``)."""
    return s.binary("Sub", s.node("Mod", [s.binary("Add", v, s.i64(1 << 15, "half_range")),
                                          s.i64(1 << 16, "range")], what="wrap", fmod=0), s.i64(1 << 15, "half_range"))


def _step(p, w_rec: np.ndarray, eff_rec: np.ndarray, opset: int, prefix: str) -> onnx.GraphProto:
    """One time step: (h int8 [B, H], c int64 [B, H], the step's input part int64 [B, 4, H]) ->
    (h, c, h)."""
    s = Subgraph(f"{prefix}_", opset)
    hidden = w_rec.shape[1]
    w = s.const(w_rec.reshape(4 * hidden, hidden).T.astype(np.int8), "w_rec")
    acc = planes_dot(s, planes(s, "h_in", 8), "MatMulInteger", w)
    acc = s.binary("Add", s.node("Reshape", [acc, s.i64([-1, 4, hidden], "gates_shape")], what="gates"),
                   s.i64(eff_rec, "bias_rec"))
    rec = mbqm(s, acc, np.asarray(p.recurrent_multiplier).reshape(4, 1), np.asarray(p.recurrent_shift).reshape(4, 1))
    gates = s.node("Clip", [s.binary("Add", "gate_in", rec), s.i64(-32768, "min16"), s.i64(32767, "max16")],
                   what="q3_12")
    sigmoid = s.node("Gather", [s.i64(logistic_16(_ALL_INT16, GATE_INTEGER_BITS), "sigmoid"), gates], what="sig",
                     axis=0)
    i, f, o = (_gate(s, sigmoid, k) for k in (0, 1, 3))
    g = s.node("Gather", [s.i64(tanh_16(_ALL_INT16, GATE_INTEGER_BITS), "tanh_gate"), _gate(s, gates, 2)],
               what="tanh_gate_", axis=0)
    cs = int(p.cell_scale_log2)
    forget = _wrap16(s, rdbpot(s, s.binary("Mul", f, "c_in"), np.int64(15)))
    update = _wrap16(s, rdbpot(s, s.binary("Mul", i, g), np.int64(30 + cs)))
    c = s.node("Clip", [s.binary("Add", forget, update), s.i64(-32768, "min16"), s.i64(32767, "max16")], what="cell")
    if p.quantized_cell_clip > 0:
        clip = int(p.quantized_cell_clip)
        c = s.node("Clip", [c, s.i64(-clip, "clip_lo"), s.i64(clip, "clip_hi")], what="cell_clip")
    tanh_c = s.node("Gather", [s.i64(tanh_16(_ALL_INT16, 15 + cs), "tanh_cell"), c], what="tanh_cell_", axis=0)
    h = mbqm(s, s.binary("Mul", o, tanh_c), int(p.hidden_multiplier), int(p.hidden_shift))
    h = s.node("Clip", [s.binary("Add", h, s.i64(int(p.hidden_zero_point), "zp_hidden")), s.i64(-128, "min8"),
                        s.i64(127, "max8")], what="hidden")
    h = s.cast(h, I8)
    s.nodes.append(helper.make_node("Identity", [h], ["h_out"]))
    s.nodes.append(helper.make_node("Identity", [c], ["c_out"]))
    s.nodes.append(helper.make_node("Identity", [h], ["y_out"]))
    vi = helper.make_tensor_value_info
    return s.graph(f"{prefix}_step", [vi("h_in", onnx.TensorProto.INT8, None), vi("c_in", onnx.TensorProto.INT64, None),
                                      vi("gate_in", onnx.TensorProto.INT64, None)],
                   [vi("h_out", onnx.TensorProto.INT8, None), vi("c_out", onnx.TensorProto.INT64, None),
                    vi("y_out", onnx.TensorProto.INT8, None)])


def _unique_prefix(b: Builder, name: str) -> str:
    """A prefix for a Scan body's names that no other name of the export has (ONNX's single
    assignment spans a subgraph and the graph around it; the exporter renames only the latter)."""
    k = b.__dict__["_lstm_bodies"] = b.__dict__.get("_lstm_bodies", 0) + 1
    return f"{name}__lstm_step{k}"


def lstm_qoperator(b: Builder, op: Operation) -> None:
    x, y = op.operands[0], op.results[0]
    w_in, w_rec, bias = _constant(b, op, 1, "input weights"), _constant(b, op, 2, "recurrent weights"), \
        _constant(b, op, 3, "biases")
    p = _params(op)
    hidden = w_rec.shape[1]
    g = Graph(b, op)
    # PrecomputeZeroPointTimesWeightWithBias: the zero points folded into the biases
    eff_in = bias - int(p.input_zero_point) * w_in.sum(axis=-1)
    eff_rec = -int(p.output_state_zero_point) * w_rec.sum(axis=-1)
    # the input part of every gate at every step, [T, B, 4, H]
    w = g.const(w_in.reshape(4 * hidden, -1).T.astype(np.int8), "w_in")
    acc = planes_dot(g, planes(g, b.value(x), 8, stored_offset=_offset(x)), "MatMulInteger", w)
    acc = g.binary("Add", g.node("Reshape", [acc, g.i64([0, 0, 4, hidden], "gates_shape")], I64, what="gates"),
                   g.i64(eff_in, "bias_in"))
    gate_in = g.node("Clip", [mbqm(g, acc, np.asarray(p.input_multiplier).reshape(4, 1),
                                   np.asarray(p.input_shift).reshape(4, 1)),
                              g.i64(-32768, "min16"), g.i64(32767, "max16")], I64, what="gate_in")
    # zero initial states: h holds the hidden zero point, c zero, [B, H] with B read from x
    batch = g.node("Slice", [g.node("Shape", [b.value(x)], I64, (3,), what="dims"), g.i64([1], "one"),
                             g.i64([2], "two")], I64, (1,), what="batch")
    state_shape = g.node("Concat", [batch, g.i64([hidden], "hidden")], I64, (2,), what="state_shape", axis=0)
    h0 = g.node("ConstantOfShape", [state_shape], I8, what="h0",
                value=helper.make_tensor("zp", onnx.TensorProto.INT8, [1], [int(p.hidden_zero_point)]))
    c0 = g.node("ConstantOfShape", [state_shape], I64, what="c0",
                value=helper.make_tensor("zero", onnx.TensorProto.INT64, [1], [0]))
    reverse = [1] if op.attr("reverse") else [0]
    node = helper.make_node("Scan", ["h0", "c0", "gate_in"], ["h", "c", "y"], num_scan_inputs=1,
                            body=_step(p, w_rec, eff_rec, b.opset, _unique_prefix(b, g.name)),
                            scan_input_directions=reverse,
                            scan_output_directions=reverse)
    t, batch_dim, _ = y.type.shape
    signed_y = y.type if not _offset(y) else TensorType(y.type.shape, IntegerType(8))
    scan = nn.ONNX_OP.build([h0, c0, gate_in], [TensorType((batch_dim, hidden), IntegerType(8)),
                                                TensorType((batch_dim, hidden), I64), signed_y],
                            loc=op.loc, label=f"{g.label}/recurrence", op_type="Scan", domain="", opset=b.opset,
                            node=base64.b64encode(node.SerializeToString()).decode("ascii"))
    b.append(scan)
    scan.results[0].name_hint, scan.results[1].name_hint = f"{g.name}_h_last", f"{g.name}_c_last"
    out = scan.results[2]
    if _offset(y):   # uint8 storage: the int8 hidden states + 128
        out.name_hint = f"{g.name}_int8"
        moved = g.binary("Add", g.cast(out, I32), g.const(np.int32(128), "uint8_offset"), I32)
        out = b.emit(nn.CAST, [moved], y.type, name=y.name_hint, label=f"{g.label}/store", like=op,
                     to=storage_element_type(y.type))
    b.define(y, out)

