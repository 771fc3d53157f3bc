"""MLIR's ``quant`` dialect: ``qcast``, ``dcast``, ``scast`` with upstream's verifiers and
folds, plus the instrumentation ops of the original design (``const_fake_quant``,
``const_fake_quant_per_axis``, ``stats_ref``, ``stats``, ``coupled_ref``) that upstream has
since removed; their verifiers follow TensorFlow's fork (docs/mlir-quant-spec.md §8).

Messages are upstream's, including which ones carry the ``'quant.X' op`` prefix: the
type-relation checks use ``emitError`` and so have none (``VerifyError`` is raised directly).
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import VerifyError
from ...types import (FloatType, IntegerType, QuantizedType, TensorType, Type,
                      check_quantized_container)
from ..core import Operation, Value
from . import arith
from ..opdef import AttrKind, AttrSpec, OpDef, Operand, Result, Trait, TypeConstraint, close_dialect, register


def element_type(t: Type) -> Type:
    return t.element_type if isinstance(t, TensorType) else t


def _scalar_or_tensor_of(pred, description: str) -> TypeConstraint:
    def check(t: Type) -> bool:
        if isinstance(t, TensorType):
            return pred(t.element_type)
        return pred(t)
    return TypeConstraint(f"scalar or tensor of {description}", check)


def _is_float(t: Type) -> bool:
    return isinstance(t, FloatType)


def _is_quant(t: Type) -> bool:
    return isinstance(t, QuantizedType)


def _is_signless_int(t: Type) -> bool:
    return isinstance(t, IntegerType) and t.signedness == "signless"


FLOAT_LIKE = _scalar_or_tensor_of(_is_float, "floating-point")
QUANT_LIKE = _scalar_or_tensor_of(_is_quant, "quantized type")
INT_OR_QUANT_LIKE = _scalar_or_tensor_of(lambda t: _is_signless_int(t) or _is_quant(t),
                                         "signless integer or quantized type")
REAL_VALUE = TypeConstraint(
    "real valued primitive (float or quantized type)",
    lambda t: _is_float(element_type(t)) or _is_quant(element_type(t)))
F32_TENSOR = TypeConstraint("tensor of 32-bit float values",
                            lambda t: isinstance(t, TensorType) and t.element_type == FloatType("f32"))


def _same_shape(a: Type, b: Type) -> bool:
    """Both scalars, both unranked tensors, or both ranked with identical shapes (``?`` != 4)."""
    if isinstance(a, TensorType) != isinstance(b, TensorType):
        return False
    if not isinstance(a, TensorType):
        return True
    return a.shape == b.shape


_SHAPE_MESSAGE = "failed to verify that input and result are both scalars or both tensors with matching shape"


def _check_container(op: Operation, container: Type) -> None:
    message = check_quantized_container(container)
    if message is not None:
        raise VerifyError(message, op.loc)


def _verify_qdcast(op: Operation, float_side: Type, quant_side: Type) -> str | None:
    if not _same_shape(op.operands[0].type, op.results[0].type):
        return _SHAPE_MESSAGE
    qtype = element_type(quant_side)
    if qtype.expressed_type != element_type(float_side):
        raise VerifyError("expressed type in quantized type expected to match float type", op.loc)
    _check_container(op, quant_side)
    return None


def _verify_qcast(op: Operation) -> str | None:
    return _verify_qdcast(op, op.operands[0].type, op.results[0].type)


def _verify_dcast(op: Operation) -> str | None:
    return _verify_qdcast(op, op.results[0].type, op.operands[0].type)


def _verify_scast(op: Operation) -> str | None:
    src, dst = op.operands[0].type, op.results[0].type
    if not _same_shape(src, dst):
        return _SHAPE_MESSAGE
    if _is_quant(element_type(src)) == _is_quant(element_type(dst)):
        return "failed to verify that input must be integer and result must be quantized, or vice versa"
    quant_side, int_side = (src, dst) if _is_quant(element_type(src)) else (dst, src)
    if element_type(quant_side).storage_type != element_type(int_side):
        raise VerifyError("storage type in quantized type expected to match integer type", op.loc)
    _check_container(op, quant_side)
    return None


def stored_constant(v: Value) -> np.ndarray | None:
    """The storage integers behind ``scast(arith.constant)`` (a plain constant's own array), else None."""
    op = getattr(v, "op", None)
    if op is not None and op.opdef is SCAST:
        op = getattr(op.operands[0], "op", None)
    if op is not None and op.opdef is arith.CONSTANT:
        return getattr(op.attributes.get("value"), "array", None)
    return None


def _defining(value: Value, opdef: OpDef) -> Operation | None:
    owner = getattr(value, "op", None)
    return owner if owner is not None and owner.opdef is opdef else None


# qcast(dcast(y)) -> y when the types match
def _fold_qcast(op: Operation) -> list[Value] | None:
    src = _defining(op.operands[0], DCAST)
    if src is not None and src.operands[0].type == op.results[0].type:
        return [src.operands[0]]
    return None


# dcast(qcast(x)) -> x
def _fold_dcast(op: Operation) -> list[Value] | None:
    src = _defining(op.operands[0], QCAST)
    if src is not None and src.operands[0].type == op.results[0].type:
        return [src.operands[0]]
    return None


# scast(scast(x)) -> x when x's type comes back
def _fold_scast(op: Operation) -> list[Value] | None:
    src = _defining(op.operands[0], SCAST)
    if src is not None and src.operands[0].type == op.results[0].type:
        return [src.operands[0]]
    return None


_PURE = frozenset({Trait.PURE})

QCAST = register(OpDef(
    "quant.qcast", operands=(Operand("input", FLOAT_LIKE),), results=(Result("result", QUANT_LIKE),),
    traits=_PURE, verifier=_verify_qcast, fold=_fold_qcast, custom_syntax=True,
    summary="Quantize: real -> stored, round and clamp by the result's quantized type."))

DCAST = register(OpDef(
    "quant.dcast", operands=(Operand("input", QUANT_LIKE),), results=(Result("result", FLOAT_LIKE),),
    traits=_PURE, verifier=_verify_dcast, fold=_fold_dcast, custom_syntax=True,
    summary="Dequantize: real = (stored - zero_point) * scale."))

SCAST = register(OpDef(
    "quant.scast", operands=(Operand("input", INT_OR_QUANT_LIKE),), results=(Result("result", INT_OR_QUANT_LIKE),),
    traits=_PURE, verifier=_verify_scast, fold=_fold_scast, custom_syntax=True,
    summary="Reinterpret between a quantized type and its storage integer type; no data change."))


# -- legacy instrumentation ops (generic syntax) ----------------------------------------------

def _verify_fake_quant(op: Operation) -> str | None:
    lo, hi = op.attr("min"), op.attr("max")
    bits = op.attr("num_bits")
    if not 2 <= bits <= 16:
        return f"num_bits must be in [2, 16], got {bits}"
    los = lo if isinstance(lo, tuple) else (lo,)
    his = hi if isinstance(hi, tuple) else (hi,)
    if len(los) != len(his):
        return "min and max must have the same number of elements"
    for a, b in zip(los, his):
        if not (math.isfinite(a) and math.isfinite(b)) or a > b:
            return f"illegal min and max: ({a}:{b})"
    axis = op.attr("axis")
    t = op.operands[0].type
    if axis is not None and isinstance(t, TensorType) and t.is_ranked:
        if not 0 <= axis < t.rank:
            return f"axis {axis} out of range for rank {t.rank}"
        dim = t.shape[axis]
        if dim is not None and dim != len(los):
            return f"expected {dim} min/max values along axis {axis}, got {len(los)}"
    return None


_FAKE_QUANT_ATTRS = {
    "num_bits": AttrSpec(AttrKind.INT, default=8),
    "narrow_range": AttrSpec(AttrKind.BOOL, default=False),
    "is_signed": AttrSpec(AttrKind.BOOL, default=False),
}

CONST_FAKE_QUANT = register(OpDef(
    "quant.const_fake_quant", operands=(Operand("inputs", F32_TENSOR),), results=(Result("outputs", F32_TENSOR),),
    attributes={"min": AttrSpec(AttrKind.FLOAT, required=True), "max": AttrSpec(AttrKind.FLOAT, required=True),
                **_FAKE_QUANT_ATTRS},
    traits=frozenset({Trait.PURE, Trait.SAME_OPERANDS_AND_RESULT_TYPE}), verifier=_verify_fake_quant,
    summary="Simulate quantization with a constant [min, max] range (TensorFlow FakeQuantWithMinMaxArgs)."))

CONST_FAKE_QUANT_PER_AXIS = register(OpDef(
    "quant.const_fake_quant_per_axis", operands=(Operand("inputs", F32_TENSOR),),
    results=(Result("outputs", F32_TENSOR),),
    attributes={"min": AttrSpec(AttrKind.FLOAT_LIST, required=True),
                "max": AttrSpec(AttrKind.FLOAT_LIST, required=True),
                "axis": AttrSpec(AttrKind.INT, required=True), **_FAKE_QUANT_ATTRS},
    traits=frozenset({Trait.PURE, Trait.SAME_OPERANDS_AND_RESULT_TYPE}), verifier=_verify_fake_quant,
    summary="Per-axis fake quantization with constant ranges along ``axis``."))

STATS_REF = register(OpDef(
    "quant.stats_ref", operands=(Operand("arg", REAL_VALUE),), results=(Result("res", REAL_VALUE),),
    attributes={"statsKey": AttrSpec(AttrKind.STRING, required=True)},
    traits=frozenset({Trait.SAME_OPERANDS_AND_RESULT_TYPE}),
    summary="Identity that names the statistics to be collected for its operand."))


def _verify_stats(op: Operation) -> str | None:
    arg = op.operands[0].type
    if not isinstance(arg, TensorType):
        return "arg needs to be tensor type."
    layer = op.attributes["layerStats"]
    if not _is_float(layer.type.element_type):
        return "layerStats must have a floating point element type"
    if layer.type.shape != (2,):
        return "layerStats must have shape [2]"
    if "axisStats" in op.attributes:
        axis = op.attr("axis")
        if axis is None:
            return "axis must be specified for axisStats"
        stats = op.attributes["axisStats"]
        if not _is_float(stats.type.element_type):
            return "axisStats must have a floating point element type"
        if arg.is_ranked and all(d is not None for d in arg.shape[axis:]):
            n = math.prod(arg.shape[axis:])
            if stats.type.shape != (n, 2):
                return "axisStats must have shape [N,2] where N = the slice size defined by the axis dim"
    return None


STATS = register(OpDef(
    "quant.stats", operands=(Operand("arg", REAL_VALUE),), results=(Result("res", REAL_VALUE),),
    attributes={"layerStats": AttrSpec(AttrKind.ELEMENTS, required=True),
                "axisStats": AttrSpec(AttrKind.ELEMENTS), "axis": AttrSpec(AttrKind.INT)},
    traits=frozenset({Trait.SAME_OPERANDS_AND_RESULT_TYPE}), verifier=_verify_stats,
    summary="Identity that carries collected statistics: layerStats = [min, max], axisStats = [[min, max], ...]."))

COUPLED_REF = register(OpDef(
    "quant.coupled_ref", operands=(Operand("arg", REAL_VALUE),), results=(Result("res", REAL_VALUE),),
    attributes={"coupledKey": AttrSpec(AttrKind.STRING, required=True)},
    traits=frozenset({Trait.SAME_OPERANDS_AND_RESULT_TYPE}),
    summary="Identity that couples its operand's quantization parameters to others with the same key."))

close_dialect("quant")
