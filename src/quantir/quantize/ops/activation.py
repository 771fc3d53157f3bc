"""Activations and casts on one int8 tensor.

- Fixed-output ops: SOFTMAX, LOGISTIC (1/256, -128) and TANH (1/128, 0); their kernels are
  lookup tables (LOGISTIC, TANH) or LiteRT's fixed-point exp (SOFTMAX).
- HARD_SWISH (int16 fixed point; in 16x8 ADD, MUL, MUL: LiteRT has no int16 HARD_SWISH), LEAKY_RELU
  (two multipliers) and the standalone clamps RELU / RELU6 / RELU_N1_TO_1 (``qnn.clamp``), which
  rescale when their parameters differ.
- QUANTIZE: ``qnn.requantize`` (int8 -> int8) and ``quant.qcast`` (float -> int8).
"""
from __future__ import annotations

import numpy as np

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn, quant
from ...rewrite import Match, NamedOps, Pat, Rewriter, Rule
from ...runtime import qkernels as qk
from ...runtime.kernels import qnn_ops
from ...types import FloatType, IntegerType, TensorType, UniformQuantizedType
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, clip_fusable, commutative, rank, unary
from ..rules import ACT, ANY, FIXED, OpSpec, QuantizedOp
from ..views import qparams_of
from .registry import QuantOp, SolverRules, declare, declare_expansion

F32 = FloatType("f32")


def lower_unary(opdef, **fixed_attrs):
    """One float op -> ``opdef`` on its quantized input, with the attributes both ops name."""
    def lower(lw: Lowerer, r: Region) -> Value:
        op = r.match.ops.get("op") or r.match.ops["act"]
        attrs = {k: op.attr(k) for k in opdef.attributes if k in op.opdef.attributes}
        attrs.update(fixed_attrs)
        if opdef is qnn.CLAMP:
            attrs["activation"] = r.activation
        return lw.emit(opdef.build([lw.input(r.match["x"])], [lw.out_type(r)], **attrs), op).result
    return lower


# -- SOFTMAX ------------------------------------------------------------------------------------------

def _check_softmax(m: Match) -> str | None:
    op = m.ops["op"]
    r = rank(op.operands[0])
    if r is None or op.attr("axis") not in (-1, r - 1):
        return "only softmax over the last axis is quantized (LiteRT SOFTMAX)"
    return None


def softmax_beta_limit(op: Operation) -> str | None:
    """SOFTMAX's Prepare needs beta · input scale · 2**26 above 1; LiteRT aborts the process otherwise."""
    x = op.operands[0].type
    q = x.element_type if isinstance(x, TensorType) else None
    if not isinstance(q, UniformQuantizedType):
        return None
    beta = float(np.float32(op.attr("beta")))
    real = beta * float(np.float32(q.scale)) * 2.0 ** 26
    if real > 1.0:
        return None
    return (f"beta × input scale × 2**26 must be above 1, found beta {beta:g} and input scale {q.scale:g}: LiteRT's "
            f"SOFTMAX aborts the process on it and quantir cannot run it (a softmax has beta 1)")


SOFTMAX = declare(QuantOp(
    qnn.SOFTMAX, OP.SOFTMAX, OpSpec((ACT,), FIXED(1.0 / 256.0, -128), scale_rtol=1e-3),
    patterns=(QuantizerPattern("softmax", unary(nn.SOFTMAX), lower_unary(qnn.SOFTMAX), check=_check_softmax),),
    kernel=qnn_ops.softmax, ir_limits=(softmax_beta_limit,), qdq_ops=(nn.SOFTMAX,),
    int16=True, int16_fixed=(1.0 / 32768.0, 0)))

# LOGISTIC's int8 output (1/256, -128) is 0 for every input below -LOGISTIC_SATURATES (σ(-6.5)·256
# = 0.38 rounds to step 0) and 255/256 above it (σ(6.5)·256 = 255.6 saturates at 127): a value
# read only by sigmoids is quantized over [-6.5, 6.5], so a score head's logits (mostly far
# below -6.5 on background cells) spend their int8 steps near the decision thresholds.
LOGISTIC_SATURATES = 6.5


