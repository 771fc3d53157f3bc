"""Row normalizations over the last axis, with fixed output parameters: LiteRT L2_NORMALIZATION
(1/128, 0) and LOG_SOFTMAX (16/256, 127).

L2_NORMALIZATION comes from ONNX ``LpNormalization`` (p=2, last axis) and from the forms
exporters write out, ``x / norm`` with ``norm`` one of

    Sqrt(ReduceSum(x·x))   Sqrt(ReduceSum(Pow(x, 2)))   Sqrt(ReduceSumSquare(x))   ReduceL2(x)

(keepdims, over the last axis), written as ``Div(x, norm)``, ``Mul(x, Reciprocal(norm))`` or
``Mul(x, Pow(sum of squares, -0.5))``, optionally through an ``Expand`` to x's shape
(``torch.nn.functional.normalize``).

Epsilons. LiteRT's int8 kernel has none: it divides the integers ``q - zp`` by the integer
square root of their sum of squares (a zero row stays zero). An epsilon of the float graph is
accepted where it cannot move an int8 result by an output step (1/128) for any input whose
scale is at least ``MIN_INPUT_SCALE`` (a calibrated range of 0.0255 or wider), since the
smallest non-zero row of such an input has norm ``s_in`` and sum of squares ``s_in²``:

==============================  =============================  ===========================
form                            effect on a row                accepted epsilon
==============================  =============================  ===========================
Max/Clip(norm, eps)             none while norm >= eps         eps <= s_min (exact)
Max/Clip(sum of squares, eps)   none while sum >= eps          eps <= s_min² (exact)
norm + eps                      y·(1 - eps/norm) at most       eps <= s_min / 128
Sqrt(sum of squares + eps)      y·(1 - eps/(2·sum)) at most    eps <= s_min² / 64
==============================  =============================  ===========================

A larger epsilon stays float, with the reason: it changes the rows LiteRT would normalize.

LOG_SOFTMAX is ONNX ``LogSoftmax`` over the last axis. Its two LiteRT kernels differ by one
step on some inputs (runtime/qkernels/log_softmax.py): quantir follows ``BUILTIN_REF``'s fixed
point, as it does for every other op (SUM, in reduce.py, is the one exception).
"""
from __future__ import annotations

import numpy as np

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...rewrite import Match, Pat
from ...runtime import qkernels as qk
from ...runtime.kernels import qnn_ops
from ...types import TensorType, UniformQuantizedType
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, rank, unary
from ..rules import ACT, FIXED, OpSpec
from .registry import QuantOp, declare

MIN_INPUT_SCALE = 1e-4
OUTPUT_STEP = 1.0 / 128.0
# (where the epsilon sits, its op) -> the largest epsilon accepted (see the table above)
EPSILON_LIMITS = {("norm", "max"): MIN_INPUT_SCALE, ("sum", "max"): MIN_INPUT_SCALE ** 2,
                  ("norm", "add"): MIN_INPUT_SCALE * OUTPUT_STEP, ("sum", "add"): MIN_INPUT_SCALE ** 2 / 64.0}
LOG_SOFTMAX_MAX_ROW = 4095   # LiteRT's Q12.19 sum of exponentials overflows at 4096 terms of 1


# -- L2_NORMALIZATION: patterns ---------------------------------------------------------------------

def _commutative(opdef, p: Pat, q: Pat, name: str) -> Pat:
    return Pat.alt(Pat.op(opdef, p, q, name=name), Pat.op(opdef, q, p, name=name))


_X = Pat.any("x")
_MAX = nn.VARIADIC["max"]
_SQUARE = Pat.alt(Pat.op(nn.MUL, _X, _X, name="square"),
                  Pat.op(nn.BINARY["pow"], _X, Pat.const("two"), name="square"))
_SUM_OF_SQUARES = Pat.alt(Pat.op(nn.REDUCE["sum"], _SQUARE.one_use(), name="reduce"),
                          Pat.op(nn.REDUCE["sum_square"], _X, name="reduce"))


