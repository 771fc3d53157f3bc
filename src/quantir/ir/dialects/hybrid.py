"""The ``hybrid`` dialect: LiteRT's dynamic-range ops — float32 activations, int8 constant weights,
float32 results.

A dialect of its own, not ``qnn``: a ``qnn`` op maps quantized tensors to quantized tensors and is
declared for the static int8 quantizer (patterns, solver, spec row); these ops take and return
float, and only their weight carries a quant type.

Each op is one LiteRT kernel — FULLY_CONNECTED, BATCH_MATMUL, CONV_2D / DEPTHWISE_CONV_2D,
EMBEDDING_LOOKUP with an int8 weight — and its weight operand is a tensor of a ``!quant.uniform``
type (``arith.constant`` of the int8 storage + ``quant.scast``): symmetric, zero point 0, per
tensor or per output channel (axis 0 of ``[C_out, K]`` / OIHW; a ``[K, N]`` BATCH_MATMUL rhs
along N; an embedding table one scale per row), in LiteRT's narrow range ``[-127, 127]``.
The input, the optional bias and the result are ``f32``.

**The run-time quantization is folded into the op**, not a separate op the exporter fuses:
that is LiteRT's kernel granularity, and the quantized input is never a tensor of the
``.tflite`` file. The kernel also decides *how* to quantize from things outside the input:
FULLY_CONNECTED and BATCH_MATMUL quantize each row symmetrically, or asymmetrically with
``asymmetric_quantize_inputs``; CONV_2D quantizes each image symmetrically when its weights
have one scale and asymmetrically when they have several (whatever an option says), the
depthwise kernel always asymmetrically; FULLY_CONNECTED skips the product for an all-zero
input. A separate quantize op would have to copy those rules, and could be scheduled
or shared in ways LiteRT cannot run. The interpreter runs these ops with
``runtime.qkernels.hybrid`` / ``hybrid_conv``, bit-exact with ``BUILTIN_REF``
(docs/numerics.md §8).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ...errors import QuantirError
from ...types import FloatType, IntegerType, QuantizedType, TensorType, Type
from ..core import Operation
from ..opdef import AttrKind, AttrSpec, OpDef, Operand, Result, Trait, TypeConstraint, register
from . import nn
from .qnn import ACTIVATIONS, Q_TENSOR, _shape, _verify_activation

__all__ = ["HYBRID_FULLY_CONNECTED", "HYBRID_BATCH_MATMUL", "HYBRID_CONV", "HYBRID_EMBEDDING_LOOKUP", "HYBRID_OPS"]

F32 = FloatType("f32")
F32_TENSOR = TypeConstraint("tensor of 32-bit float values",
                            lambda t: isinstance(t, TensorType) and t.element_type == F32)
INDEX_TENSOR = TypeConstraint("tensor of i32 or i64 values",
                              lambda t: isinstance(t, TensorType) and t.element_type in (IntegerType(32),
                                                                                         IntegerType(64)))


def _float(t: Type) -> Type:
    """A quantized tensor type seen as the float tensor it stands for (for the nn type rules)."""
    if isinstance(t, TensorType) and isinstance(t.element_type, QuantizedType):
        return t.clone(element_type=F32)
    return t


def _weight_checks(op: Operation) -> str | None:
    """The weight (operand 1 of every hybrid op) is int8 storage; its values and zero points are
    ``quantir check``'s to judge (a file may hold a -128 or a nonzero zero point)."""
    q = op.operands[1].type.element_type
    if q.storage_type != IntegerType(8):
        return f"the weight must be stored as i8, found {q.storage_type}"
    return None


def _bias_checks(op: Operation, channels: Any) -> str | None:
    if len(op.operands) < 3:
        return None
    b = op.operands[2].type
    if b.is_ranked and channels is not None and tuple(b.shape) != (channels,):
        return f"the bias {_shape(b)} must hold one f32 value per output channel ({channels})"
    return None


def _infer_fc(types: Sequence[Type], attrs: Mapping[str, Any]) -> list[Type]:
    x, w = types[0], types[1]
    if not (x.is_ranked and w.is_ranked):
        return [TensorType(None, F32)]
    if w.rank != 2 or x.rank < 1 or x.shape[-1] not in (None, w.shape[1]):
        raise QuantirError(f"weights {_shape(w)} must be [C_out, K] with K = the input's last dim ({_shape(x)})")
    if attrs.get("keep_num_dims") or x.rank == 2:
        return [TensorType(x.shape[:-1] + (w.shape[0],), F32)]
    lead = x.shape[:-1]
    rows = None if None in lead else math.prod(lead)
    return [TensorType((rows, w.shape[0]), F32)]


def _verify_with(rule, channels_of):
    """A verifier: the type rule's result shape equals the op's; the weight and bias checks."""
    def check(op: Operation) -> str | None:
        message = _verify_activation(op) if "activation" in op.opdef.attributes else None
        if message:
            return message
        message = _weight_checks(op)
        if message:
            return message
        attrs = {k: op.attr(k) for k in op.opdef.attributes}
        try:
            (want,) = rule([v.type for v in op.operands], attrs)
        except QuantirError as e:
            return f"operands do not fit: {e.message}"
        got = op.results[0].type
        if want.is_ranked and got.is_ranked and want.shape != got.shape:
            return f"result shape {_shape(got)} does not match the shape {_shape(want)} computed from the operands"
        return _bias_checks(op, channels_of(op))
    return check