def logistic_input_range(lo: float, hi: float) -> tuple[float, float]:
    t = LOGISTIC_SATURATES
    return min(max(lo, -t), t), max(min(hi, t), -t)


LOGISTIC = declare(QuantOp(
    qnn.LOGISTIC, OP.LOGISTIC, OpSpec((ACT,), FIXED(1.0 / 256.0, -128)),
    patterns=(QuantizerPattern("sigmoid", unary(nn.UNARY["sigmoid"]), lower_unary(qnn.LOGISTIC)),),
    kernel=qnn_ops.table(qk.prepare_logistic, qk.logistic), qdq_ops=(nn.UNARY["sigmoid"],),
    solver=SolverRules(input_range=logistic_input_range), int16=True, int16_fixed=(1.0 / 32768.0, 0)))


# SiLU / Swish written out, x·σ(x), is LOGISTIC then MUL of x by its gate. Below SILU_FLOOR the
# gate is exactly 0 in int8, so the MUL gives exactly 0 whatever x is there: x's range is cut at
# SILU_FLOOR (only below: x·σ(x) follows x upwards) and the negative tail a conv output carries
# (YOLO necks reach -50) stops coarsening the step of the values that count.
SILU_FLOOR = -LOGISTIC_SATURATES


def silu_input_range(lo: float, hi: float) -> tuple[float, float]:
    return max(lo, SILU_FLOOR), max(hi, SILU_FLOOR)


def gates_itself(v: Value) -> bool:
    """``v`` is read by exactly a sigmoid and the product of ``v`` with that sigmoid (x·σ(x))."""
    readers = [op for op, _ in v.uses]
    gate = [op for op in readers if op.opdef is nn.UNARY["sigmoid"]]
    product = [op for op in readers if op.opdef is nn.MUL]
    return (len(readers) == 2 and len(gate) == len(product) == 1
            and {id(x) for x in product[0].operands} == {id(v), id(gate[0].result)})


TANH = declare(QuantOp(
    qnn.TANH, OP.TANH, OpSpec((ACT,), FIXED(1.0 / 128.0, 0)),
    patterns=(QuantizerPattern("tanh", unary(nn.UNARY["tanh"]), lower_unary(qnn.TANH)),),
    kernel=qnn_ops.table(qk.prepare_tanh, qk.tanh), qdq_ops=(nn.UNARY["tanh"],),
    int16=True, int16_fixed=(1.0 / 32768.0, 0)))


# -- HARD_SWISH ----------------------------------------------------------------------------------------

def hard_swish_limit(op: QuantizedOp) -> str | None:
    """HARD_SWISH's Prepare takes ``s_in / (128 · s_out)`` as a multiplier below one and refuses
    the model otherwise: an output range much narrower than the input's."""
    x, y = (op.inputs[0] if op.inputs else None), (op.outputs[0] if op.outputs else None)
    if x is None or y is None or x.scale is None or y.scale is None or x.per_axis or y.per_axis:
        return None
    ratio = float(np.float32(x.scale)) / (128.0 * float(np.float32(y.scale)))
    if ratio >= 1.0:
        return (f"input scale / (128 · output scale) = {ratio:.6g} must be below 1 (LiteRT's Prepare refuses it): "
                f"the output scale must be above input scale / 128 = {float(x.scale) / 128:.6g}")
    return None


def hard_swish_range(lo: float, hi: float, input_scale: float) -> tuple[float, float]:
    """An output range much narrower than the input's (say inputs down to -1000, where
    hard-swish is 0) is widened upwards until ``s_out >= s_in / 127``: the Prepare above refuses it."""
    need = 255.0 * input_scale / 127.0
    return (lo, lo + need) if hi - lo < need else (lo, hi)


def hard_swish_input_range(lo: float, hi: float) -> tuple[float, float]:
    """Hard-swish is 0 at and below -3: an input range reaching further down (a conv output whose
    negative tail the activation discards, PP-LCNetV3's) spends int8 steps on values that all give
    0, so the range is cut at -3: every value below maps to the lowest step, which hard-swish also
    sends to 0. Measured with the default method (16 calibration / 8 evaluation rendered pages,
    320x320): PP-OCRv5 det's probability-map cosine 0.911 -> 0.957, binarized IoU 0.82 -> 0.90
    against cutting only where the step halves; the Fashion-MNIST CNNs' test accuracy is unchanged
    (the gate CNN gains 3 of 10,000 images)."""
    return (max(lo, -3.0), max(hi, -3.0))


