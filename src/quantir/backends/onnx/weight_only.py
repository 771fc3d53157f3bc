"""Weight-only modules (``quantize.weight_only``) as ONNX: DequantizeLinear feeding the float op, or
ONNX Runtime's ``com.microsoft.MatMulNBits`` / ``GatherBlockQuantized`` for blocked weights.

>>> save_weight_only(result.module, "minilm.int4.onnx")                       # doctest: +SKIP
>>> save_weight_only(result.module, "minilm.int4.std.onnx", matmul_nbits=False)   # doctest: +SKIP

Each weight chain of the module — ``arith.constant`` of storage integers, ``quant.scast`` to a per-axis
or sub-channel type, ``quant.dcast`` — becomes the storage initializer and one DequantizeLinear
(opset 21): ``axis`` for per-channel scales, ``axis`` + ``block_size`` for blocks, int4 storage as
``TensorProto.INT4`` (two values per byte), the zero points in the storage type. DequantizeLinear
computes ``(q - zp)·s`` in float32, the interpreter ``f32(double(s)·(q - zp))``: the same float32
for 4- and 8-bit integers, so the exported file and the module differ only in the float ops'
rounding.

``matmul_nbits=True`` (the default): a 4- or 8-bit weight blocked along K (a power of two >= 16)
and read only as a MatMul's B ([K, N]) becomes MatMulNBits(A, B packed [N, K/block,
block·bits/8] uint8, scales [N·K/block], zero points packed when asymmetric; a symmetric weight
stores q + 2^(bits-1) and uses the default zero point), with ``accuracy_level=0`` said explicitly
(float32 compute); a 4-bit table blocked along its rows and read only by Gathers becomes
GatherBlockQuantized (int4 data, [V, D/block] scales). Every other weight keeps its
DequantizeLinear. ``matmul_nbits=False``: DequantizeLinear everywhere, standard ONNX that any
runtime reads.

Which form is the default, measured (``bench/weight_only.py``, all-MiniLM-L6-v2 int4 block 32,
ONNX Runtime 1.32, one thread, median ms on this 2-core machine shared with other jobs, so only
the ordering within a column means much):

    batch x seq          1x64   1x128   32x64   32x128
    fp32                 15.5    27.4     860      984
    MatMulNBits form     13.9    24.5     847      889
    DequantizeLinear     44.8    58.5    1102     1099

The contrib form is as fast as fp32 or faster at every size; the DequantizeLinear form is slower
at every size, by ~30 ms a run at batch 1: ONNX Runtime does not constant-fold DequantizeLinear
(it keeps Q/DQ for its fusions), so the 30522x384 embedding table is dequantized on every run,
and its rewrite of DequantizeLinear -> MatMul into MatMulNBits (for 4- and 8-bit weights) runs
them with ``accuracy_level`` 4, int8 activations, unless the session sets
``session.qdq_matmulnbits_accuracy_level``: the file then computes other arithmetic than the
model's (cosine 0.9905 vs 0.9908 here; on the test model a 3e-2 difference). Hence the default:
the contrib ops, smaller too (0.158x vs 0.162x of the fp32 file: no zero points for symmetric
weights).
"""
from __future__ import annotations

import base64
import os
from pathlib import Path

import numpy as np
import onnx

from ...errors import UnsupportedOpError
from ...fileio import check_output
from ...ir import Function, Module, Operation, Value
from ...ir.builder import OpBuilder, function_like
from ...ir.dialects import arith, nn, quant
from ...ir.mapping import IRMapping
from ...types import FloatType, IntegerType, TensorType
from ...types.quant import UniformQuantizedPerAxisType, UniformQuantizedSubChannelType
from .api import DEFAULT_OPSET, export
from .dtypes import value_info
from .builder import CONTRIB_DOMAIN, CONTRIB_OPSET
from .exporter import write_model

__all__ = ["to_onnx_weight_only", "save_weight_only", "convert_weight_only"]

_F32 = FloatType("f32")


def _weight_chain(dcast: Operation) -> tuple[Operation, np.ndarray] | None:
    """(the scast, the stored integers) behind a weight ``quant.dcast``, else None."""
    s = getattr(dcast.operands[0], "op", None)
    if s is None or s.opdef is not quant.SCAST:
        return None
    c = getattr(s.operands[0], "op", None)
    if c is None or c.opdef is not arith.CONSTANT:
        return None
    array = getattr(c.attributes.get("value"), "array", None)
    return (s, np.asarray(array)) if array is not None else None


def _qtype(v: Value):
    return v.type.element_type if isinstance(v.type, TensorType) else v.type


