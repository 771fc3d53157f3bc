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
from ...rewrite import Match, NamedOps, Pat, Rule
from ...runtime import qkernels as qk
from ...runtime.kernels import qnn_ops
from ...numerics import quantize_tflite
from ...types import FloatType, IntegerType, TensorType, UniformQuantizedType
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, constant_array, rank, unary
from ..rules import ACT, FIXED, OpSpec
from .activation import lower_unary
from .registry import QuantOp, declare, declare_expansion

MIN_INPUT_SCALE = 1e-4
OUTPUT_STEP = 1.0 / 128.0
# (where the epsilon sits, its op) -> the largest epsilon accepted (see the table above)
EPSILON_LIMITS = {("norm", "max"): MIN_INPUT_SCALE, ("sum", "max"): MIN_INPUT_SCALE ** 2,
                  ("norm", "add"): MIN_INPUT_SCALE * OUTPUT_STEP, ("sum", "add"): MIN_INPUT_SCALE ** 2 / 64.0}
F32 = FloatType("f32")
# LayerNorm's epsilon, dropped by the L2_NORMALIZATION form (LiteRT's kernel has none): it scales a row by
# sqrt(var / (var + eps)), under half an output step (1/256 of the unit row) while var > 128·eps, so for
# eps = 1e-5 rows of variance above 1.3e-3 (the recognizers' smallest row variance is 0.09)
L2_FORM_MAX_EPSILON = 1e-5
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


# -- RSQRT --------------------------------------------------------------------------------------------
# 1/sqrt(v) as Reciprocal(Sqrt(v)) (what the LayerNorm expansions below write) or Pow(v, -0.5).

_RSQRT = Pat.alt(Pat.op(nn.UNARY["reciprocal"], Pat.op(nn.UNARY["sqrt"], _X, name="sqrt").one_use(), name="op"),
                 Pat.op(nn.BINARY["pow"], _X, Pat.const("minus_half"), name="op"))


def _check_rsqrt(m: Match) -> str | None:
    if "minus_half" in m.consts and _scalar(m, "minus_half") != -0.5:
        return f"not 1/sqrt: the exponent is {np.asarray(m.consts['minus_half']).ravel()[:4].tolist()}, not -0.5"
    return None


def rsqrt_input_range(region: Region, ranges: list[tuple[float, float]], _output=None) -> str | None:
    """LiteRT's RSQRT fails the invocation on a value below the input zero point (a negative real value)."""
    lo = ranges[0][0] if ranges else 0.0
    if lo < 0.0:
        return (f"RSQRT's input was calibrated down to {lo:g}: LiteRT's int8 RSQRT fails on negative values, "
                f"so only a non-negative input (a variance plus epsilon) is quantized")
    return None


# LiteRT's int16 RSQRT interpolates one 513-entry table over [-amax, amax]: where the variances of a
# LayerNorm's rows span 1000x (all-MiniLM-L6-v2's third block: 0.02 to 30), the small ones fall
# between entries 0.12 wide and 1/sqrt comes out 16% off (measured; 0.08% median). The 16x8
# lowering therefore refines the table's y with Newton steps for 1/sqrt,
#     y <- y · (1.5 - 0.5 · v · y²)      (relative error e -> about 1.5·e²: 16% -> 3.8% -> 0.2%)
# as int16 MUL, MUL, MUL, SUB, MUL on the per-row tensor (a few values per row: cheap). Their
# ranges follow from the RSQRT's: v·y ~ sqrt(v), v·y² ~ 1. int8 RSQRT tabulates each of its 256
# inputs exactly, so it needs none.
NEWTON_STEPS = 2
_NEWTON_MARGIN = 1.5    # how far past its value a refined quantity's range reaches (the table's error)


def _wide(shape, amax: float) -> TensorType:
    """An int16 symmetric type for ``[-amax, amax]`` of ``shape``."""
    scale = float(np.float32(max(amax, 1e-30) / 32767.0))
    return TensorType(shape, UniformQuantizedType(storage_type=IntegerType(16), expressed_type=F32,
                                                            scale=scale, zero_point=0))


def _wide_constant(lw: Lowerer, value: float, name: str) -> Value:
    t = _wide((), abs(value))
    ints = quantize_tflite(np.float32(value), np.float32(t.element_type.scale), 0, -32768, 32767)
    c = lw.stored_constant(ints, IntegerType(16), t)
    c.name_hint = name
    return c