def _with_epsilon(p: Pat, where: str) -> Pat:
    """``p``, or ``p`` with an epsilon: ``p + eps``, ``Max(p, eps)`` or ``Clip(p, min=eps)``."""
    eps, name = Pat.const(f"eps_{where}_value"), f"eps_{where}"
    return Pat.alt(_commutative(nn.ADD, p.one_use(), eps, name), _commutative(_MAX, p.one_use(), eps, name),
                   Pat.op(nn.CLIP, p.one_use(), name=name), p)


_SUM = _with_epsilon(_SUM_OF_SQUARES, "sum")
_NORM = _with_epsilon(Pat.alt(Pat.op(nn.UNARY["sqrt"], _SUM.one_use(), name="sqrt"),
                              Pat.op(nn.REDUCE["l2"], _X, name="reduce")), "norm")
_DENOMINATOR = Pat.alt(Pat.op(nn.EXPAND, _NORM.one_use(), name="expand"), _NORM)
_INVERSE = Pat.alt(Pat.op(nn.UNARY["reciprocal"], _DENOMINATOR.one_use(), name="inverse"),
                   Pat.op(nn.BINARY["pow"], _SUM.one_use(), Pat.const("minus_half"), name="inverse"))
_WRITTEN_OUT = Pat.alt(Pat.op(nn.DIV, _X, _DENOMINATOR.one_use(), name="op"),
                       _commutative(nn.MUL, _X, _INVERSE.one_use(), "op"))


def _last_axis(op: Operation, axis: int) -> bool:
    r = rank(op.operands[0])
    return r is not None and axis in (-1, r - 1)


def _check_lp(m: Match) -> str | None:
    op = m.ops["op"]
    if op.attr("p") != 2:
        return f"LpNormalization with p={op.attr('p')}: LiteRT L2_NORMALIZATION is p=2"
    if not _last_axis(op, op.attr("axis")):
        return f"LpNormalization over axis {op.attr('axis')}: LiteRT L2_NORMALIZATION normalizes the last axis"
    return None


def _scalar(m: Match, name: str) -> float | None:
    c = m.consts.get(name)
    return None if c is None or np.size(c) != 1 else float(np.asarray(c, np.float64).reshape(()))


def _epsilon(m: Match, where: str) -> str | None:
    op = m.ops.get(f"eps_{where}")
    if op is None:
        return None
    what = "the norm" if where == "norm" else "the sum of squares"
    if op.opdef is nn.CLIP:
        eps, top = op.attr("min"), op.attr("max")
        if eps is None or (top is not None and top != np.inf):
            return f"a Clip of {what} with bounds ({eps}, {top}) is not an epsilon floor"
        kind = "max"
    else:
        eps = _scalar(m, f"eps_{where}_value")
        if eps is None:
            return f"the epsilon of {what} must be one constant value"
        kind = "add" if op.opdef is nn.ADD else "max"
    limit = EPSILON_LIMITS[(where, kind)]
    if not 0.0 <= eps <= limit:
        form = f"{'Add' if kind == 'add' else 'Max'}({what}, {eps:g})"
        return (f"{form}: LiteRT's int8 L2_NORMALIZATION has no epsilon, and one above {limit:g} changes the "
                f"normalized rows of inputs with scales down to {MIN_INPUT_SCALE:g}")
    return None


def _check_written_out(m: Match) -> str | None:
    x, reduce = m.values["x"], m.ops["reduce"]
    r = rank(x)
    if r is None or r == 0:
        return "the normalized tensor must be ranked"
    axes = reduce.attr("axes")
    if tuple(int(a) % r for a in (axes or ())) != (r - 1,) or not reduce.attr("keepdims"):
        return (f"the norm is taken over axes {list(axes or ())} (keepdims={reduce.attr('keepdims')}): LiteRT "
                f"L2_NORMALIZATION normalizes the last axis, kept")
    expected = {"two": 2.0, "minus_half": -0.5}
    for name, want in expected.items():
        if name in m.consts and _scalar(m, name) != want:
            return f"not an L2 norm: the exponent is {np.asarray(m.consts[name]).ravel()[:4].tolist()}, not {want:g}"
    expand = m.ops.get("expand")
    if expand is not None and expand.results[0].type.shape != x.type.shape:
        return "the norm is expanded to a shape other than the normalized tensor's"
    if m.ops["op"].results[0].type.shape != x.type.shape:
        return "the result's shape is not the normalized tensor's (the norm broadcasts it)"
    return _epsilon(m, "sum") or _epsilon(m, "norm")


