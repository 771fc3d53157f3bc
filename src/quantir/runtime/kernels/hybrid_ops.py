"""Interpreter bindings of the dynamic-range ("hybrid") ops (``ir/dialects/hybrid.py``).

Each reads the weight's storage integers and scales from its ``!quant.uniform`` type and calls
the bit-exact LiteRT kernel (``qkernels.hybrid`` / ``hybrid_conv``); the run-time quantization
of the float input happens inside that kernel, as it does in LiteRT.
"""
from __future__ import annotations

import numpy as np

from ...ir import Operation
from ...ir.dialects import qnn
from ...ir.dialects.hybrid import HYBRID_BATCH_MATMUL, HYBRID_CONV, HYBRID_EMBEDDING_LOOKUP, \
    HYBRID_FULLY_CONNECTED
from .. import qkernels as qk
from .qnn_ops import _padded_pads, activation_of


def _scales(op: Operation, operand: int = 1) -> np.ndarray:
    return np.atleast_1d(np.asarray(qnn.scales_of(op.operands[operand].type), np.float32))


def fully_connected(op: Operation, x, w, *rest):
    return qk.fully_connected_hybrid(x, w, _scales(op), rest[0] if rest else None, activation=activation_of(op),
                                     asymmetric_quantize_inputs=bool(op.attr("asymmetric_quantize_inputs")),
                                     keep_num_dims=bool(op.attr("keep_num_dims")))


def batch_matmul(op: Operation, lhs, rhs):
    return qk.batch_matmul_hybrid(lhs, rhs, _scales(op), adj_x=bool(op.attr("adj_x")), adj_y=bool(op.attr("adj_y")),
                                  asymmetric_quantize_inputs=bool(op.attr("asymmetric_quantize_inputs")))


def is_depthwise(op: Operation) -> bool:
    """group == C_in > 1 with one input channel per filter: LiteRT's DEPTHWISE_CONV_2D."""
    group, (c_in, w_in) = int(op.attr("group") or 1), (op.operands[0].type.shape[1], op.operands[1].type.shape[1])
    return group > 1 and group == c_in and w_in == 1


def conv(op: Operation, x, w, *rest):
    kernel = w.shape[2:]
    common = dict(pads=_padded_pads(op, x, kernel), strides=tuple(op.attr("strides") or (1, 1)),
                  dilations=tuple(op.attr("dilations") or (1, 1)), activation=activation_of(op))
    bias = rest[0] if rest else None
    if is_depthwise(op):
        return qk.depthwise_conv2d_hybrid(x, w, _scales(op), bias, **common)
    return qk.conv2d_hybrid(x, w, _scales(op), bias, **common)


def embedding_lookup(op: Operation, ids, table):
    ids = np.asarray(ids)
    rows = qk.embedding_lookup_hybrid(ids.reshape(-1), table, _scales(op))
    return rows.reshape(*ids.shape, *table.shape[1:])


KERNELS = {HYBRID_FULLY_CONNECTED: fully_connected, HYBRID_BATCH_MATMUL: batch_matmul, HYBRID_CONV: conv,
           HYBRID_EMBEDDING_LOOKUP: embedding_lookup}
