"""Data movement: ops that copy stored integers, so their output shares the input's parameters.

CONCATENATION (every input requantized to the output's parameters), PAD (pads with the zero
point, real 0), and the ``nn`` ops that work unchanged on quantized tensors: their float
kernels copy stored integers, so they need no ``qnn`` op and no integer kernel of their own.
"""
from __future__ import annotations

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...rewrite import Match, Pat
from ...runtime.kernels import qnn_ops
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, unary
from ..rules import ACT, ANY, SAME_AS, OpSpec
from .registry import Format, QuantOp, SolverRules, declare


def _check_pad(m: Match) -> str | None:
    op = m.ops["op"]
    if op.attr("mode") != "constant" or op.attr("constant_value") != 0.0:
        return "only constant zero padding keeps the zero point as the pad value"
    return None


def lower_concat(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    out = lw.params[r.output]
    xs = [lw.quantized(v, out) for v in op.operands]
    return lw.emit(qnn.CONCAT.build(xs, [lw.out_type(r)], axis=op.attr("axis")), op).result


def lower_pad(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    return lw.emit(qnn.PAD.build([lw.input(r.match["x"])], [lw.out_type(r)], pads=op.attr("pads")), op).result


def lower_data_movement(lw: Lowerer, r: Region) -> Value:
    """The float op itself, on the integer input: its kernel moves stored integers."""
    op = r.match.ops["op"]
    x = lw.input(r.match["x"])
    new = Operation(op.opdef, [x], [lw.out_type(r)], dict(op.attributes), op.loc, op.label)
    return lw.emit(new).result


CONCAT = declare(QuantOp(
    qnn.CONCAT, OP.CONCATENATION,
    OpSpec((ACT,), SAME_AS(0), variadic=True, note="every input shares the output's scale and zero point"),
    patterns=(QuantizerPattern("concat", Pat.op(nn.CONCAT, name="op", any_operands=True), lower_concat, (),
                               variadic=True),),
    kernel=qnn_ops.concat, qdq_ops=(nn.CONCAT,), solver=SolverRules(requantizes_inputs=True), int16=True))

PAD = declare(QuantOp(
    qnn.PAD, OP.PAD, OpSpec((ACT, ANY), SAME_AS(0)),
    patterns=(QuantizerPattern("pad", unary(nn.PAD), lower_pad, check=_check_pad),),
    kernel=qnn_ops.pad, int16=True,   # a 16x8 conv's explicit pads (zero point 0) are PAD too
    rows={OP.PADV2: OpSpec((ACT, ANY, SAME_AS(0)), SAME_AS(0))},
    qdq_ops=(nn.PAD,),
    doc="PAD with the zero point, or PADV2 with a stored value (a max pool's explicit pads)"))


def _movement(opdef, builtin: OP, row: OpSpec, pattern: QuantizerPattern | None = None, doc: str = "",
              qdq: bool = True, rows: dict | None = None) -> QuantOp:
    return declare(QuantOp(
        opdef, builtin, row, patterns=(pattern,) if pattern else (), rows=rows or {},
        qdq_ops=(opdef,) if qdq else (),
        doc=doc, int16=True))   # RESHAPE, TRANSPOSE, SLICE ... copy int16 values unchanged


_RESHAPE_ROW = OpSpec((ACT, ANY), SAME_AS(0))
RESHAPE = _movement(nn.RESHAPE, OP.RESHAPE, _RESHAPE_ROW, QuantizerPattern(
    "reshape", Pat.alt(unary(nn.RESHAPE), unary(nn.FLATTEN)), lower_data_movement))


def lower_dynamic_reshape(lw: Lowerer, r: Region) -> Value:
    """The float op on the integer data; the shape operand is integer shape math that stays as it is."""
    op = r.match.ops["op"]
    x = lw.input(r.match["x"])
    new = Operation(op.opdef, [x, lw.floating(op.operands[1])], [lw.out_type(r)], dict(op.attributes), op.loc,
                    op.label)
    return lw.emit(new).result


# A Reshape whose target is computed at run time (Shape -> Gather -> Concat of dynamic dims)
# moves the stored integers like any Reshape: same scale, and LiteRT's RESHAPE reads the target
# from its second input tensor anyway.
DYNAMIC_RESHAPE = declare(QuantOp(
    nn.DYNAMIC_RESHAPE, OP.RESHAPE, _RESHAPE_ROW,
    patterns=(QuantizerPattern("dynamic_reshape", Pat.op(nn.DYNAMIC_RESHAPE, Pat.any("x"), Pat.any(), name="op"),
                               lower_dynamic_reshape, doc="Reshape to a shape computed at run time"),),
    qdq_ops=(nn.DYNAMIC_RESHAPE,), int16=True,
    # (a target that folds to ONNX's 0 copies and one -1 is an nn.reshape, which the .tflite writer
    # gives a run-time SHAPE -> CONCATENATION -> GATHER target)
    cannot={Format.TFLITE_EXPORT: "its target is computed by integer shape ops (Shape, Gather, Concat, Mul ... "
                                  "on i64) that quantir's .tflite writer does not write",
            Format.TFLITE_IMPORT: "the .tflite reader reads every RESHAPE back as nn.reshape (a .tflite quantir "
                                  "writes never holds a reshape to a run-time target)"}))
FLATTEN = _movement(nn.FLATTEN, OP.RESHAPE, _RESHAPE_ROW, doc="matched by the reshape pattern")
TRANSPOSE = _movement(nn.TRANSPOSE, OP.TRANSPOSE, OpSpec((ACT, ANY), SAME_AS(0)),
                      QuantizerPattern("transpose", unary(nn.TRANSPOSE),
                                                                   lower_data_movement))
# (`quantir check` on a QDQ model has never viewed Squeeze/Unsqueeze; kept so, the counts of
# checked ops in QDQ reports stay what they were)
SQUEEZE = _movement(nn.SQUEEZE, OP.SQUEEZE, OpSpec((ACT,), SAME_AS(0)), QuantizerPattern(
    "squeeze", Pat.alt(unary(nn.SQUEEZE), unary(nn.UNSQUEEZE)), lower_data_movement), qdq=False)
UNSQUEEZE = _movement(nn.UNSQUEEZE, OP.EXPAND_DIMS, OpSpec((ACT, ANY), SAME_AS(0)),
                      doc="matched by the squeeze pattern",
                      qdq=False)
SLICE = _movement(nn.SLICE, OP.STRIDED_SLICE, OpSpec((ACT, ANY, ANY, ANY), SAME_AS(0)), QuantizerPattern(
    "slice", unary(nn.SLICE), lower_data_movement, doc="Slice (constant bounds): a copy"),
    rows={OP.SLICE: OpSpec((ACT, ANY, ANY), SAME_AS(0))})   # a .tflite SLICE reads back as nn.slice
