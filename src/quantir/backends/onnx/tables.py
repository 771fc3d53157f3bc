"""Elementwise qnn ops as lookup tables on the stored integers (the QOperator export).

ONNX Runtime has no int8 kernel for TANH, HARD_SWISH, GELU, RSQRT, a rescaling QUANTIZE or SUB,
so the QOperator export used to write them DequantizeLinear → float op → QuantizeLinear, one
QuantizeLinear per such op. But an elementwise int8 op with fixed parameters is a function of
its input's stored integer alone (256 values), and an elementwise binary op one of the pair
(256 × 256 values). So the export runs quantir's own integer kernel once on every possible
input and writes the results as a table that ``GatherElements`` reads:

=====================  =========================================================================
op kind                ONNX on the stored integers
=====================  =========================================================================
one int8 input         ``table[256][Cast(x, int32)]``
one int16 input        ``table[65536][Cast(x, int32)]`` (the QOperator export's int16 ops, sixteen.py)
two int8 inputs        ``table[65536][Cast(a, int32)·256 + Cast(b, int32)]`` (Mul and Add
                       broadcast the two index tensors as the op broadcasts its operands)
=====================  =========================================================================

The table is laid out by the stored value modulo 256 (modulo 65536 for a pair), so an int8
value indexes it directly: ``GatherElements`` reads a negative index from the end (index -1 is entry
255, the int8 value -1), and the pair index ``a·256 + b`` of two int8 values spans exactly
65536 consecutive integers, each its own entry modulo 65536. uint8 storage (``activations=
"uint8"``) indexes 0..255 the same way. No offset Add is needed.

The tables hold exactly the integers quantir's interpreter computes, hence LiteRT's
``BUILTIN_REF``'s: the export is bit-exact for these ops, where ONNX Runtime's own int8 kernels
are within a step.

The cost of exactness (ONNX Runtime 1.32, one thread, measured): GatherElements reads about 5 ns
per element where DequantizeLinear → HardSwish → QuantizeLinear takes 0.7; the PP-OCRv5 detector's
QOperator export (uint8, 320x320) runs in 75 ms with its 23 tables against 34 ms with those ops as
QDQ islands (fp32: 100 ms). The QDQ export, which ONNX Runtime fuses, stays the fast form.

Which ops qualify is read from their declarations, not listed here: a declared op with
quantized operands and result whose QDQ form (``QuantOp.qdq_ops``) is elementwise float ops
(``SPLAT_ELEMENTWISE``). QUANTIZE (``qnn.requantize``) and the standalone clamp write no float op
in QDQ, a rescale and a clamp, and are elementwise by definition. ``qoperator.CONVERT`` overrides
the ops ONNX Runtime computes exactly or fast enough itself (QLinearAdd, QLinearMul, QLinearSigmoid,
Max, Min, an int8 Clip).
"""
from __future__ import annotations

import base64
import dataclasses

import numpy as np
import onnx

from ...errors import UnsupportedOpError
from ...ir import Block, Operation, Value
from ...ir.dialects import nn, qnn
from ...ir.opdef import OpDef
from ...runtime.interpreter import kernel_for
from ...runtime.qkernels import QKernelError
from ...runtime.kernels.elementwise import SPLAT_ELEMENTWISE
from ...types import IntegerType, TensorType, UniformQuantizedType
from . import qdq
from .builder import Builder, base_name, qtype

__all__ = ["is_unary_elementwise", "is_binary_elementwise", "unary_table", "pair_table", "lookup", "pair_lookup",
           "qoperator_table"]

# elementwise by definition, with no float op in their QDQ form
_RESCALES = (qnn.REQUANTIZE, qnn.CLAMP)


def _declaration(opdef: OpDef):
    from ...quantize.ops.registry import DECLARATIONS
    return DECLARATIONS.get(opdef)


def _elementwise(opdef: OpDef, arity: int) -> bool:
    d = _declaration(opdef)
    if d is None or not d.output_quantized or not opdef.name.startswith("qnn.") or len(opdef.operands) != arity:
        return False
    if opdef in _RESCALES:
        return True
    return bool(d.qdq_ops) and all(o in SPLAT_ELEMENTWISE for o in d.qdq_ops)


def is_unary_elementwise(opdef: OpDef) -> bool:
    """A qnn op whose every result element is a function of the same element of its one int8 input."""
    return _elementwise(opdef, 1)


def is_binary_elementwise(opdef: OpDef) -> bool:
    """A qnn op whose every result element is a function of the (broadcast) elements of its two inputs."""
    return _elementwise(opdef, 2)


# -- the tables -----------------------------------------------------------------------------------

