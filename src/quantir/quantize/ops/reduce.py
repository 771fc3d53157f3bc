"""Sums: LiteRT SUM (ONNX ReduceSum). MEAN, the other int8 reduction, is a window op (pool.py).

Which SUM kernel quantir's interpreter runs. LiteRT has two int8 SUM kernels, and they disagree
on more than rounding:

* ``BUILTIN_REF`` (the reference resolver) reads the int8 input through ``uint8_t`` pointers and
  clamps to [0, 255] (ai-edge-litert 2.3.0; runtime/qkernels/reduce_sum.py ``builtin_ref``): the
  sum of -1 and 5 comes out as -1. That is a LiteRT bug, not int8 semantics.
* The default resolver (``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` and ``AUTO``) runs
  ``optimized_ops::QuantizedMeanOrSum``: the right sum, rescaled in float32
  (``reduce_sum(variant="optimized")``).

quantir binds the optimized kernel: it is what a LiteRT user gets on a phone, and it computes
what the float model computes. So SUM is the one op where quantir follows the default resolver
instead of ``BUILTIN_REF``: the TFLite tests compare SUM with ``Resolver.OPTIMIZED``, and
``quantir verify`` (which runs ``BUILTIN_REF``) reports a SUM whose input holds negative values
as a mismatch, which is LiteRT's reference kernel being wrong.
"""
from __future__ import annotations

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...ir.dialects.nn_reduce import reduced_axes
from ...rewrite import Match
from ...runtime import qkernels as qk
from ...runtime.kernels import qnn_ops
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, rank, unary
from ..rules import ACT, ANY, OpSpec
from .registry import QuantOp, SolverRules, declare

# Prepare runs QuantizeMultiplier(s_in / s_out) for both resolvers: a ratio above 2**20 (an output
# step a million times finer than the input's, which only a degenerate range asks for) is where
# MEAN's floor sits too (pool.py); the solver widens such an output range instead.
SUM_MAX_RATIO = 2.0 ** 20
MARGIN = 1.0 + 2.0 ** -10    # float32 rounding of the scale must not land back on the limit


def finest_sum_scale(input_scales: list[float]) -> float | None:
    return input_scales[0] / SUM_MAX_RATIO * MARGIN


def _attrs(op: Operation) -> dict:
    return {"axes": op.attr("axes"), "keepdims": op.attr("keepdims"),
            "noop_with_empty_axes": op.attr("noop_with_empty_axes")}


def _check_sum(m: Match) -> str | None:
    op = m.ops["op"]
    r = rank(op.operands[0])
    if r is None:
        return "ReduceSum of an unranked tensor is not quantized (LiteRT SUM needs the reduced axes)"
    if not op.attr("axes") and op.attr("noop_with_empty_axes"):
        return "ReduceSum with no axes and noop_with_empty_axes=1 is an identity, not a sum"
    if r == 0:
        return "ReduceSum of a scalar is an identity, not a sum"
    return None


def lower_sum(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    axes = reduced_axes(len(op.operands[0].type.shape), _attrs(op))
    return lw.emit(qnn.REDUCE_SUM.build([lw.input(r.match["x"])], [lw.out_type(r)], axes=tuple(axes),
                                        keepdims=int(op.attr("keepdims"))), op).result


def sum_kernel(op: Operation, x):
    """The default resolver's SUM (see the module docstring for why not BUILTIN_REF's)."""
    xv, y = op.operands[0], op.results[0]
    p = qnn_ops.prepare_once(op, lambda: qk.prepare_sum(qnn_ops.scale_of(xv), qnn_ops.zero_point_of(xv),
                                                        qnn_ops.scale_of(y), qnn_ops.zero_point_of(y)))
    return qk.reduce_sum(x, axes=tuple(op.attr("axes")), keepdims=bool(op.attr("keepdims")), variant="optimized",
                         **p.as_kwargs())


SUM = declare(QuantOp(
    qnn.REDUCE_SUM, OP.SUM, OpSpec((ACT, ANY), ACT),
    patterns=(QuantizerPattern("sum", unary(nn.REDUCE["sum"]), lower_sum, check=_check_sum, doc="ReduceSum"),),
    kernel=sum_kernel,
    solver=SolverRules(finest_output_scale=finest_sum_scale),
    qdq_ops=(nn.REDUCE["sum"],),
    doc="LiteRT SUM; the interpreter runs the default resolver's kernel (BUILTIN_REF's misreads int8)"))