def lower_rsqrt(lw: Lowerer, r: Region) -> Value:
    y = lower_unary(qnn.RSQRT)(lw, r)
    if lw.bits != 16:
        return y
    v = y.op.operands[0]
    out_t = y.type
    base = r.output.name_hint or "rsqrt"
    v_hi = max(float(lw.params[r.match["x"]].rmax), 0.0)
    y_hi = float(out_t.element_type.scale) * 32767.0
    half, three_halves = _wide_constant(lw, 0.5, f"{base}.half"), _wide_constant(lw, 1.5, f"{base}.three_halves")

    def mul(a: Value, b: Value, t: TensorType, what: str) -> Value:
        out = lw.emit(qnn.MUL.build([a, b], [t], activation="NONE"), r.match.ops["op"]).result
        out.name_hint = f"{base}.{what}"
        return out
    for step in range(NEWTON_STEPS):
        shape = y.type.shape
        b = mul(v, y, _wide(shape, float(np.sqrt(v_hi)) * _NEWTON_MARGIN), f"newton{step}.vy")    # ~ sqrt(v)
        t = mul(b, y, _wide(shape, _NEWTON_MARGIN ** 2), f"newton{step}.vyy")                     # ~ 1
        h = mul(t, half, _wide(shape, _NEWTON_MARGIN ** 2 / 2), f"newton{step}.half_vyy")
        u = lw.emit(qnn.SUB.build([three_halves, h], [_wide(shape, 1.5)], activation="NONE"),
                    r.match.ops["op"]).result
        u.name_hint = f"{base}.newton{step}.factor"
        y = mul(y, u, out_t if step == NEWTON_STEPS - 1 else _wide(shape, y_hi), f"newton{step}")
    return y


RSQRT = declare(QuantOp(
    qnn.RSQRT, OP.RSQRT, OpSpec((ACT,), ACT),
    patterns=(QuantizerPattern("rsqrt", _RSQRT, lower_rsqrt, check=_check_rsqrt, priority=-1,
                               doc="Reciprocal(Sqrt(v)) or Pow(v, -0.5)"),),
    kernel=qnn_ops.rsqrt, calibrated_check=rsqrt_input_range, int16=True,
    qdq_ops=(nn.UNARY["sqrt"], nn.UNARY["reciprocal"]),
    doc="LiteRT RSQRT (integer inverse square root of v - zp, one multiplier)"))


# -- LayerNorm: no LiteRT builtin, so an expansion ------------------------------------------------------
# LayerNorm, written out by exporters (Paddle, PyTorch before opset 17) as
#     d = x - ReduceMean(x);  y = d / Sqrt(ReduceMean(Pow(d, 2)) + eps)   [· gamma + beta]
# or as the ONNX LayerNormalization op, becomes, before calibration,
#     MEAN, SUB, BATCH_MATMUL(d, dᵀ) per row, ADD C·eps, RSQRT, MUL(d, ·)   [MUL gamma·sqrt(C), ADD beta]
# (over another axis than the last: MUL(d, d), MEAN for the variance). Every interior value (the
# mean, d, the sum of squares, + eps, its 1/sqrt, the normalized row) is a value of the float graph:
# observed, with its own int8 parameters.
#
# Why (docs/numerics.md §2.22): d is reused, which the numerator needs anyway; 1/sqrt as one RSQRT
# keeps the division out of int8 (LiteRT has no int8 DIV). The variance first was the MEAN of
# MUL(d, d): every square rounded to one int8 scale, so where the rows' variances differ by 120-160x
# (PP-OCRv6 small rec's later blocks, BERT's [CLS]/[SEP] rows) the small rows fell to 4-7 dB. The
# BATCH_MATMUL accumulates the exact products of the stored integers instead (see _normalize).
# Config(layer_norm="l2") writes MEAN, SUB, L2_NORMALIZATION, MUL sqrt(C) (LiteRT normalizes each
# row with its own integer inverse square root): end to end on PP-OCRv6 small rec it measured 90%
# CTC strings equal to fp32 against 92% for the BATCH_MATMUL form (64% for the old MUL form).

_LN_X = Pat.any("x")
_LN_CENTERED = Pat.op(nn.SUB, _LN_X, Pat.op(nn.REDUCE_MEAN, _LN_X, name="mean").one_use(), name="centered")
_LN_SQUARE = Pat.alt(Pat.op(nn.BINARY["pow"], _LN_CENTERED, Pat.const("two"), name="square"),
                     Pat.op(nn.MUL, _LN_CENTERED, _LN_CENTERED, name="square"))