def _as_int8(t: TensorType) -> tuple[UniformQuantizedType, int]:
    """The signed form of a per-tensor 8- or 16-bit type and the offset of its storage (128 for uint8)."""
    q = qtype(t)
    if not isinstance(q, UniformQuantizedType) or not isinstance(q.storage_type, IntegerType) \
            or q.storage_type.width not in (8, 16) or (q.storage_type.width == 16 and not q.is_signed):
        raise UnsupportedOpError(f"a lookup table needs 8-bit or signed 16-bit per-tensor quantized operands, got {t}")
    if q.is_signed:
        return q, 0
    signed = dataclasses.replace(q, is_signed=True, zero_point=int(q.zero_point) - 128,
                                 storage_min=q.storage_min - 128, storage_max=q.storage_max - 128)
    return signed, 128


def _probe(op: Operation, shapes: list[tuple[int, ...]]) -> tuple[Operation, list[int], int]:
    """A copy of ``op`` on int8 operands of ``shapes`` (the kernel's view), and the storage offsets
    of its operands and result."""
    ins = [_as_int8(v.type) for v in op.operands]
    out, out_offset = _as_int8(op.results[0].type)
    args = Block([TensorType(s, q) for s, (q, _) in zip(shapes, ins)]).arguments
    result = TensorType(tuple(np.broadcast_shapes(*shapes)), out)
    return Operation(op.opdef, list(args), [result], dict(op.attributes), op.loc, op.label), \
        [o for _, o in ins], out_offset


def _run(op: Operation, probe: Operation, arrays: list[np.ndarray]) -> np.ndarray:
    kernel = kernel_for(op.opdef)
    if kernel is None:
        raise UnsupportedOpError(f"{op.describe()}: no integer kernel to build its lookup table from")
    return np.asarray(kernel(probe, *arrays)).astype(np.int32)


def _run_where_defined(op: Operation, probe: Operation, values: np.ndarray) -> np.ndarray:
    """The kernel on every one of ``values``; an input it refuses (LiteRT fails the invocation: int16
    RSQRT of a negative value) takes the result of the next larger input it accepts (of the largest, past
    it), as a table cannot fail. Refused inputs are found by halving, so a contiguous refused range costs a few runs."""
    defined = np.ones(values.size, bool)
    out = np.zeros(values.size, np.int32)

    def fill(lo: int, hi: int) -> None:
        try:
            out[lo:hi] = _run(op, probe, [values[lo:hi]])
        except QKernelError:
            if hi - lo == 1:
                defined[lo] = False
                return
            mid = (lo + hi) // 2
            fill(lo, mid)
            fill(mid, hi)
    fill(0, values.size)
    if not defined.any():
        raise UnsupportedOpError(f"{op.describe()}: its kernel refuses every stored input value; no table")
    if not defined.all():
        at = np.flatnonzero(defined)
        nearest = at[np.clip(np.searchsorted(at, np.arange(values.size)), 0, at.size - 1)]
        out = out[nearest]
    return out


def unary_table(op: Operation) -> np.ndarray:
    """``op``'s result for each stored input value s, at index ``s mod 2^bits`` (256 entries for an 8-bit
    input, 65,536 for int16), in the result's storage."""
    probe, (offset,), out_offset = _probe(op, [(_values(op.operands[0]),)])
    bits = qtype(op.operands[0].type).storage_type.width
    stored = np.arange(1 << bits, dtype=np.int32) - (1 << (bits - 1)) + offset       # every stored input value
    y = _run_where_defined(op, probe, (stored - offset).astype(np.int8 if bits == 8 else np.int16)) + out_offset
    table = np.empty(1 << bits, np.int32)
    table[stored % (1 << bits)] = y
    return table.astype(_storage_dtype(op.results[0].type, out_offset))


def _values(v: Value) -> int:
    return 1 << qtype(v.type).storage_type.width


def _storage_dtype(t: TensorType, offset: int):
    if qtype(t).storage_type.width == 16:
        return np.int16
    return np.int8 if offset == 0 else np.uint8


def pair_table(op: Operation) -> np.ndarray:
    """``op``'s result for each pair of stored input values (a, b), at index ``(a·256 + b) mod 65536``."""
    probe, (oa, ob), out_offset = _probe(op, [(256, 1), (1, 256)])
    a = np.arange(256, dtype=np.int32) - 128 + oa
    b = np.arange(256, dtype=np.int32) - 128 + ob
    y = _run(op, probe, [(a - oa).astype(np.int8).reshape(256, 1), (b - ob).astype(np.int8).reshape(1, 256)])
    table = np.empty(65536, np.int16)
    table[(a[:, None] * 256 + b[None, :]) % 65536] = y + out_offset
    return table.astype(np.int8 if out_offset == 0 else np.uint8)


# -- the converters ---------------------------------------------------------------------------------

