"""MatMul of two activations: LiteRT BATCH_MATMUL (int8 x int8, per tensor both sides).

Attention writes ``MatMul(q, Transpose(k)) · scale -> Softmax -> MatMul(p, v)``: both operands are
activations, so neither is a FULLY_CONNECTED weight (``conv.py`` claims a MatMul with a constant
operand first). A Transpose that swaps only the last two dims of an operand, and feeds nothing
else, is absorbed as ``adj_x`` / ``adj_y`` (LiteRT transposes in the kernel). The accumulator is
int32 over ``(a - zp_a)(b - zp_b)`` and one multiplier ``s_a·s_b/s_out`` requantizes it
(runtime/qkernels/batch_matmul.py).
"""
from __future__ import annotations

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...rewrite import Match, Pat
from ...runtime import qkernels as qk
from ...runtime.kernels import qnn_ops
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, rank
from ..rules import ACT, OpSpec
from .registry import QuantOp, SolverRules, declare

MAX_RANK = 5   # LiteRT extends both shapes to 5-D


def _swaps_last_two(v: Value) -> bool:
    op = getattr(v, "op", None)
    if op is None or op.opdef is not nn.TRANSPOSE:
        return False
    perm = tuple(op.attr("perm") or ())
    n = len(perm)
    return n >= 2 and perm == (*range(n - 2), n - 1, n - 2)


def _operand(name: str) -> Pat:
    """The operand, or a Transpose of it that swaps the last two dims (absorbed as adj_x / adj_y)."""
    return Pat.alt(Pat.op(nn.TRANSPOSE, Pat.any(name), name=f"{name}_t",
                          where=_swaps_last_two).one_use(), Pat.any(name))


_BATCH_MATMUL = Pat.op(nn.MATMUL, _operand("a"), _operand("b"), name="op")


def _check(m: Match) -> str | None:
    a, b = m.values["a"], m.values["b"]
    ranks = (rank(a), rank(b))
    if None in ranks or min(ranks) < 2:
        return f"MatMul of operands of rank {ranks}: LiteRT BATCH_MATMUL takes ranked operands of rank 2 or more"
    if max(ranks) > MAX_RANK:
        return f"MatMul of rank {max(ranks)}: LiteRT BATCH_MATMUL takes at most {MAX_RANK} dims"
    return None


def lower_batch_matmul(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    a, b = lw.input(r.match["a"]), lw.input(r.match["b"])
    return lw.emit(qnn.BATCH_MATMUL.build([a, b], [lw.out_type(r)], adj_x="a_t" in r.match.ops,
                                          adj_y="b_t" in r.match.ops), op).result


def batch_matmul_kernel(op: Operation, a, b):
    av, bv, y = op.operands[0], op.operands[1], op.results[0]
    p = qnn_ops.prepare_once(op, lambda: qk.prepare_batch_matmul(qnn_ops.scale_of(av), qnn_ops.scale_of(bv),
                                                                 qnn_ops.scale_of(y), qnn_ops.zero_point_of(y)))
    return qk.batch_matmul(a, b, lhs_zero_point=qnn_ops.zero_point_of(av), rhs_zero_point=qnn_ops.zero_point_of(bv),
                           adj_x=bool(op.attr("adj_x")), adj_y=bool(op.attr("adj_y")), **p.as_kwargs())


def finest_product_scale(input_scales: list[float]) -> float | None:
    """An output step finer than the product's ``s_a·s_b`` resolves nothing the int32 accumulator holds,
    and a multiplier above 1 shifts the accumulator left (int32 overflow): widened to ``s_a·s_b``."""
    return input_scales[0] * input_scales[1] if len(input_scales) == 2 else None


BATCH_MATMUL = declare(QuantOp(
    qnn.BATCH_MATMUL, OP.BATCH_MATMUL, OpSpec((ACT, ACT), ACT),
    patterns=(QuantizerPattern("batch_matmul", _BATCH_MATMUL, lower_batch_matmul, ("a", "b"), check=_check,
                               doc="MatMul of two activations (a Transpose of the last two dims: adj_x / adj_y)"),),
    kernel=batch_matmul_kernel, solver=SolverRules(finest_output_scale=finest_product_scale), int16=True,
    qdq_ops=(nn.MATMUL,),
    doc="LiteRT BATCH_MATMUL, int8 x int8 per tensor, int32 accumulation"))