_LN_VARIANCE = _with_epsilon(Pat.op(nn.REDUCE_MEAN, _LN_SQUARE.one_use(), name="variance"), "variance")
_LN_WRITTEN = Pat.op(nn.DIV, _LN_CENTERED, Pat.op(nn.UNARY["sqrt"], _LN_VARIANCE.one_use(), name="sqrt").one_use(),
                     name="op")


def _reduced(op: Operation) -> tuple[tuple[int, ...], bool] | None:
    r = rank(op.operands[0])
    if r is None:
        return None
    axes = op.attr("axes")
    keep = op.attr("keepdims")
    return (tuple(sorted(int(a) % r for a in axes)) if axes else tuple(range(r))), keep is None or bool(keep)


def _check_layer_norm_written(m: Match) -> str | None:
    x = m.values["x"]
    if getattr(x.type, "element_type", None) != F32:
        return f"LayerNorm on {x.type} is not float32"
    mean, variance = _reduced(m.ops["mean"]), _reduced(m.ops["variance"])
    if mean is None or variance is None:
        return "the normalized tensor must be ranked"
    if mean != variance or not mean[1]:
        return (f"not LayerNorm: the mean is taken over axes {list(mean[0])} and the variance over "
                f"{list(variance[0])} (both must be the same, kept)")
    if "two" in m.consts and _scalar(m, "two") != 2.0:
        return f"not LayerNorm: the exponent is {np.asarray(m.consts['two']).ravel()[:4].tolist()}, not 2"
    eps_op = m.ops.get("eps_variance")
    if eps_op is not None and eps_op.opdef is not nn.ADD:
        return "the variance's epsilon is a floor (Max/Clip), not LayerNorm's added epsilon"
    eps = _scalar(m, "eps_variance_value") if eps_op is not None else 0.0
    if eps is None or not eps >= 0.0:
        return "the epsilon of the variance must be one non-negative constant"
    return None


def _check_layer_norm_op(m: Match) -> str | None:
    op, x = m.ops["op"], m.values["x"]
    if len(op.results) != 1:
        return "LayerNormalization's mean and inverse-std-dev results are used: kept whole"
    if getattr(x.type, "element_type", None) != F32 or rank(x) is None:
        return f"LayerNormalization on {x.type} is not a ranked float32 tensor"
    return None


def _normalize(b: NamedOps, x: Value, axes: tuple[int, ...], eps: float, stats: TensorType,
               l2: bool) -> tuple[Value, float]:
    """The normalized rows and the factor still to multiply them by (folded into gamma when there is one).

    ``l2`` and over the last axis only (LiteRT L2_NORMALIZATION's axis): MEAN, SUB, L2_NORMALIZATION, factor
    ``sqrt(C)``, since ``d / sqrt(mean(d²)) = sqrt(C) · d / ||d||``. Otherwise ``(x - mean) ·
    rsqrt(mean((x - mean)²) + eps)`` as MEAN, SUB, MUL, MEAN, ADD, Reciprocal(Sqrt) (one RSQRT) and
    MUL, factor 1."""
    reduce = dict(axes=axes, keepdims=1)
    mean = b.op(nn.REDUCE_MEAN, [x], stats, "mean", **reduce)
    centered = b.op(nn.SUB, [x, mean], x.type, "centered")
    r = rank(x)
    channels = x.type.shape[-1] if r else None
    if l2 and axes == (r - 1,) and channels and eps <= L2_FORM_MAX_EPSILON:
        return b.op(nn.LP_NORMALIZATION, [centered], x.type, "l2_normalized", axis=-1, p=2), float(np.sqrt(channels))
    if axes == (r - 1,) and channels and x.type.shape is not None:
        # each row's sum of squares as the row times itself (BATCH_MATMUL [.., 1, C] x [.., C, 1]):
        # the kernel accumulates the exact products of the stored integers, where MUL(d, d) would
        # first round every square to one scale for all rows (a row 100x the others' magnitude,
        # as the [CLS]/[SEP] rows of BERT's residual stream, leaves the small squares a few steps).
        # rsqrt(Σd² + C·eps) · sqrt(C) = rsqrt(mean(d²) + eps): the factor goes into gamma.
        shape = tuple(x.type.shape)
        row = b.op(nn.UNSQUEEZE, [centered], TensorType(shape[:-1] + (1, channels), x.type.element_type),
                   "row", axes=(r - 1,))
        column = b.op(nn.UNSQUEEZE, [centered], TensorType(shape + (1,), x.type.element_type),
                      "column", axes=(r,))
        squares = b.op(nn.MATMUL, [row, column], TensorType(shape[:-1] + (1, 1), x.type.element_type),
                       "sum_of_squares")
        variance = b.op(nn.SQUEEZE, [squares], stats, "sum_of_squares_row", axes=(r,))
        factor, eps = float(np.sqrt(channels)), eps * channels
    else:
        square = b.op(nn.MUL, [centered, centered], x.type, "square")
        variance = b.op(nn.REDUCE_MEAN, [square], stats, "variance", **reduce)
        factor = 1.0
    if eps:
        variance = b.op(nn.ADD, [variance, b.constant(eps, "epsilon")], variance.type, "variance_eps")
    root = b.op(nn.UNARY["sqrt"], [variance], variance.type, "sqrt")
    inverse = b.op(nn.UNARY["reciprocal"], [root], variance.type, "rsqrt")
    return b.op(nn.MUL, [centered, inverse], x.type, "normalized"), factor