# x·HardSigmoid(x) with HardSigmoid(1/6, ½), and x·Relu6(x + 3)/6 (older PyTorch exports): hard-swish
_HS_X = Pat.any("x")
_HS_SIGMOID = Pat.op(nn.UNARY["hard_sigmoid"], _HS_X, name="gate").one_use()
_HS_RELU6 = Pat.op(nn.CLIP, commutative(nn.ADD, _HS_X, Pat.const("three"), "shift").one_use(), name="gate").one_use()
_HS_GATED = commutative(nn.MUL, _HS_X, _HS_RELU6, "product").one_use()
_HARD_SWISH_WRITTEN = Pat.alt(
    commutative(nn.MUL, _HS_X, _HS_SIGMOID, "op"),
    Pat.op(nn.DIV, _HS_GATED, Pat.const("six"), name="op"),
    commutative(nn.MUL, _HS_GATED, Pat.const("sixth"), "op"))


def _close_to(array, want: float) -> bool:
    a = np.asarray(array, np.float64)
    return a.size == 1 and bool(np.isclose(float(a.reshape(())), want, rtol=1e-5, atol=0))


def _check_hard_swish_written(m: Match) -> str | None:
    gate = m.ops["gate"]
    if gate.opdef is nn.CLIP:
        if (gate.attr("min"), gate.attr("max")) != (0.0, 6.0) or not _close_to(m.consts["three"], 3.0):
            return "not hard-swish: the gate is not Relu6(x + 3)"
        if "six" in m.consts and not _close_to(m.consts["six"], 6.0) or \
                "sixth" in m.consts and not _close_to(m.consts["sixth"], 1.0 / 6.0):
            return "not hard-swish: the product is not divided by 6"
    elif not (_close_to(gate.attr("alpha"), 1.0 / 6.0) and _close_to(gate.attr("beta"), 0.5)):
        return (f"not hard-swish: HardSigmoid({gate.attr('alpha'):g}, {gate.attr('beta'):g}) is not "
                f"HardSigmoid(1/6, 0.5)")
    return None


# LiteRT 2.3 has no int16 HARD_SWISH (Invoke: "Only float32, uint8 and int8 are supported",
# under BUILTIN_REF and the default resolver alike). In 16x8 the lowering writes three ops that
# do have 16x8 kernels (docs/numerics.md §2.25):
#     t = ADD(x, 3) with RELU6   t in [0, 6] at 6/32767: relu6(x + 3)
#     g = MUL(t, 1/6)            g in [0, 1] at 1/32767: the multiplier is 1, so g's integers are t's
#     y = MUL(x, g)              at the HardSwish's output parameters: x·relu6(x + 3)/6, one rounding
# t's range is known a priori, and 6/32767 is never a power of two: LiteRT always takes its
# general int16 ADD, which broadcasts the scalar 3 (a power-of-two t scale would let a power-of-
# two x scale select the POT kernel, which refuses to broadcast). 3 is stored as 24576 at 2**-13
# (exact), 1/6 as 32767 at f32(1/6)/32767. The gate's one rounding (half a step of 1/32767)
# times |x| <= 3 adds at most 1.5/32767 to the output's half step: max error
#     0.5 + 0.5·min(3, max|x|) / (32767·s_y)  output steps
# (measured over all 65,536 int16 inputs: 0.64 steps at x, y in ±10, 1.0 at ±3; tests/quantize/
# test_int16_hard_swish.py). The middle MUL only relabels t; it is the price of each value
# having one type (ADD preserves real values, so 1/6 cannot ride on its output scale).
HARD_SWISH_GATE_SCALE = 1.0 / 32767.0          # g = relu6(x + 3)/6 in [0, 1]
HARD_SWISH_SHIFTED_SCALE = 6.0 / 32767.0       # t = relu6(x + 3) in [0, 6]
HARD_SWISH_THREE = (24576, 2.0 ** -13)         # 3, exactly
HARD_SWISH_SIXTH_SCALE = float(np.float32(np.float32(1.0 / 6.0) / np.float32(32767.0)))   # 1/6 as 32767