def lower_l2(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    return lw.emit(qnn.L2_NORMALIZATION.build([lw.input(r.match["x"])], [lw.out_type(r)]), op).result


def l2_kernel(op: Operation, x):
    xv, y = op.operands[0], op.results[0]
    qnn_ops.prepare_once(op, lambda: qk.prepare_l2_normalization(qnn_ops.scale_of(y), qnn_ops.zero_point_of(y)))
    return qk.l2_normalization(x, input_zero_point=qnn_ops.zero_point_of(xv))


L2_NORMALIZATION = declare(QuantOp(
    qnn.L2_NORMALIZATION, OP.L2_NORMALIZATION, OpSpec((ACT,), FIXED(1.0 / 128.0, 0)),
    patterns=(QuantizerPattern("l2_normalization", unary(nn.LP_NORMALIZATION), lower_l2, check=_check_lp,
                               doc="LpNormalization(p=2) over the last axis"),
              QuantizerPattern("l2_normalization_written_out", _WRITTEN_OUT, lower_l2, check=_check_written_out,
                               priority=-1, doc="x / sqrt(ReduceSum(x·x)) and its variants (module docstring)")),
    kernel=l2_kernel, qdq_ops=(nn.LP_NORMALIZATION,),
    doc="LiteRT L2_NORMALIZATION (integer inverse square root); output (1/128, 0)"))


# -- LOG_SOFTMAX -------------------------------------------------------------------------------------

def _check_log_softmax(m: Match) -> str | None:
    op = m.ops["op"]
    if not _last_axis(op, op.attr("axis")):
        return "only LogSoftmax over the last axis is quantized (LiteRT LOG_SOFTMAX)"
    n = op.operands[0].type.shape[-1]
    if n is None or n > LOG_SOFTMAX_MAX_ROW:
        return (f"LogSoftmax over rows of {'unknown length' if n is None else n}: LiteRT's int8 LOG_SOFTMAX "
                f"sums the exponentials in Q12.19, which overflows on rows of 4096 values at the maximum, so "
                f"only rows of at most {LOG_SOFTMAX_MAX_ROW} are quantized")
    return None


def log_softmax_scale_limit(op: Operation) -> str | None:
    """LOG_SOFTMAX's Prepare needs input scale · 2**26 above 1; LiteRT's reference kernel aborts otherwise."""
    t = op.operands[0].type
    q = t.element_type if isinstance(t, TensorType) else None
    if not isinstance(q, UniformQuantizedType) or float(np.float32(q.scale)) * 2.0 ** 26 > 1.0:
        return None
    return (f"input scale × 2**26 must be above 1, found input scale {q.scale:g}: LiteRT's LOG_SOFTMAX aborts "
            f"the process on it")


def lower_log_softmax(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    return lw.emit(qnn.LOG_SOFTMAX.build([lw.input(r.match["x"])], [lw.out_type(r)]), op).result


def log_softmax_kernel(op: Operation, x):
    """BUILTIN_REF's fixed-point kernel (the default resolver's float table differs by one step at times)."""
    xv, y = op.operands[0], op.results[0]
    p = qnn_ops.prepare_once(op, lambda: qk.prepare_log_softmax(qnn_ops.scale_of(xv), qnn_ops.scale_of(y),
                                                                qnn_ops.zero_point_of(y)))
    return qk.log_softmax(x, **p.as_kwargs())


LOG_SOFTMAX = declare(QuantOp(
    qnn.LOG_SOFTMAX, OP.LOG_SOFTMAX, OpSpec((ACT,), FIXED(16.0 / 256.0, 127)),
    patterns=(QuantizerPattern("log_softmax", unary(nn.LOG_SOFTMAX), lower_log_softmax, check=_check_log_softmax),),
    kernel=log_softmax_kernel, ir_limits=(log_softmax_scale_limit,), qdq_ops=(nn.LOG_SOFTMAX,),
    doc="LiteRT LOG_SOFTMAX, BUILTIN_REF's fixed point; output (16/256, 127)"))
