"""quantir check: the weight-only rows.

A float op whose weight is a DequantizeLinear of constant integers and whose result is not quantized
(an ONNX weight-only model): 8- or 4-bit storage, scales finite and positive, per tensor, per
output channel or in blocks along the reduction axis, zero points in the storage range; and the
ONNX Runtime contrib ops MatMulNBits and GatherBlockQuantized."""
from __future__ import annotations

import numpy as np

from ...ir import Function, Operation, Value
from ...ir.dialects import arith, nn
from ...ir.dialects.nn_quant import quantization_layout
from ...types import IntegerType
from ..rules import Violation


def _role(op: Operation) -> tuple[int, int, int] | None:
    """(weight operand, output-channel axis, reduction axis) of a weight-only op kind."""
    if op.opdef is nn.MATMUL:
        return 1, 1, 0
    if op.opdef is nn.GEMM:
        return (1, 0, 1) if op.attr("trans_b") else (1, 1, 0)
    if op.opdef is nn.CONV:
        return 1, 0, 1
    if op.opdef is nn.GATHER and (op.attr("axis") or 0) == 0:
        return 0, 0, 1
    return None


def _const_array(v: Value) -> np.ndarray | None:
    op = getattr(v, "op", None)
    if op is None or op.opdef is not arith.CONSTANT:
        return None
    a = getattr(op.attributes.get("value"), "array", None)
    return None if a is None else np.asarray(a)


def weight_only_rows(fn: Function) -> tuple[int, list]:
    """(ops checked, violations) for the weight-only ops of an imported ONNX model."""
    checked, found = 0, []
    for op in fn.ops:
        if op.opdef is nn.ONNX_OP and op.attr("op_type") in CONTRIB_ROWS:
            checked += 1
            found += [Violation(op.label or op.name, f"{op.attr('op_type')} (weight-only)", "input 1", m)
                      for m in CONTRIB_ROWS[op.attr("op_type")](op)]
            continue
        role = _role(op)
        if role is None or not op.results or any(u.opdef is nn.QUANTIZE_LINEAR for u, _ in op.results[0].uses):
            continue
        index, channel, reduction = role
        dq = getattr(op.operands[index], "op", None) if index < len(op.operands) else None
        if dq is None or dq.opdef is not nn.DEQUANTIZE_LINEAR or _const_array(dq.operands[0]) is None:
            continue
        checked += 1
        kind = f"{op.name.split('.')[-1].upper()} (weight-only)"
        where = f"input {index}"

        def bad(message: str) -> None:
            found.append(Violation(op.label or op.name, kind, where, message))
        q = _const_array(dq.operands[0])
        et = dq.operands[0].type.element_type
        if not isinstance(et, IntegerType) or et.width not in (4, 8):
            bad(f"weights must be stored in 8 or 4 bits, found {et}")
            continue
        lo, hi = (0, (1 << et.width) - 1) if et.signedness == "unsigned" else (-(1 << (et.width - 1)),
                                                                                (1 << (et.width - 1)) - 1)
        if q.size and (q.min() < lo or q.max() > hi):
            bad(f"stored values outside the {et} range [{lo}, {hi}]")
        scale = _const_array(dq.operands[1])
        zp = _const_array(dq.operands[2]) if len(dq.operands) > 2 else None
        if scale is None:
            bad("the scale must be a constant")
            continue
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            bad("scales must be finite and positive")
        if zp is not None and zp.size and (zp.min() < lo or zp.max() > hi):
            bad(f"zero points outside the {et} range [{lo}, {hi}]")
        rank = q.ndim
        layout = quantization_layout(q.shape, scale.shape, dq.attr("axis"), dq.attr("block_size"))
        axis = dq.attr("axis") % rank if rank else 0
        if layout == "axis" and axis != channel:
            bad(f"per-channel scales must be along the output channels (axis {channel}), found axis {axis}")
        if layout == "block" and axis != reduction:
            bad(f"blocks must run along the reduction axis ({reduction}), found axis {axis}")
    return checked, found


def _contrib_node(op: Operation):
    import base64

    import onnx
    node = onnx.NodeProto()
    node.ParseFromString(base64.b64decode(op.attr("node")))
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _scales_ok(scales: np.ndarray | None, count: int) -> list[str]:
    if scales is None:
        return ["the scales must be a constant"]
    out = [] if scales.size == count else [f"{count} scales expected, found {scales.size}"]
    if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        out.append("scales must be finite and positive")
    return out


def _block_ok(block: int) -> list[str]:
    return [] if block >= 16 and not block & (block - 1) else [f"block_size {block} must be a power of 2, >= 16"]


def _matmul_nbits_row(op: Operation) -> list[str]:
    """com.microsoft.MatMulNBits: B packed [N, K/block, block·bits/8] uint8, N·K/block scales."""
    a = _contrib_node(op)
    k, n, bits, block = a.get("K"), a.get("N"), a.get("bits", 4), a.get("block_size", 0)
    if len(op.operands) < 3:
        return ["needs A, B and scales"]
    found = _block_ok(block) + ([] if bits in (4, 8) else [f"bits must be 4 or 8, found {bits}"])
    b = _const_array(op.operands[1])
    blocks = -(-k // block) if block else 0
    if b is None or b.dtype != np.uint8 or b.shape != (n, blocks, block * bits // 8):
        found.append(f"B must be a constant uint8 [{n}, {blocks}, {block * bits // 8}], found "
                     f"{None if b is None else (b.dtype.name, list(b.shape))}")
    return found + _scales_ok(_const_array(op.operands[2]), n * blocks)


def _gather_block_quantized_row(op: Operation) -> list[str]:
    """com.microsoft.GatherBlockQuantized: an int4 table [V, D] with [V, D/block] scales."""
    a = _contrib_node(op)
    block = a.get("block_size", 128)
    data = _const_array(op.operands[0])
    et = op.operands[0].type.element_type
    found = _block_ok(block)
    if data is None or not isinstance(et, IntegerType) or et.width not in (4, 8) or data.ndim != 2:
        return found + [f"the table must be a constant 2-D int4/uint4/uint8 tensor, found {et}"]
    d = data.shape[1] * (2 if et.width == 8 and a.get("bits", 4) == 4 else 1)
    return found + _scales_ok(_const_array(op.operands[2]), data.shape[0] * -(-d // block))


CONTRIB_ROWS = {"MatMulNBits": _matmul_nbits_row, "GatherBlockQuantized": _gather_block_quantized_row}
