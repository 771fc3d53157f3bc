"""SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND in ONNX, which has neither: Pad / Reshape / Transpose / Slice.

Both only move stored integers (SPACE_TO_BATCH_ND pads with the zero point, real 0), so the
sequence below is exact in either export: QDQ runs it on the dequantized input (a Pad with
0.0, which quantizes back to the zero point) between one DequantizeLinear and one
QuantizeLinear; QOperator runs it on the int8 tensor (a Pad with the zero point), as ONNX
Runtime's int8 Pad, Reshape, Transpose and Slice do. On NCHW with block ``(bh, bw)``:

- space to batch: Pad -> Reshape ``[N, C, H'/bh, bh, W'/bw, bw]`` -> Transpose
  ``[bh, bw, N, C, H'/bh, W'/bw]`` -> Reshape ``[bh·bw·N, C, H'/bh, W'/bw]``: batch index
  ``(i·bw + j)·N + n`` as LiteRT's;
- batch to space: Reshape ``[bh, bw, N, C, H, W]`` -> Transpose ``[N, C, H, bh, W, bw]`` ->
  Reshape ``[N, C, H·bh, W·bw]`` -> Slice (the crops).

One spatial axis (NCH) is the same with one block. The batch may be dynamic (Reshape's 0 and
-1 carry it); spatial sizes must be static.
"""
from __future__ import annotations

from ...errors import UnsupportedOpError
from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...types import TensorType
from .builder import Builder, base_name, float_type, qtype


def _sizes(op: Operation) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """Block sizes, (begin, end) pairs and the input's static spatial sizes."""
    x = op.operands[0].type
    if x.shape is None or None in x.shape[1:]:
        raise UnsupportedOpError(f"{op.describe()}: the ONNX form needs static channel and spatial sizes, got {x}")
    flat = [int(v) for v in op.attr("paddings" if "paddings" in op.attributes else "crops")]
    return [int(b) for b in op.attr("block_shape")], list(zip(flat[0::2], flat[1::2])), list(x.shape[2:])


def space_to_batch(b: Builder, op: Operation, x: Value, like: TensorType) -> Value:
    """``op`` (qnn.space_to_batch_nd) on ``x``; intermediate and result types take ``like``'s element
    type (float for QDQ, the quantized type for QOperator)."""
    block, pads, spatial = _sizes(op)
    m, name, label = len(block), base_name(op.results[0]), op.label or base_name(op.results[0])
    n, c = x.type.shape[:2]
    padded = [d + lo + hi for d, (lo, hi) in zip(spatial, pads)]
    pad_value = 0.0 if qtype(like) is None else float(qtype(like).zero_point)   # real 0 either way
    if any(lo or hi for lo, hi in pads):
        x = b.emit(nn.PAD, [x], like.clone(shape=(n, c, *padded)), name=f"{name}_pad", label=f"{label}/pad",
                   like=op, pads=[0, 0, *(lo for lo, _ in pads), 0, 0, *(hi for _, hi in pads)],
                   constant_value=pad_value)
    outer = [d // k for d, k in zip(padded, block)]
    split = [v for o, k in zip(outer, block) for v in (o, k)]
    x = b.emit(nn.RESHAPE, [x], like.clone(shape=(n, c, *split)), name=f"{name}_split", label=f"{label}/split",
               like=op, shape=[0, c, *split])
    perm = [3 + 2 * i for i in range(m)] + [0, 1] + [2 + 2 * i for i in range(m)]
    x = b.emit(nn.TRANSPOSE, [x], like.clone(shape=(*block, n, c, *outer)), name=f"{name}_phases",
               label=f"{label}/phases", like=op, perm=perm)
    return b.emit(nn.RESHAPE, [x], like, name=op.results[0].name_hint, label=label, like=op, shape=[-1, c, *outer])


def batch_to_space(b: Builder, op: Operation, x: Value, like: TensorType) -> Value:
    """``op`` (qnn.batch_to_space_nd) on ``x``, typed like ``like`` (see ``space_to_batch``)."""
    block, crops, spatial = _sizes(op)
    m, name, label = len(block), base_name(op.results[0]), op.label or base_name(op.results[0])
    total = 1
    for k in block:
        total *= k
    n = None if x.type.shape[0] is None else x.type.shape[0] // total
    c = x.type.shape[1]
    x = b.emit(nn.RESHAPE, [x], like.clone(shape=(*block, n, c, *spatial)), name=f"{name}_phases",
               label=f"{label}/phases", like=op, shape=[*block, -1, c, *spatial])
    perm = [m, m + 1] + [a for i in range(m) for a in (m + 2 + i, i)]
    x = b.emit(nn.TRANSPOSE, [x], like.clone(shape=(n, c, *(v for d, k in zip(spatial, block) for v in (d, k)))),
               name=f"{name}_interleaved", label=f"{label}/interleaved", like=op, perm=perm)
    full = [d * k for d, k in zip(spatial, block)]
    if not any(lo or hi for lo, hi in crops):
        return b.emit(nn.RESHAPE, [x], like, name=op.results[0].name_hint, label=label, like=op, shape=[-1, c, *full])
    x = b.emit(nn.RESHAPE, [x], like.clone(shape=(n, c, *full)), name=f"{name}_uncropped",
               label=f"{label}/uncropped", like=op, shape=[-1, c, *full])
    return b.emit(nn.SLICE, [x], like, name=op.results[0].name_hint, label=label, like=op,
                  starts=[lo for lo, _ in crops], ends=[d - hi for d, (_, hi) in zip(full, crops)],
                  axes=list(range(2, 2 + m)))


def _qdq(move):
    def convert(b: Builder, op: Operation) -> None:
        r = op.results[0]
        b.quantize(r, move(b, op, b.dequantized(op.operands[0]), float_type(r.type)))
    return convert


def _qoperator(move):
    def convert(b: Builder, op: Operation) -> None:
        r = op.results[0]
        b.define(r, move(b, op, b.value(op.operands[0]), r.type))
    return convert


QDQ = {qnn.SPACE_TO_BATCH_ND: _qdq(space_to_batch), qnn.BATCH_TO_SPACE_ND: _qdq(batch_to_space)}
QOPERATOR = {qnn.SPACE_TO_BATCH_ND: _qoperator(space_to_batch), qnn.BATCH_TO_SPACE_ND: _qoperator(batch_to_space)}