def _int16_type(shape, scale: float) -> TensorType:
    return TensorType(shape, UniformQuantizedType(storage_type=IntegerType(16), expressed_type=F32,
                                                  scale=float(np.float32(scale)), zero_point=0))


def _int16_constant(lw: Lowerer, q: int, scale: float, name: str) -> Value:
    c = lw.stored_constant(np.array(q, np.int16), IntegerType(16), _int16_type((), scale))
    c.name_hint = name
    return c


def lower_hard_swish(lw: Lowerer, r: Region) -> Value:
    """int8: the one HARD_SWISH. int16 (``lw.bits == 16``): ADD(x, 3) with RELU6, MUL by 1/6, MUL by x
    (see above)."""
    if lw.bits != 16:
        return lower_unary(qnn.HARD_SWISH)(lw, r)
    op = r.match.ops["op"]
    x, out_t = lw.input(r.match["x"]), lw.out_type(r)
    base = r.output.name_hint or "hard_swish"
    shape = out_t.shape

    def emit(opdef, a: Value, b: Value, t: TensorType, activation: str = "NONE") -> Value:
        return lw.emit(opdef.build([a, b], [t], activation=activation), op).result
    three = _int16_constant(lw, HARD_SWISH_THREE[0], HARD_SWISH_THREE[1], f"{base}.three")
    sixth = _int16_constant(lw, 32767, HARD_SWISH_SIXTH_SCALE, f"{base}.sixth")
    shifted = emit(qnn.ADD, x, three, _int16_type(shape, HARD_SWISH_SHIFTED_SCALE), "RELU6")
    shifted.name_hint = f"{base}.relu6_x_plus_3"
    gate = emit(qnn.MUL, shifted, sixth, _int16_type(shape, HARD_SWISH_GATE_SCALE))
    gate.name_hint = f"{base}.gate"
    return emit(qnn.MUL, x, gate, out_t)   # named by lower_region


HARD_SWISH = declare(QuantOp(
    qnn.HARD_SWISH, OP.HARD_SWISH, OpSpec((ACT,), ACT, limits=(hard_swish_limit,)),
    patterns=(QuantizerPattern("hard_swish", unary(nn.UNARY["hard_swish"]), lower_hard_swish),
              QuantizerPattern("hard_swish_written", _HARD_SWISH_WRITTEN, lower_hard_swish,
                               check=_check_hard_swish_written, priority=-1,
                               doc="x·HardSigmoid(x) (1/6, ½) or x·Relu6(x + 3)/6 written out")),
    kernel=qnn_ops.hard_swish, solver=SolverRules(output_range=hard_swish_range, input_range=hard_swish_input_range),
    qdq_ops=(nn.UNARY["hard_swish"],), int16=True, int16_builtin=False,
    doc="LiteRT HARD_SWISH (int8); in 16x8 ADD(x, 3) RELU6, MUL 1/6, MUL x (no int16 HARD_SWISH in LiteRT)"))


# -- LEAKY_RELU and the clamps ---------------------------------------------------------------------------

def leaky_alpha_limit(op: Operation) -> str | None:
    alpha = float(op.attr("alpha"))
    if np.isfinite(alpha):
        return None
    return f"alpha must be finite, found {alpha}: LiteRT's multiplier is undefined with it"


LEAKY_RELU = declare(QuantOp(
    qnn.LEAKY_RELU, OP.LEAKY_RELU, OpSpec((ACT,), ACT),
    patterns=(QuantizerPattern("leaky_relu", unary(nn.UNARY["leaky_relu"]), lower_unary(qnn.LEAKY_RELU)),),
    kernel=qnn_ops.leaky_relu, ir_limits=(leaky_alpha_limit,), qdq_ops=(nn.UNARY["leaky_relu"],), int16=True))