def _nbits_block(dcast: Operation) -> int | None:
    """The block size when this weight can be MatMulNBits' B for every reader, else None."""
    t = _qtype(dcast.operands[0])
    if not isinstance(t, UniformQuantizedSubChannelType) or t.storage_width not in (4, 8):
        return None
    blocks = dict(t.block_sizes)
    b = blocks.get(0)
    shape = dcast.operands[0].type.shape
    if len(shape) != 2 or b is None or blocks.get(1, 1) != 1 or b < 16 or b & (b - 1):
        return None
    uses = dcast.results[0].uses
    if not uses or any(u.opdef is not nn.MATMUL or i != 1 for u, i in uses):
        return None
    return b


def _gather_block(dcast: Operation) -> int | None:
    """The block size when this weight is a 4-bit table, blocked along its rows, read only by
    Gathers along axis 0: GatherBlockQuantized's input; else None."""
    t = _qtype(dcast.operands[0])
    if not isinstance(t, UniformQuantizedSubChannelType) or t.storage_width != 4:
        return None
    blocks = dict(t.block_sizes)
    b = blocks.get(1)
    if len(dcast.operands[0].type.shape) != 2 or b is None or blocks.get(0, 1) != 1 or b < 16 or b & (b - 1):
        return None
    uses = dcast.results[0].uses
    if not uses or any(u.opdef is not nn.GATHER or i != 0 or (u.attr("axis") or 0) != 0 for u, i in uses):
        return None
    return b


def _gather_block_quantized(b: OpBuilder, m: IRMapping, gather: Operation, dcast: Operation, block: int) -> Value:
    """com.microsoft.GatherBlockQuantized: the rows of the int4 table dequantized as they are gathered."""
    t = _qtype(dcast.operands[0])
    name = dcast.results[0].name_hint or "table"
    stored = m.lookup(_weight_chain(dcast)[0].operands[0])
    inputs = [stored, m.lookup(gather.operands[1]), b.constant(np.asarray(t.scales_array(), np.float32),
                                                               name=f"{name}_scale")]
    zps = t.zero_points_array()
    if np.any(zps != 0):
        inputs.append(b.constant(np.asarray(zps, np.int8), IntegerType(4), name=f"{name}_zero_point"))
    node = onnx.helper.make_node("GatherBlockQuantized", [f"i{i}" for i in range(len(inputs))], ["y"],
                                 domain=CONTRIB_DOMAIN, gather_axis=0, quantize_axis=1, block_size=block)
    op = nn.ONNX_OP.build(inputs, [gather.results[0].type], op_type="GatherBlockQuantized", domain=CONTRIB_DOMAIN,
                          opset=CONTRIB_OPSET, node=base64.b64encode(node.SerializeToString()).decode("ascii"))
    out = b.insert(op, gather).results[0]
    out.name_hint = gather.results[0].name_hint
    return out


def _pack_nibbles(u: np.ndarray) -> np.ndarray:
    """Unsigned 4-bit values along the last axis, two per byte, the first in the low nibble."""
    if u.shape[-1] % 2:
        u = np.concatenate([u, np.zeros(u.shape[:-1] + (1,), u.dtype)], axis=-1)
    u = u.astype(np.uint8)
    return (u[..., 0::2] | (u[..., 1::2] << 4)).astype(np.uint8)


def _matmul_nbits(b: OpBuilder, mm: Operation, a: Value, dcast: Operation, block: int) -> Value:
    scast, q = _weight_chain(dcast)
    t = _qtype(dcast.operands[0])
    k, n = q.shape
    kb = k // block
    bits = t.storage_width
    offset = 1 << (bits - 1)        # MatMulNBits stores unsigned values; its default zero point is this
    u = (q.T.astype(np.int16) + offset).reshape(n, kb, block)       # [N, K/B, B]
    packed = _pack_nibbles(u) if bits == 4 else u.astype(np.uint8)  # [N, K/B, B·bits/8]
    scales = np.asarray(t.scales_array(), np.float32).T.reshape(-1)   # [K/B, N] -> N-major
    zps = t.zero_points_array()
    name = dcast.results[0].name_hint or "weight"
    inputs = [a, b.constant(packed, IntegerType(8, "unsigned"), name=f"{name}_nbits"),
              b.constant(scales, name=f"{name}_scales")]
    if np.any(zps != 0):
        uz = (zps.T + offset).astype(np.int16)
        inputs.append(b.constant((_pack_nibbles(uz) if bits == 4 else uz.astype(np.uint8)).reshape(-1),
                                 IntegerType(8, "unsigned"), name=f"{name}_zero_points"))
    # accuracy_level 0 (float32 compute) said explicitly: the model's arithmetic, not int8 activations
    node = onnx.helper.make_node("MatMulNBits", [f"i{i}" for i in range(len(inputs))], ["y"], domain=CONTRIB_DOMAIN,
                                 K=k, N=n, bits=bits, block_size=block, accuracy_level=0)
    op = nn.ONNX_OP.build(inputs, [mm.results[0].type], op_type="MatMulNBits", domain=CONTRIB_DOMAIN,
                          opset=CONTRIB_OPSET, node=base64.b64encode(node.SerializeToString()).decode("ascii"))
    out = b.insert(op, mm).results[0]
    out.name_hint = mm.results[0].name_hint
    return out


