"""Selection and comparison on int8: LiteRT MAXIMUM, MINIMUM, ARG_MAX and EQUAL, NOT_EQUAL, LESS,
LESS_EQUAL, GREATER, GREATER_EQUAL.

MAXIMUM and MINIMUM copy the winning stored value, so their inputs share the output's scale
and zero point (a same-scale class, as CONCATENATION's); an ONNX ``Max``/``Min`` of more than
two operands becomes a chain of them. ARG_MAX and the comparisons read int8 and write integers
(``output_quantized=False``): their result keeps the float op's type and the float ops after
them read it as it is.

The comparisons rescale each input to a fixed-point real value (a left shift of 8, the scale
as the multiplier: ``runtime/qkernels/comparison.py``), which tells every pair of stored values
apart only when the scale is at least 2**-8, and which LiteRT refuses at a scale of 1 or more.
So both inputs share one scale (constants included), the solver widens that class's range
to a scale of at least 2**-8, and a comparison whose calibrated inputs would need a scale of
1 or more (a range of about 255) stays float.
"""
from __future__ import annotations

import numpy as np

from ...ir import Value
from ...ir.dialects import nn, qnn
from ...numerics import asymmetric_qparams
from ...rewrite import Match, Pat
from ...runtime import qkernels as qk
from ...runtime.kernels.qnn_ops import prepare_once, scale_of, zero_point_of
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, binary, rank, unary
from ..rules import ACT, ANY, SAME_AS, OpSpec, QuantizedOp
from .registry import QuantOp, SolverRules, declare

MARGIN = 1.0 + 2.0 ** -10                          # float32 rounding of the scale must not land below the floor
FINEST_COMPARISON_SCALE = 2.0 ** -8 * MARGIN       # below 2**-8 neighbouring stored values compare equal


# -- MAXIMUM, MINIMUM ------------------------------------------------------------------------------

def _check_select(m: Match) -> str | None:
    op = m.ops["op"]
    if len(op.operands) < 2:
        return f"{op.opdef.name} of one operand is that operand: nothing to compute"
    if any(rank(v) is None for v in op.operands):
        return "operands must be ranked tensors"
    return None


def lower_select(opdef):
    """``Max``/``Min`` of n operands: a chain of n - 1 two-input ops, all in the output's parameters
    (constants are quantized with them)."""
    def lower(lw: Lowerer, r: Region) -> Value:
        op = r.match.ops["op"]
        out = lw.params[r.output]
        xs = [lw.quantized(v, out) for v in op.operands]
        acc = xs[0]
        for k, x in enumerate(xs[1:], 2):   # each link has the broadcast shape of the operands so far
            shape = op.opdef.infer([v.type for v in op.operands[:k]], {})[0].shape
            acc = lw.emit(opdef.build([acc, x], [lw.out_type(r).clone(shape=shape)]), op).result
        return acc
    return lower


def _select_kernel(kernel, name: str):
    def run(op, a, b):
        params = [(scale_of(v), zero_point_of(v)) for v in (*op.operands, op.results[0])]
        prepare_once(op, lambda: qk.prepare_maximum_minimum(name, *params))
        return kernel(a, b)
    return run


_SELECT_ROW = OpSpec((ACT,), SAME_AS(0), variadic=True, note="every input shares the output's scale and zero point")

MAXIMUM = declare(QuantOp(
    qnn.MAXIMUM, OP.MAXIMUM, _SELECT_ROW,
    patterns=(QuantizerPattern("maximum", Pat.op(nn.VARIADIC["max"], name="op", any_operands=True),
                               lower_select(qnn.MAXIMUM), (), variadic=True, check=_check_select,
                               doc="Max of two or more operands (a chain of MAXIMUM)"),),
    kernel=_select_kernel(qk.maximum, "maximum"), qdq_ops=(nn.VARIADIC["max"],)))

MINIMUM = declare(QuantOp(
    qnn.MINIMUM, OP.MINIMUM, _SELECT_ROW,
    patterns=(QuantizerPattern("minimum", Pat.op(nn.VARIADIC["min"], name="op", any_operands=True),
                               lower_select(qnn.MINIMUM), (), variadic=True, check=_check_select,
                               doc="Min of two or more operands (a chain of MINIMUM)"),),
    kernel=_select_kernel(qk.minimum, "minimum"), qdq_ops=(nn.VARIADIC["min"],)))


# -- comparisons -----------------------------------------------------------------------------------

def _check_compare(m: Match) -> str | None:
    if any(isinstance(m.values.get(n), Value) and rank(m[n]) is None for n in ("a", "b")):
        return "operands must be ranked tensors"
    return None


def comparison_range_check(region: Region, ranges: list[tuple[float, float]], _output=None) -> str | None:
    """After calibration: the inputs' shared scale must stay below 1, which LiteRT's int8 comparison needs."""
    lo, hi = min(min(r[0] for r in ranges), 0.0), max(max(r[1] for r in ranges), 0.0)
    scale = float(asymmetric_qparams(lo, hi)[0])
    if scale >= 1.0:
        return (f"its inputs' calibrated range [{lo:g}, {hi:g}] needs an int8 scale of {scale:g}; LiteRT's int8 "
                "comparison takes scales below 1 (it aborts at 1.0), so it stays float")
    return None


