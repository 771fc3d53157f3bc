"""Data movement that LiteRT's int8 spec lists beyond the shape ops: GATHER, SPACE_TO_DEPTH,
SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND. Each copies stored integers, so its output shares
its input's scale and zero point (the spec's rule; LiteRT's Prepare enforces it for the two
batch ops).

- GATHER is ``nn.gather`` on the quantized data: its float kernel copies stored integers. ONNX
  counts a negative index from the end, LiteRT's GATHER refuses one; so the lowering rewrites
  constant indices to their non-negative form, and a Gather whose indices are computed at run
  time stays float (nothing proves them non-negative, and quantir has no integer ops to add
  the axis size to the negative ones) — except a lookup in a constant table (token and position
  embeddings), which becomes an int8 table: its ids are non-negative by meaning, ONNX runtimes
  still count a negative one from the end, LiteRT refuses it with an error, and an id past the
  table is an error in both (never a wrong value).
- SPACE_TO_DEPTH is ``nn.space_to_depth``: ONNX's SpaceToDepth on NCHW is LiteRT's on NHWC
  (the channel of a block pixel is ``(dy·b + dx)·C + c`` in both).
- SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND are TFLite's way to write a dilated convolution.
  ONNX puts the dilation on Conv itself, so no ONNX graph needs them and they have no pattern:
  quantir meets them in .tflite files (``qnn.space_to_batch_nd`` / ``qnn.batch_to_space_nd``,
  NCHW like every qnn op; the pad value of SPACE_TO_BATCH_ND is the zero point, which an ``nn``
  op on stored integers would not know). The ONNX exports write them as Pad / Reshape /
  Transpose / Slice, which move the same integers (backends/onnx/space_batch.py).
"""
from __future__ import annotations

import numpy as np

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...rewrite import Match, Pat
from ...runtime import qkernels as qk
from ...runtime.kernels.qnn_ops import prepare_once, scale_of, zero_point_of
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, constant_array, unary
from ..rules import ACT, ANY, SAME_AS, OpSpec
from .registry import QuantOp, SolverRules, declare
from .shape import lower_data_movement

# -- GATHER ------------------------------------------------------------------------------------------


def _check_gather(m: Match) -> str | None:
    op = m.ops["op"]
    indices = constant_array(op.operands[1])
    shape = op.operands[0].type.shape
    if indices is None:
        if constant_array(op.operands[0]) is not None and shape and None not in shape:
            return None   # an embedding lookup: ids are >= 0 by meaning (see the module notes)
        return ("its indices are computed at run time: ONNX counts a negative index from the end, LiteRT's "
                "GATHER refuses it, and nothing proves them non-negative")
    axis = int(op.attr("axis")) % len(shape) if shape else 0
    if np.any(indices < 0) and (not shape or shape[axis] is None):
        return (f"its negative indices count from the end of axis {axis}, whose size is only known at run time; "
                "LiteRT's GATHER needs them non-negative")
    return None


def lower_gather(lw: Lowerer, r: Region) -> Value:
    """``nn.gather`` on the integer data, its constant indices made non-negative for LiteRT."""
    op = r.match.ops["op"]
    data, index_value = op.operands
    indices = constant_array(index_value)
    if indices is not None and np.any(indices < 0):
        size = data.type.shape[int(op.attr("axis")) % len(data.type.shape)]
        fixed = np.where(indices < 0, indices + size, indices).astype(indices.dtype)
        index_value = lw.constant(fixed, index_value.type.element_type)
    else:
        index_value = lw.floating(index_value)
    x = r.match["x"]
    # a constant table is stored with the output's parameters (SAME_AS): the solver gave the
    # output a range covering the whole table (``covers_constant_inputs``)
    table = lw.quantized(x, lw.params[r.output]) if constant_array(x) is not None else lw.input(x)
    new = Operation(nn.GATHER, [table, index_value], [lw.out_type(r)], dict(op.attributes),
                    op.loc, op.label)
    return lw.emit(new).result


GATHER = declare(QuantOp(
    nn.GATHER, OP.GATHER, OpSpec((ACT, ANY), SAME_AS(0), note="copies stored integers: the data's parameters"),
    patterns=(QuantizerPattern("gather", Pat.op(nn.GATHER, Pat.any("x"), Pat.any("indices"), name="op"),
                               lower_gather, check=_check_gather,
                               doc="Gather with constant indices, or a lookup in a constant table: a copy"),),
    qdq_ops=(nn.GATHER,), solver=SolverRules(covers_constant_inputs=True), int16=True,
    doc="constant indices (made non-negative at lowering: LiteRT refuses negative ones), or a constant table"))

# -- SPACE_TO_DEPTH ------------------------------------------------------------------------------------

SPACE_TO_DEPTH = declare(QuantOp(
    nn.SPACE_TO_DEPTH, OP.SPACE_TO_DEPTH, OpSpec((ACT,), SAME_AS(0)),
    patterns=(QuantizerPattern("space_to_depth", unary(nn.SPACE_TO_DEPTH), lower_data_movement,
                               doc="SpaceToDepth: a copy (ONNX's NCHW order is LiteRT's NHWC order)"),),
    qdq_ops=(nn.SPACE_TO_DEPTH,)))

# -- SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND (read from .tflite only) -------------------------------------


def _pairs(flat) -> list[tuple[int, int]]:
    """A flattened ``[M, 2]`` attribute as M (begin, end) pairs."""
    flat = [int(v) for v in flat]
    return list(zip(flat[0::2], flat[1::2]))


def _params(v) -> tuple[float, int]:
    return scale_of(v), zero_point_of(v)


def space_to_batch_nd(op: Operation, x: np.ndarray) -> np.ndarray:
    pad_value = prepare_once(op, lambda: qk.prepare_space_to_batch_nd(_params(op.operands[0]),
                                                                      _params(op.results[0])))
    return qk.space_to_batch_nd(x, block_shape=op.attr("block_shape"), paddings=_pairs(op.attr("paddings")),
                                pad_value=pad_value)


def batch_to_space_nd(op: Operation, x: np.ndarray) -> np.ndarray:
    prepare_once(op, lambda: qk.prepare_batch_to_space_nd(_params(op.operands[0]), _params(op.results[0])))
    return qk.batch_to_space_nd(x, block_shape=op.attr("block_shape"), crops=_pairs(op.attr("crops")))


_BLOCK_ROW = OpSpec((ACT, ANY, ANY), SAME_AS(0), note="LiteRT's Prepare requires the input's scale and zero point")

SPACE_TO_BATCH_ND = declare(QuantOp(
    qnn.SPACE_TO_BATCH_ND, OP.SPACE_TO_BATCH_ND, _BLOCK_ROW, kernel=space_to_batch_nd,
    doc="no ONNX pattern: ONNX writes dilation on Conv; read from .tflite files"))
BATCH_TO_SPACE_ND = declare(QuantOp(
    qnn.BATCH_TO_SPACE_ND, OP.BATCH_TO_SPACE_ND, _BLOCK_ROW, kernel=batch_to_space_nd,
    doc="no ONNX pattern: ONNX writes dilation on Conv; read from .tflite files"))