def _expand_layer_norm_written(rw, m: Match, l2: bool = False) -> list[Value]:
    op, x = m.ops["op"], m.values["x"]
    axes, _ = _reduced(m.ops["mean"])
    eps = _scalar(m, "eps_variance_value") if m.ops.get("eps_variance") is not None else 0.0
    b = NamedOps(rw, op, "layer_norm")
    y, factor = _normalize(b, x, axes, float(eps), m.ops["mean"].results[0].type, l2)
    if factor != 1.0:
        y = b.op(nn.MUL, [y, b.constant(factor, "sqrt_channels")], x.type, "normalized")
    return [y]


def _expand_layer_norm_op(rw, m: Match, l2: bool = False) -> list[Value]:
    op, x = m.ops["op"], m.values["x"]
    r = rank(x)
    axes = tuple(range(op.attr("axis") % r, r))
    stats = TensorType(tuple(1 if i in axes else d for i, d in enumerate(x.type.shape)), x.type.element_type)
    b = NamedOps(rw, op, "layer_norm")
    y, factor = _normalize(b, x, axes, float(np.float32(op.attr("epsilon"))), stats, l2)
    gamma = op.operands[1]
    if factor != 1.0:
        g = constant_array(gamma)
        gamma = b.constant(g * factor, "gamma_sqrt_channels") if g is not None else \
            b.op(nn.MUL, [gamma, b.constant(factor, "sqrt_channels")], gamma.type, "gamma_sqrt_channels")
    y = b.op(nn.MUL, [y, gamma], op.results[0].type, "scaled")
    if len(op.operands) > 2 and op.operands[2] is not None:
        y = b.op(nn.ADD, [y, op.operands[2]], op.results[0].type, "shifted")
    y.name_hint = op.results[0].name_hint
    return [y]


LAYER_NORM_WRITTEN = declare_expansion(Rule(
    "layer_norm_written", _LN_WRITTEN, _expand_layer_norm_written, check=_check_layer_norm_written,
    doc="ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div -> MEAN, SUB, MUL, MEAN, ADD, RSQRT, MUL"))

LAYER_NORM = declare_expansion(Rule(
    "layer_norm", Pat.op(nn.LAYER_NORMALIZATION, _LN_X, Pat.any("scale"), Pat.any("bias").optional(), name="op"),
    _expand_layer_norm_op, check=_check_layer_norm_op,
    doc="LayerNormalization -> MEAN, SUB, MUL, MEAN, ADD, RSQRT, MUL, MUL gamma, ADD beta"))

LAYER_NORM_WRITTEN_L2 = declare_expansion(Rule(
    "layer_norm_written_l2", _LN_WRITTEN, lambda rw, m: _expand_layer_norm_written(rw, m, l2=True),
    check=_check_layer_norm_written,
    doc="ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div -> MEAN, SUB, L2_NORMALIZATION, MUL sqrt(C)"))

LAYER_NORM_L2 = declare_expansion(Rule(
    "layer_norm_l2", LAYER_NORM.pattern, lambda rw, m: _expand_layer_norm_op(rw, m, l2=True),
    check=_check_layer_norm_op, doc="LayerNormalization -> MEAN, SUB, L2_NORMALIZATION, MUL gamma·sqrt(C), ADD beta"))

# Config.layer_norm -> the expansions that form leaves out
LAYER_NORM_UNUSED = {"rsqrt": (LAYER_NORM_WRITTEN_L2.name, LAYER_NORM_L2.name),
                     "l2": (LAYER_NORM_WRITTEN.name, LAYER_NORM.name)}