def _index(b: Builder, v: Value, op: Operation, suffix: str) -> Value:
    """The stored integers of ``v`` as int32 indices (GatherElements takes no 8-bit index)."""
    t = v.type.clone(element_type=IntegerType(32))
    return b.emit(nn.CAST, [b.value(v)], t, name=f"{base_name(v)}_i32{suffix}",
                  label=f"{op.label or base_name(op.results[0])}/index{suffix}", like=op, to=IntegerType(32))


def _gather(b: Builder, op: Operation, table: np.ndarray, index: Value) -> None:
    """``table[index]`` on the result's storage: GatherElements over a [len, 1] table and the indices
    flattened to [n, 1], reshaped back (ONNX Runtime's Gather copies each 1-byte entry as a block of its
    own; GatherElements is ~3x faster on a 1x32x160x160 tensor, measured)."""
    r = op.results[0]
    name, label = base_name(r), op.label or base_name(r)
    t = b.stored_constant(table.reshape(-1, 1), TensorType((table.size, 1), qtype(r.type)), f"{name}_table")
    column = b.emit(nn.RESHAPE, [index], index.type.clone(shape=(None, 1)), name=f"{name}_index_column",
                    label=f"{label}/column", like=op, shape=(-1, 1))
    node = onnx.helper.make_node("GatherElements", ["table", "index"], ["y"], axis=0)
    looked = b.emit(nn.ONNX_OP, [t, column], r.type.clone(shape=(None, 1)), name=f"{name}_column",
                    label=f"{label}/lookup", like=op, op_type="GatherElements", domain="", opset=b.opset,
                    node=base64.b64encode(node.SerializeToString()).decode("ascii"))
    shape = r.type.shape
    if shape is not None and sum(d is None for d in shape) <= 1:
        y = b.emit(nn.RESHAPE, [looked], r.type, name=r.name_hint, label=f"{label}/shape", like=op,
                   shape=tuple(-1 if d is None else d for d in shape))
    else:   # the index tensor has the result's shape: read it at run time
        dims = b.emit(nn.SHAPE, [index], TensorType((index.type.rank,), IntegerType(64)), name=f"{name}_dims",
                      label=f"{label}/dims", like=op)
        y = b.emit(nn.DYNAMIC_RESHAPE, [looked, dims], r.type, name=r.name_hint, label=f"{label}/shape", like=op,
                   dims=tuple(-1 if d is None else d for d in shape))
    b.define(r, y)


def _eight_bit(op: Operation) -> bool:
    """Every operand and the result 8-bit per tensor: what a 256-entry table indexes."""
    return _per_tensor(op, (8,))


def _per_tensor(op: Operation, widths: tuple[int, ...]) -> bool:
    for v in (*op.operands, *op.results):
        q = qtype(v.type)
        if not isinstance(q, UniformQuantizedType) or getattr(q.storage_type, "width", None) not in widths:
            return False
        if q.storage_type.width == 16 and not q.is_signed:
            return False
    return True


def lookup(b: Builder, op: Operation) -> None:
    """A unary elementwise qnn op as ``table[Cast(x, int32)]`` (its QDQ form unless its operand and result
    are 8-bit or signed 16-bit per tensor: an int16 input indexes a 65,536-entry table)."""
    if not _per_tensor(op, (8, 16)):
        return qdq.CONVERT[op.opdef](b, op)
    _gather(b, op, unary_table(op), _index(b, op.operands[0], op, ""))


def pair_lookup(b: Builder, op: Operation) -> None:
    """A binary elementwise qnn op as ``table[Cast(a)·256 + Cast(b)]`` (broadcasting; its QDQ form when
    not 8-bit)."""
    if not _eight_bit(op):
        return qdq.CONVERT[op.opdef](b, op)
    lhs, rhs = op.operands
    r = op.results[0]
    name, label = base_name(r), op.label or base_name(r)
    ia, ib = _index(b, lhs, op, "_a"), _index(b, rhs, op, "_b")
    i32 = r.type.clone(element_type=IntegerType(32))
    row = b.emit(nn.MUL, [ia, b.const(np.asarray(256, np.int32), f"{name}_row")], ia.type, name=f"{name}_row",
                 label=f"{label}/row", like=op)
    index = b.emit(nn.ADD, [row, ib], i32, name=f"{name}_index", label=f"{label}/index", like=op)
    _gather(b, op, pair_table(op), index)


def qoperator_table() -> dict[OpDef, object]:
    """Every declared elementwise qnn op with its lookup converter (``qoperator.CONVERT`` lets the
    ops with a fast ONNX Runtime int8 kernel override this)."""
    from ...quantize import ops   # noqa: F401  (the declarations register on import)
    from ...quantize.ops.registry import DECLARATIONS
    out: dict[OpDef, object] = {}
    for opdef in DECLARATIONS:
        if is_unary_elementwise(opdef):
            out[opdef] = lookup
        elif is_binary_elementwise(opdef):
            out[opdef] = pair_lookup
    return out