def hdefine(name: str, operands: Sequence[Operand], attributes: Mapping[str, AttrSpec], rule, channels_of,
            summary: str) -> OpDef:
    return register(OpDef(f"hybrid.{name}", operands=tuple(operands), results=(Result("y", F32_TENSOR),),
                          attributes=dict(attributes), traits=frozenset({Trait.PURE}),
                          verifier=_verify_with(rule, channels_of), infer=rule, summary=summary))


def _out_channels(op: Operation) -> Any:
    w = op.operands[1].type
    return w.shape[0] if w.is_ranked else None


_ACT = {"activation": AttrSpec(AttrKind.STRING, default="NONE", doc="fused clamp: " + ", ".join(ACTIVATIONS))}
_ASYM = {"asymmetric_quantize_inputs": AttrSpec(AttrKind.BOOL, default=False,
                                                doc="quantize each input row with its own zero point")}

HYBRID_FULLY_CONNECTED = hdefine(
    "fully_connected",
    (Operand("x", F32_TENSOR), Operand("w", Q_TENSOR), Operand("bias", F32_TENSOR, optional=True)),
    {**_ACT, **_ASYM, "keep_num_dims": AttrSpec(AttrKind.BOOL, default=False)}, _infer_fc, _out_channels,
    "LiteRT FULLY_CONNECTED, dynamic range: x [..., K] f32, w [C_out, K] int8, y = x·wᵀ + bias in f32 with x "
    "quantized per row at run time; [rows, C_out], or [..., C_out] with keep_num_dims.")


def _infer_bmm(types: Sequence[Type], attrs: Mapping[str, Any]) -> list[Type]:
    a, b = types[0], _float(types[1])
    return [nn.MATMUL.infer([_transposed(a, attrs.get("adj_x")), _transposed(b, attrs.get("adj_y"))], {})[0]
            .clone(element_type=F32)]


def _transposed(t: Type, adj: Any) -> Type:
    if not adj or not t.is_ranked or t.rank < 2:
        return t
    return t.clone(shape=(*t.shape[:-2], t.shape[-1], t.shape[-2]))


def _bmm_channels(op: Operation) -> Any:
    w = op.operands[1].type
    return (w.shape[-2] if op.attr("adj_y") else w.shape[-1]) if w.is_ranked else None


HYBRID_BATCH_MATMUL = hdefine(
    "batch_matmul", (Operand("lhs", F32_TENSOR), Operand("rhs", Q_TENSOR)),
    {"adj_x": AttrSpec(AttrKind.BOOL, default=False), "adj_y": AttrSpec(AttrKind.BOOL, default=False), **_ASYM},
    _infer_bmm, _bmm_channels,
    "LiteRT BATCH_MATMUL, dynamic range: f32 lhs [..., M, K] times a constant int8 rhs [..., K, N] (one scale, or "
    "one per column N), each lhs row quantized at run time; f32 [..., M, N].")

_CONV_ATTRS = {"strides": AttrSpec(AttrKind.INTS), "pads": AttrSpec(AttrKind.INTS),
               "dilations": AttrSpec(AttrKind.INTS), "auto_pad": AttrSpec(AttrKind.STRING),
               "group": AttrSpec(AttrKind.INT, default=1), **_ACT}


def _infer_conv(types: Sequence[Type], attrs: Mapping[str, Any]) -> list[Type]:
    conv_attrs = {k: s.default for k, s in nn.CONV.attributes.items()}
    conv_attrs.update({k: v for k, v in attrs.items() if k in conv_attrs and v is not None})
    (y,) = nn.CONV.infer([types[0], _float(types[1])], conv_attrs)
    return [y.clone(element_type=F32)]


HYBRID_CONV = hdefine(
    "conv", (Operand("x", F32_TENSOR), Operand("w", Q_TENSOR), Operand("bias", F32_TENSOR, optional=True)),
    _CONV_ATTRS, _infer_conv, _out_channels,
    "LiteRT CONV_2D (group 1) / DEPTHWISE_CONV_2D (group == C_in), dynamic range: f32 NCHW input quantized per "
    "image at run time, int8 OIHW weights, f32 bias and result.")


def _infer_embedding(types: Sequence[Type], attrs: Mapping[str, Any]) -> list[Type]:
    ids, table = types[0], types[1]
    if not (ids.is_ranked and table.is_ranked):
        return [TensorType(None, F32)]
    if table.rank < 2:
        raise QuantirError(f"the table {_shape(table)} must have rank 2 or more ([rows, ...])")
    return [TensorType(tuple(ids.shape) + tuple(table.shape[1:]), F32)]


HYBRID_EMBEDDING_LOOKUP = hdefine(
    "embedding_lookup", (Operand("ids", INDEX_TENSOR), Operand("table", Q_TENSOR)), {},
    _infer_embedding, lambda op: None,
    "LiteRT EMBEDDING_LOOKUP of an int8 table (one scale, or one per row): y[i] = table[ids[i]] · scale in f32; "
    "ids of any shape, read flat (the .tflite writes them as 1-D int32).")

HYBRID_OPS: tuple[OpDef, ...] = (HYBRID_FULLY_CONNECTED, HYBRID_BATCH_MATMUL, HYBRID_CONV, HYBRID_EMBEDDING_LOOKUP)