def _dequantize(b: OpBuilder, dcast: Operation, stored: Value) -> Value:
    t = _qtype(dcast.operands[0])
    name = dcast.results[0].name_hint or "weight"
    storage = IntegerType(t.storage_width)
    if isinstance(t, UniformQuantizedPerAxisType):
        scales, zps = t.scales_array(), t.zero_points_array()
        attrs = {"axis": t.quantized_dimension}
    elif isinstance(t, UniformQuantizedSubChannelType):
        blocked = [(d, s) for d, s in t.block_sizes if s != 1]
        if len(blocked) != 1:
            raise UnsupportedOpError(f"{dcast.describe()}: ONNX DequantizeLinear blocks along one axis; '{t}' "
                                     f"has blocks along {len(blocked)}")
        scales, zps = t.scales_array(), t.zero_points_array()
        attrs = {"axis": blocked[0][0], "block_size": blocked[0][1]}
    else:
        scales, zps, attrs = np.asarray(t.scale), np.asarray(t.zero_point), {}
    s = b.constant(np.asarray(scales, np.float32), name=f"{name}_scale")
    z = b.constant(np.asarray(zps, np.int8), storage, name=f"{name}_zero_point")
    out = b.insert(nn.DEQUANTIZE_LINEAR.build([stored, s, z], **attrs), dcast).results[0]
    out.name_hint = name
    return out


def convert_weight_only(module: Module | Function, *, matmul_nbits: bool = False) -> Module:
    """The ONNX-shaped twin of a weight-only module: each weight ``quant.dcast`` as
    ``nn.dequantize_linear`` (or MatMulNBits), everything else as it is."""
    fn = module.main if isinstance(module, Module) else module
    new = function_like(fn)
    b = OpBuilder.at_end(new)
    m: IRMapping[Value] = IRMapping()
    m.map_all(fn.arguments, new.arguments)
    nbits = {op: _nbits_block(op) for op in fn.ops if op.opdef is quant.DCAST} if matmul_nbits else {}
    tables = {op: _gather_block(op) for op in fn.ops if op.opdef is quant.DCAST} if matmul_nbits else {}
    for op in fn.ops:
        if op.opdef is quant.SCAST and all(u.opdef is quant.DCAST and _weight_chain(u) for u, _ in op.results[0].uses):
            continue   # the stored integers go to DequantizeLinear as they are
        if op.opdef is quant.DCAST and _weight_chain(op) is not None:
            if nbits.get(op) or tables.get(op):
                continue   # each reading MatMul becomes MatMulNBits, each Gather GatherBlockQuantized
            stored = m.lookup(_weight_chain(op)[0].operands[0])
            m.map(op.results[0], _dequantize(b, op, stored))
            continue
        if op.opdef is nn.MATMUL and getattr(op.operands[1], "op", None) in nbits and nbits[op.operands[1].op]:
            m.map(op.results[0], _matmul_nbits(b, op, m.lookup(op.operands[0]), op.operands[1].op,
                                               nbits[op.operands[1].op]))
            continue
        if op.opdef is nn.GATHER and tables.get(getattr(op.operands[0], "op", None)):
            dq = op.operands[0].op
            m.map(op.results[0], _gather_block_quantized(b, m, op, dq, tables[dq]))
            continue
        b.clone(op, m)
    new.update_type()
    return Module([new], name=module.name if isinstance(module, Module) else None)


def to_onnx_weight_only(module: Module | Function, *, matmul_nbits: bool = True,
                        opset: int | None = None) -> onnx.ModelProto:
    """The weight-only module as an ONNX model (opset 21 at least: int4 and blocked DequantizeLinear)."""
    opset = DEFAULT_OPSET if opset is None else int(opset)
    if opset < 21:
        raise UnsupportedOpError(f"weight-only export needs ONNX opset 21 or newer (int4 and blocked "
                                 f"DequantizeLinear); asked for {opset}")
    converted = convert_weight_only(module, matmul_nbits=matmul_nbits)
    exported = export(converted, opset=opset)
    model = exported.model
    # the contrib ops' result types, which ONNX shape inference does not know (readers of the file need them)
    model.graph.value_info.extend(value_info(exported.names[op.results[0]], op.results[0].type, "contrib output")
                                  for op in converted.main.ops if op.opdef is nn.ONNX_OP)
    model.doc_string = "quantir weight-only export" + (", ONNX Runtime contrib ops" if matmul_nbits else
                                                        ", DequantizeLinear")
    return model


def save_weight_only(module: Module | Function, path: "str | os.PathLike", *, matmul_nbits: bool = True,
                     opset: int | None = None) -> Path:
    """Export and write ``path`` atomically (built and serialized before the file is touched)."""
    path = Path(path)
    check_output(path)
    write_model(to_onnx_weight_only(module, matmul_nbits=matmul_nbits, opset=opset), path)
    return path
