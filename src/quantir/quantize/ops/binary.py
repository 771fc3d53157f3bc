"""Element-wise arithmetic on two int8 tensors: LiteRT ADD, SUB, MUL (and Div by a constant as MUL).

Each input keeps its own parameters; the kernels rescale (ADD/SUB: a 20-bit left shift and
three multipliers; MUL: one multiplier of the product). The solver keeps the output scale
above what each kernel can express (see ``finest_*``).
"""
from __future__ import annotations

import numpy as np

from ...ir import Value
from ...ir.dialects import nn, qnn
from ...numerics import asymmetric_qparams, quantize_tflite
from ...rewrite import Match, Pat
from ...runtime import qkernels as qk
from ...runtime.kernels import qnn_ops
from ...types import TensorType
from ..builtins import BuiltinOperator as OP
from ..lower import F32, Lowerer
from ..params import ActParams, act_type, range_params
from ..regions import QuantizerPattern, Region, binary, clip_fusable, rank, with_activation
from ..rules import ACT, OpSpec
from .registry import QuantOp, SolverRules, declare

# Degenerate output scales. An output step much finer than the step of what an op computes in
# integers resolves nothing more, but the kernels cannot express it: ADD/SUB refuse an output
# multiplier >= 1 and MUL's product overflows int32 when shifted left by more than 15 bits.
# Such scales come from a zero or near-zero range (a callback that returns one, constant data)
# or an input scale blown up by absurd weights upstream. Like LiteRT's converter for HARD_SWISH,
# the output range is widened to the finest scale the kernel accepts, which loses no value the
# integer op can produce; the health check names the tensor when its range was degenerate.
# Normal ranges are far from these floors and unchanged.
ADD_LEFT_SHIFT = 20         # ADD/SUB's int8 input left shift: mo = 2·max(s1, s2) / (2**20 · s_out) < 1
ADD_LEFT_SHIFT16 = 15       # the 16x8 general kernel's
MUL_MAX_RATIO = 2.0 ** 14   # s1·s2 / s_out: a product of two int8 differs (< 2**16) times 2**15 fits int32
MARGIN = 1.0 + 2.0 ** -10   # float32 rounding of the scale must not land back on the limit


def finest_add_scale(input_scales: list[float]) -> float | None:
    return 2.0 * max(input_scales) / 2.0 ** ADD_LEFT_SHIFT * MARGIN if len(input_scales) == 2 else None


def finest_mul_scale(input_scales: list[float]) -> float | None:
    return input_scales[0] * input_scales[1] / MUL_MAX_RATIO * MARGIN if len(input_scales) == 2 else None


def finest_add_scale16(input_scales: list[float]) -> float | None:
    return 2.0 * max(input_scales) / 2.0 ** ADD_LEFT_SHIFT16 * MARGIN if len(input_scales) == 2 else None


def finest_mul_scale16(input_scales: list[float]) -> float | None:
    """A product of two int16 values reaches 2**30: a multiplier above 1 would shift it out of int32."""
    return input_scales[0] * input_scales[1] * MARGIN if len(input_scales) == 2 else None


def _check_binary(m: Match) -> str | None:
    if any(isinstance(m.values.get(n), Value) and rank(m[n]) is None for n in ("a", "b")):
        return "operands must be ranked tensors"
    return clip_fusable(m)


def _check_div(m: Match) -> str | None:
    b = np.asarray(m.consts["b"], np.float32)
    if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b == 0):
        return "division by a constant that holds 0 or a non-finite value"
    if not np.all(np.isfinite(np.float32(1) / b)):
        return "the divisor's reciprocal overflows float32"
    return _check_binary(m)


def lower_binary(opdef):
    def lower(lw: Lowerer, r: Region) -> Value:
        a, b = lw.input(r.match["a"]), lw.input(r.match["b"])
        return lw.emit(opdef.build([a, b], [lw.out_type(r)], activation=r.activation), r.match.ops["op"]).result
    return lower


def lower_div(lw: Lowerer, r: Region) -> Value:
    """``a / b`` for a constant ``b``: MUL by ``1 / b`` (float32), an int8 (16x8: int16) constant with
    its own range."""
    op = r.match.ops["op"]
    recip = (np.float32(1) / np.asarray(r.match.consts["b"], np.float32)).astype(np.float32)
    lo, hi = min(float(recip.min()), 0.0), max(float(recip.max()), 0.0)
    if lw.bits == 8:
        scale, zp = asymmetric_qparams(lo, hi)
        params = ActParams(float(scale), int(zp), False, lo, hi)
    else:
        params = ActParams(*range_params(lo, hi, lw.bits), False, lo, hi, lw.bits)
    limit = 2 ** (params.bits - 1)
    t = act_type(params, TensorType(recip.shape, F32))
    c = lw.stored_constant(quantize_tflite(recip, np.float32(params.scale), params.zero_point, -limit, limit - 1),
                           t.element_type.storage_type, t)
    c.name_hint = f"{op.operands[1].name_hint or 'divisor'}.reciprocal"
    a = lw.input(r.match["a"])
    return lw.emit(qnn.MUL.build([a, c], [lw.out_type(r)], activation=r.activation), op).result


ADD = declare(QuantOp(
    qnn.ADD, OP.ADD, OpSpec((ACT, ACT), ACT),
    patterns=(QuantizerPattern("add", with_activation(binary([nn.ADD, nn.VARIADIC["sum"]])), lower_binary(qnn.ADD),
                               ("a", "b"), check=_check_binary,
                               doc="Add, or a Sum of two operands (older ResNets' residuals)"),),
    kernel=qnn_ops.binary(qk.prepare_add, qk.add),
    solver=SolverRules(finest_output_scale=finest_add_scale, finest_output_scale16=finest_add_scale16), int16=True,
    qdq_ops=(nn.ADD,)))

SUB = declare(QuantOp(
    qnn.SUB, OP.SUB, OpSpec((ACT, ACT), ACT),
    patterns=(QuantizerPattern("sub", with_activation(binary(nn.SUB)), lower_binary(qnn.SUB), ("a", "b"),
                               check=_check_binary),),
    kernel=qnn_ops.binary(qk.prepare_sub, qk.sub),
    solver=SolverRules(finest_output_scale=finest_add_scale, finest_output_scale16=finest_add_scale16), int16=True,
    qdq_ops=(nn.SUB,)))

MUL = declare(QuantOp(
    qnn.MUL, OP.MUL, OpSpec((ACT, ACT), ACT),
    patterns=(QuantizerPattern("mul", with_activation(binary(nn.MUL)), lower_binary(qnn.MUL), ("a", "b"),
                               check=_check_binary),
              QuantizerPattern("div", with_activation(Pat.op(nn.DIV, Pat.any("a"), Pat.const("b"), name="op")),
                               lower_div, ("a",), check=_check_div,
                               doc="Div by a constant (x / 255, x / std): MUL by its reciprocal")),
    kernel=qnn_ops.binary(qk.prepare_mul, qk.mul),
    solver=SolverRules(finest_output_scale=finest_mul_scale, finest_output_scale16=finest_mul_scale16), int16=True,
    qdq_ops=(nn.MUL,)))
