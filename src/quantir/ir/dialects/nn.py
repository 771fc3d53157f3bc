"""The ``nn`` dialect: float network ops with ONNX semantics (NCHW), one ``OpDef`` each.

Op names are the snake_case of the ONNX op type (``Conv`` -> ``nn.conv``,
``GlobalAveragePool`` -> ``nn.global_average_pool``), attribute names the snake_case of
ONNX's (``transB`` -> ``trans_b``). ONNX inputs that must be compile-time constants for a
static shape (Reshape's shape, Slice's bounds, Pad's pads, Clip's bounds, Resize's scales,
reduction axes, Split sizes ...) are attributes.

The definitions are split by family, each a small table:

==================  ==========================================================================
``nn_elementwise``  unary, parameterised unary, binary/compare/logic with broadcasting,
                    variadic sum/max/min/mean, where, cast, clip, dropout, identity
``nn_conv``         conv, conv_transpose, conv_integer, qlinear_conv, max/average/global pools
``nn_linalg``       gemm, matmul, matmul_integer, qlinear_matmul
``nn_norm``         batch/layer/instance normalization, lrn, softmax, log_softmax, hardmax,
                    lp_normalization
``nn_reduce``       reduce_{mean,sum,max,min,prod,l1,l2,sum_square,log_sum,log_sum_exp}, arg_max/min
``nn_shape``        reshape, flatten, transpose, squeeze, unsqueeze, expand, tile,
                    depth_to_space, space_to_depth, shape, size, constant_of_shape, range
``nn_index``        concat, split, slice, gather, pad, resize
``nn_quant``        quantize_linear, dequantize_linear, dynamic_quantize_linear
``nn_recurrent``    lstm
``nn_encoder``      gather_elements, gather_nd, cum_sum, trilu, einsum, dynamic_expand,
                    dynamic_slice
==================  ==========================================================================

``nn.onnx_op`` keeps an ONNX node quantir does not implement (``load_onnx(...,
keep_unsupported=True)``): the serialized NodeProto travels in the op so an ONNX-Runtime
backed executor can still run it; the reference interpreter refuses it.
"""
from __future__ import annotations

from ..opdef import OpDef
from .nn_base import INT, STRING, PURE, define, element_dtype, variadic, variadic_results  # noqa: F401
from .nn_conv import (AVERAGE_POOL, CONV, CONV_INTEGER, CONV_TRANSPOSE, GLOBAL_AVERAGE_POOL,  # noqa: F401
                      GLOBAL_MAX_POOL, MAX_POOL, QLINEAR_CONV)
from .nn_elementwise import (ADD, BINARY, CAST, CLIP, COMPARE, DIV, DROPOUT, IDENTITY, IS_INF,  # noqa: F401
                             IS_NAN, MUL, NOT, PRELU, RELU, SUB, UNARY, VARIADIC, WHERE)
from .nn_index import CONCAT, GATHER, PAD, RESIZE, SLICE, SPLIT  # noqa: F401
from .nn_linalg import GEMM, MATMUL, MATMUL_INTEGER, QLINEAR_MATMUL  # noqa: F401
from .nn_norm import (BATCH_NORMALIZATION, HARDMAX, INSTANCE_NORMALIZATION, LAYER_NORMALIZATION,  # noqa: F401
                      LOG_SOFTMAX, LP_NORMALIZATION, LRN, SOFTMAX)
from .nn_quant import DEQUANTIZE_LINEAR, DYNAMIC_QUANTIZE_LINEAR, QUANTIZE_LINEAR  # noqa: F401
from .nn_reduce import ARG_MAX, ARG_MIN, REDUCE, REDUCE_MEAN  # noqa: F401
from .nn_shape import (CONSTANT_OF_SHAPE, DEPTH_TO_SPACE, EXPAND, FLATTEN, RANGE, RESHAPE, SHAPE,  # noqa: F401
                       SIZE, SPACE_TO_DEPTH, SQUEEZE, TILE, TRANSPOSE, UNSQUEEZE)
from .nn_shape import DYNAMIC_RESHAPE  # noqa: F401
from .nn_recurrent import LSTM, OPTIONAL_INPUTS as LSTM_OPTIONAL_INPUTS  # noqa: F401
from .nn_encoder import (CUM_SUM, DYNAMIC_EXPAND, DYNAMIC_SLICE, EINSUM, GATHER_ELEMENTS, GATHER_ND,  # noqa: F401
                         TRILU)

ONNX_OP = define(
    "onnx_op", (variadic("inputs"),), (variadic_results("outputs"),),
    {"op_type": STRING(required=True), "domain": STRING(""), "opset": INT(required=True),
     "node": STRING(required=True)},
    infer=None, traits=frozenset(),
    summary=("An ONNX node kept opaque: ``node`` is its serialized NodeProto, base64-encoded; the operands "
             "and results are the node's non-empty inputs and outputs, in order."))


def all_ops() -> list[OpDef]:
    """Every ``nn`` op definition, in registration order."""
    from ..opdef import registered_ops
    return [d for d in registered_ops() if d.dialect == "nn"]
