"""SQUARED_DIFFERENCE: ``(a - b)²`` of two int8 activations as one LiteRT op.

TensorFlow's converter writes LayerNorm's variance with it, so a ``.tflite`` from TensorFlow carries
it; in an ONNX graph it is ``(a - b)·(a - b)`` or ``Pow(a - b, 2)``. The difference must have no
other reader: the region claims the Sub, so a difference that something else also reads (quantir's
own LayerNorm expansion reads the centred value again for the normalization) stays SUB then MUL.

The kernel (``runtime/qkernels/squared_difference.py``) rescales both inputs to ``2·max(s1, s2)``
with a left shift of 7, subtracts, squares and rescales; its Prepare refuses an output multiplier
of 1 or more, so the solver keeps ``s_out > max(s1, s2)²/4096``. LiteRT has no int16 kernel
(Eval fails), so under ``Config(activations="int16")`` the op stays int8 between QUANTIZEs.
"""
from __future__ import annotations

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...rewrite import Match, Pat
from ...runtime import qkernels as qk
from ...runtime.kernels.qnn_ops import prepare_once, scale_of, zero_point_of
from ..builtins import BuiltinOperator as OP
from ..lower import F32, Lowerer
from ..regions import QuantizerPattern, Region, rank
from ..rules import ACT, OpSpec
from .binary import MARGIN
from .registry import QuantOp, SolverRules, declare

LEFT_SHIFT = 7   # the kernel's: Mo = (2·max(s1, s2))² / (2**14 · s_out) must stay below 1


def finest_output_scale(input_scales: list[float]) -> float | None:
    return max(input_scales) ** 2 / 2.0 ** (2 * LEFT_SHIFT - 2) * MARGIN if len(input_scales) == 2 else None


def _read_only_by_one_op(v: Value) -> bool:
    """Every use of ``v`` is by one op (the Mul that reads it twice, or the one Pow)."""
    return len({id(op) for op, _ in v.uses}) == 1


_DIFFERENCE = Pat.op(nn.SUB, Pat.any("a"), Pat.any("b"), name="d", where=_read_only_by_one_op)
_SQUARED = Pat.op(nn.MUL, _DIFFERENCE, _DIFFERENCE, name="op")
_POWER = Pat.op(nn.BINARY["pow"], _DIFFERENCE, Pat.const("two"), name="op")


def _check(m: Match) -> str | None:
    for n in ("a", "b"):
        v = m.values[n]
        if rank(v) is None or getattr(v.type, "element_type", None) != F32:
            return f"operands must be ranked float32 tensors, found {v.type}"
    two = m.consts.get("two")
    if two is not None and (two.size != 1 or float(two.reshape(-1)[0]) != 2.0):
        return f"not a square: the exponent is {two.reshape(-1)[:4].tolist()}, not 2"
    return None


def lower_squared_difference(lw: Lowerer, r: Region) -> Value:
    a, b = lw.input(r.match["a"]), lw.input(r.match["b"])
    return lw.emit(qnn.SQUARED_DIFFERENCE.build([a, b], [lw.out_type(r)]), r.match.ops["op"]).result


def squared_difference_kernel(op: Operation, a, b):
    av, bv, y = op.operands[0], op.operands[1], op.results[0]
    p = prepare_once(op, lambda: qk.prepare_squared_difference(scale_of(av), scale_of(bv), scale_of(y),
                                                              zero_point_of(y), storage=a.dtype))
    return qk.squared_difference(a, b, input1_zero_point=zero_point_of(av), input2_zero_point=zero_point_of(bv),
                                 **p.as_kwargs())


SQUARED_DIFFERENCE = declare(QuantOp(
    qnn.SQUARED_DIFFERENCE, OP.SQUARED_DIFFERENCE, OpSpec((ACT, ACT), ACT),
    patterns=(QuantizerPattern("squared_difference", _SQUARED, lower_squared_difference, ("a", "b"), check=_check,
                               priority=-1, doc="(a - b)·(a - b), the difference read by nothing else"),
              QuantizerPattern("squared_difference_pow", _POWER, lower_squared_difference, ("a", "b"),
                               check=_check, priority=-1, doc="Pow(a - b, 2), the difference read by nothing else")),
    kernel=squared_difference_kernel,
    solver=SolverRules(finest_output_scale=finest_output_scale),
    qdq_ops=(nn.SUB, nn.MUL),
    doc="LiteRT SQUARED_DIFFERENCE (int8 only: LiteRT has no int16 kernel)"))