CLAMP = declare(QuantOp(
    qnn.CLAMP, OP.RELU, OpSpec((ACT,), ACT),
    patterns=(QuantizerPattern("relu", Pat.op([nn.RELU, nn.CLIP], Pat.any("x"), name="act"),
                               lower_unary(qnn.CLAMP), check=clip_fusable, priority=1,
                               doc="a Relu/Clip that no conv, FC or add absorbed"),),
    kernel=qnn_ops.clamp,
    rows={OP.RELU6: OpSpec((ACT,), ACT), OP.RELU_N1_TO_1: OpSpec((ACT,), ACT)},
    doc="RELU, RELU6, RELU_N1_TO_1 (by its activation), or a plain rescale"))


# -- QUANTIZE ------------------------------------------------------------------------------------------

REQUANTIZE = declare(QuantOp(
    qnn.REQUANTIZE, OP.QUANTIZE, OpSpec((ANY,), ACT), kernel=qnn_ops.requantize, int16=True,
    doc="int8 -> int8 with other parameters: one fixed-point multiply"))


def _qcast_view(op: Operation) -> QuantizedOp:
    return QuantizedOp("QUANTIZE", op.label or op.name, (None,), tuple(qparams_of(r) for r in op.results))


QCAST = declare(QuantOp(
    quant.QCAST, OP.QUANTIZE, OpSpec((ANY,), ACT), view=_qcast_view, int16=True,
    doc="float -> int8 (LiteRT's QUANTIZE rounding); its kernel is the quant dialect's"))


# -- GELU ----------------------------------------------------------------------------------------------
# ONNX Gelu (opset 20), and the arithmetic exporters write for it (PyTorch before opset 20,
# Hugging Face): x·½·(1 + erf(x/√2)) and x·½·(1 + tanh(√(2/π)·(x + 0.044715·x³))), in either
# association and operand order. The whole subgraph is one region and becomes one lookup table;
# its inputs and output are the graph's own x and final product, so calibration observes them.

_X = Pat.any("x")


def _scaled_x(c: str) -> Pat:
    """``x / c`` or ``x · c`` (which constant is checked by the pattern's check)."""
    return Pat.alt(Pat.op(nn.DIV, _X, Pat.const(c), name="scale"), commutative(nn.MUL, _X, Pat.const(c), "scale"))


def _half_x_times(inner: Pat) -> Pat:
    """``(x · inner) · ½`` or ``(x · ½) · inner`` or ``x · (inner · ½)``, in any operand order."""
    half = Pat.const("half")
    return Pat.alt(
        commutative(nn.MUL, commutative(nn.MUL, _X, inner, "product").one_use(), half, "op"),
        commutative(nn.MUL, commutative(nn.MUL, _X, half, "product").one_use(), inner, "op"),
        commutative(nn.MUL, _X, commutative(nn.MUL, inner, half, "product").one_use(), "op"))


def _one_plus(f: Pat) -> Pat:
    return commutative(nn.ADD, f.one_use(), Pat.const("one"), "one_plus").one_use()


# every op of a pattern is named: a region claims exactly its named ops
_ERF_GELU = _half_x_times(_one_plus(Pat.op(nn.UNARY["erf"], _scaled_x("erf_scale").one_use(), name="f")))
_CUBE = Pat.alt(Pat.op(nn.BINARY["pow"], _X, Pat.const("three"), name="cube"),
                commutative(nn.MUL, _X, commutative(nn.MUL, _X, _X, "square").one_use(), "cube"))
_INNER = commutative(nn.ADD, _X, commutative(nn.MUL, _CUBE.one_use(), Pat.const("cubic"), "cubic_term").one_use(),
                      "inner")
_TANH_GELU = _half_x_times(_one_plus(Pat.op(
    nn.UNARY["tanh"], commutative(nn.MUL, _INNER.one_use(), Pat.const("tanh_scale"), "scaled").one_use(), name="f")))
_EXPECTED = {"half": 0.5, "one": 1.0, "three": 3.0, "cubic": 0.044715, "tanh_scale": float(np.sqrt(2.0 / np.pi))}


def _constant_is(m: Match, name: str, want: float) -> str | None:
    c = m.consts.get(name)
    if c is None:
        return None
    if c.size != 1 or not np.isclose(float(np.asarray(c, np.float64).reshape(())), want, rtol=1e-5, atol=0):
        return f"the constant {name.replace('_', ' ')} is {np.asarray(c).ravel()[:4].tolist()}, GELU's is {want:.8g}"
    return None