def comparison_scale_limit(op: QuantizedOp) -> str | None:
    for i, q in enumerate(op.inputs):
        if q is not None and q.scale is not None and not q.per_axis and float(np.float32(q.scale)) >= 1.0:
            return (f"input {i} scale {float(q.scale):g} must be below 1: LiteRT's int8 comparison aborts at 1.0 "
                    "and is undefined above")
    return None


def lower_compare(opdef):
    def lower(lw: Lowerer, r: Region) -> Value:
        a, b = lw.input(r.match["a"]), lw.input(r.match["b"])
        return lw.emit(opdef.build([a, b], [r.output.type]), r.match.ops["op"]).result
    return lower


def _compare_kernel(kind: qk.ComparisonKind):
    def run(op, a, b):
        av, bv = op.operands
        p = prepare_once(op, lambda: qk.prepare_comparison(scale_of(av), scale_of(bv), kind.value))
        return qk.compare(kind, a, b, input1_zero_point=zero_point_of(av), input2_zero_point=zero_point_of(bv),
                          **p.as_kwargs())
    return run


_COMPARE_ROW = OpSpec((ACT, SAME_AS(0)), ANY, limits=(comparison_scale_limit,),
                      note="both inputs share one scale (below 1) and zero point; bool output")
_COMPARE_SOLVER = SolverRules(shared_inputs=True, finest_input_scale=FINEST_COMPARISON_SCALE)


def _comparison(opdef, builtin: OP, kind: qk.ComparisonKind, name: str, pattern: Pat, doc: str = "") -> QuantOp:
    return declare(QuantOp(
        opdef, builtin, _COMPARE_ROW,
        patterns=(QuantizerPattern(name, pattern, lower_compare(opdef), ("a", "b"), check=_check_compare, doc=doc),),
        kernel=_compare_kernel(kind), solver=_COMPARE_SOLVER, output_quantized=False,
        calibrated_check=comparison_range_check))


K = qk.ComparisonKind
EQUAL = _comparison(qnn.EQUAL, OP.EQUAL, K.EQUAL, "equal", binary(nn.COMPARE["equal"]))
NOT_EQUAL = _comparison(qnn.NOT_EQUAL, OP.NOT_EQUAL, K.NOT_EQUAL, "not_equal",
                        Pat.op(nn.NOT, binary(nn.COMPARE["equal"]).one_use(), name="not"),
                        doc="Not(Equal(a, b)), ONNX's not-equal")
LESS = _comparison(qnn.LESS, OP.LESS, K.LESS, "less", binary(nn.COMPARE["less"]))
LESS_EQUAL = _comparison(qnn.LESS_EQUAL, OP.LESS_EQUAL, K.LESS_EQUAL, "less_equal",
                         binary(nn.COMPARE["less_or_equal"]))
GREATER = _comparison(qnn.GREATER, OP.GREATER, K.GREATER, "greater", binary(nn.COMPARE["greater"]))
GREATER_EQUAL = _comparison(qnn.GREATER_EQUAL, OP.GREATER_EQUAL, K.GREATER_EQUAL, "greater_equal",
                            binary(nn.COMPARE["greater_or_equal"]))


# -- ARG_MAX ---------------------------------------------------------------------------------------

def _check_arg_max(m: Match) -> str | None:
    op = m.ops["op"]
    if op.attr("select_last_index"):
        return "select_last_index=1 has no LiteRT form: ARG_MAX keeps the first of equal maxima"
    if rank(op.operands[0]) is None:
        return "the input must be a ranked tensor"
    return None


def lower_arg_max(lw: Lowerer, r: Region) -> Value:
    """ARG_MAX removes the axis; ONNX's keepdims=1 puts it back with an Unsqueeze of the indices."""
    op = r.match.ops["op"]
    x = r.match["x"]
    axis = op.attr("axis") % len(x.type.shape)
    shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
    y = lw.emit(qnn.ARG_MAX.build([lw.input(x)], [r.output.type.clone(shape=shape)], axis=axis), op).result
    if op.attr("keepdims"):
        y = lw.emit(nn.UNSQUEEZE.build([y], [r.output.type], axes=(axis,)), op).result
    return y


def arg_max_kernel(op, x):
    width = op.results[0].type.element_type.width   # i32 or i64, as ArgMaxOptions.output_type
    return qk.arg_max(x, axis=op.attr("axis"), output_dtype={32: np.int32, 64: np.int64}[width])


ARG_MAX = declare(QuantOp(
    qnn.ARG_MAX, OP.ARG_MAX, OpSpec((ACT, ANY), ANY, note="int32 or int64 output"),
    patterns=(QuantizerPattern("arg_max", unary(nn.ARG_MAX), lower_arg_max, check=_check_arg_max,
                               doc="ArgMax (keepdims=1: an Unsqueeze of the indices after it)"),),
    kernel=arg_max_kernel, output_quantized=False))