def _check_gelu_arithmetic(m: Match) -> str | None:
    for name, want in _EXPECTED.items():
        message = _constant_is(m, name, want)
        if message:
            return f"not GELU: {message}"
    if "erf_scale" in m.consts:   # x / √2 or x · (1/√2)
        want = float(np.sqrt(2.0)) if m.ops["scale"].opdef is nn.DIV else float(1.0 / np.sqrt(2.0))
        message = _constant_is(m, "erf_scale", want)
        if message:
            return f"not GELU: {message}"
    return None


def lower_gelu(approximate: bool | None = None):
    """``qnn.gelu``; ``approximate`` None: from the matched ONNX Gelu's attribute."""
    def lower(lw: Lowerer, r: Region) -> Value:
        op = r.match.ops["op"]
        tanh = approximate if approximate is not None else op.attr("approximate") == "tanh"
        return lw.emit(qnn.GELU.build([lw.input(r.match["x"])], [lw.out_type(r)], approximate=tanh), op).result
    return lower


GELU = declare(QuantOp(
    qnn.GELU, OP.GELU, OpSpec((ACT,), ACT),
    patterns=(QuantizerPattern("gelu", unary(nn.UNARY["gelu"]), lower_gelu(), doc="ONNX Gelu (none or tanh)"),
              QuantizerPattern("gelu_erf", _ERF_GELU, lower_gelu(False), check=_check_gelu_arithmetic, priority=-1,
                               doc="x·½·(1 + erf(x/√2)) written out"),
              QuantizerPattern("gelu_tanh", _TANH_GELU, lower_gelu(True), check=_check_gelu_arithmetic,
                               priority=-1, doc="x·½·(1 + tanh(√(2/π)·(x + 0.044715·x³))) written out")),
    kernel=qnn_ops.gelu, qdq_ops=(nn.UNARY["gelu"],), int16=True,
    cannot={},
    doc="GELU as LiteRT's int8 lookup table"))


# -- HardSigmoid: no LiteRT builtin, so an expansion -----------------------------------------------------
# max(0, min(1, α·x + β)) becomes Clip(Add(Mul(x, α), β), 0, 1), the float32 operations ONNX Runtime
# performs: MUL by a constant, then ADD with a fused RELU (the bound 0) whose output range ends at 1,
# where the storage saturates (int8's asymmetric range and int16's symmetric one alike: 16x8 too).
# x·HardSigmoid(x) with (1/6, ½) is hard-swish: that stays whole for the pattern above.


def _check_hard_sigmoid(m: Match) -> str | None:
    op = m.ops["op"]
    users = [u for u, _ in op.results[0].uses]
    if len(users) == 1 and _check_hard_swish_written(Match(ops={"gate": op})) is None:
        user = users[0]
        if user.opdef is nn.MUL and m["x"] in user.operands:
            return "part of x·HardSigmoid(x), which is hard-swish"
    if getattr(m["x"].type, "element_type", None) != F32:
        return f"HardSigmoid on {m['x'].type} is not float32"
    return None


def _expand_hard_sigmoid(rw: Rewriter, m: Match) -> list[Value]:
    op, x = m.ops["op"], m["x"]
    t = op.results[0].type
    b = NamedOps(rw, op, "hard_sigmoid")
    scaled = b.op(nn.MUL, [x, b.constant(float(op.attr("alpha")), "alpha")], t, "scaled")
    shifted = b.op(nn.ADD, [scaled, b.constant(float(op.attr("beta")), "beta")], t, "shifted")
    return [b.op(nn.CLIP, [shifted], t, "", min=0.0, max=1.0)]


HARD_SIGMOID = declare_expansion(Rule(
    "hard_sigmoid", Pat.op(nn.UNARY["hard_sigmoid"], Pat.any("x"), name="op"), _expand_hard_sigmoid,
    check=_check_hard_sigmoid, doc="HardSigmoid -> MUL, ADD (RELU) and the clamp of the output range's saturation"))
