"""Integer kernels, bit-exact with LiteRT's int8 reference kernels (docs/numerics.md §2).

One small module per op. Each op has

* a ``prepare_*`` function — the only place float appears, mirroring LiteRT's Prepare:
  it turns scales and zero points into integers (multipliers via
  :mod:`quantir.numerics.multipliers` and ``quantize_multiplier``, clamp ranges, lookup
  tables) and rejects the parameter combinations LiteRT rejects, with
  :class:`QKernelError`; it returns a record whose ``as_kwargs()`` feeds the kernel;
* the kernel — a pure function over numpy integer arrays and explicit integer
  parameters, vectorised over the whole batch, returning int8 (or the storage dtype).
  All rounding goes through :mod:`quantir.numerics`.

Element-wise int8 -> int8 ops (RELU*, LEAKY_RELU, HARD_SWISH, requantizing QUANTIZE, and
the two-input ADD, SUB, MUL) are functions of at most 256 x 256 input values: the kernels
evaluate LiteRT's integer formula on every possible input once per call, then gather —
the same integers, far fewer fixed-point passes over big tensors. Convolutions take exact
integer accumulators from float BLAS and requantize them with an exact float64 form of MBQM
(``_fast_requant``); with numba installed (the ``fast`` extra) the hot loops are compiled
(``_jit``), with the same results.

Layout is NCHW (ONNX's, which the IR keeps): conv weights OIHW ``[C_out, C_in/groups,
KH, KW]``, depthwise ``[C_out, 1, KH, KW]``, fully-connected ``[C_out, K]``. Padding is
explicit ``(top, left, bottom, right)``; :func:`tflite_pads` gives TFLite's SAME/VALID.

Example — a per-channel int8 convolution:

>>> import numpy as np
>>> from quantir.runtime import qkernels as qk
>>> p = qk.prepare_conv2d(0.02, [0.003, 0.004], 0.05, output_zero_point=-3, activation="relu6")
>>> x = np.full((1, 1, 3, 3), 10, dtype=np.int8)
>>> w = np.ones((2, 1, 3, 3), dtype=np.int8)
>>> qk.conv2d(x, w, np.array([100, -100], np.int32), input_zero_point=0, pads=(1, 1, 1, 1),
...           **p.as_kwargs())[0, :, 1, 1]
array([-3, -3], dtype=int8)

Dynamic-range ("hybrid") kernels — float32 activations quantized at run time, int8 weights,
float32 output — are :mod:`~quantir.runtime.qkernels.hybrid` (FULLY_CONNECTED, BATCH_MATMUL,
EMBEDDING_LOOKUP) and :mod:`~quantir.runtime.qkernels.hybrid_conv` (CONV_2D, DEPTHWISE_CONV_2D).

The ops that need no arithmetic on values (reshape, transpose, slice, gather, concat
with shared parameters, ...) need no kernel beyond numpy data movement on raw q.
"""
from quantir.runtime.qkernels._common import AccumulatorOverflowError, KernelParams, QKernelError, activation_range
from quantir.runtime.qkernels.add import AddParams, add, prepare_add
from quantir.runtime.qkernels.average_pool import average_pool2d, prepare_average_pool
from quantir.runtime.qkernels.concatenation import concatenation, prepare_concatenation
from quantir.runtime.qkernels.conv2d import ConvParams, conv2d, prepare_conv2d
from quantir.runtime.qkernels.depthwise_conv2d import depthwise_conv2d
from quantir.runtime.qkernels.dequantize import dequantize
from quantir.runtime.qkernels.fully_connected import FullyConnectedParams, fully_connected, prepare_fully_connected
from quantir.runtime.qkernels.hard_swish import HardSwishParams, hard_swish, prepare_hard_swish
from quantir.runtime.qkernels.l2_normalization import l2_normalization, prepare_l2_normalization
from quantir.runtime.qkernels.leaky_relu import LeakyReluParams, leaky_relu, prepare_leaky_relu
from quantir.runtime.qkernels.logistic import logistic, prepare_logistic
from quantir.runtime.qkernels.max_pool import max_pool2d, prepare_max_pool
from quantir.runtime.qkernels.mean import MeanParams, mean, prepare_mean
from quantir.runtime.qkernels.mul import MulParams, mul, prepare_mul
from quantir.runtime.qkernels.pad import pad, prepare_pad
from quantir.runtime.qkernels.padding import output_size, tflite_pads
from quantir.runtime.qkernels.quantize import RequantizeParams, prepare_requantize, quantize, requantize
from quantir.runtime.qkernels.reduce_sum import SumParams, prepare_sum, reduce_sum
from quantir.runtime.qkernels.relu import ReluParams, prepare_relu, relu
from quantir.runtime.qkernels.resize_bilinear import prepare_resize_bilinear, resize_bilinear
from quantir.runtime.qkernels.resize_nearest import resize_nearest
from quantir.runtime.qkernels.rsqrt import RsqrtParams, prepare_rsqrt, rsqrt
from quantir.runtime.qkernels.batch_matmul import BatchMatMulParams, batch_matmul, prepare_batch_matmul
from quantir.runtime.qkernels.softmax import (SoftmaxInt16Params, SoftmaxLutParams, SoftmaxParams, prepare_softmax,
                                              softmax, softmax_lut)
from quantir.runtime.qkernels.sub import SubParams, prepare_sub, sub
from quantir.runtime.qkernels.squared_difference import (SquaredDifferenceParams, prepare_squared_difference,
                                                         squared_difference)
from quantir.runtime.qkernels.tanh import prepare_tanh, tanh
from quantir.runtime.qkernels.comparison import ComparisonKind, ComparisonParams, compare, prepare_comparison
from quantir.runtime.qkernels.arg_max import arg_max
from quantir.runtime.qkernels.maximum_minimum import maximum, minimum, prepare_maximum_minimum
from quantir.runtime.qkernels.gather import gather, prepare_gather
from quantir.runtime.qkernels.space_to_depth import prepare_space_to_depth, space_to_depth, space_to_depth_nhwc
from quantir.runtime.qkernels.space_batch import (batch_to_space_nd, batch_to_space_nd_nhwc, prepare_batch_to_space_nd,
                                                  prepare_space_to_batch_nd, space_to_batch_nd, space_to_batch_nd_nhwc)
from quantir.runtime.qkernels.shape import shape
from quantir.runtime.qkernels.gelu import gelu, prepare_gelu
from quantir.runtime.qkernels.log_softmax import (LogSoftmaxLutParams, LogSoftmaxParams, log_softmax,
                                                  log_softmax_lut, prepare_log_softmax)
from quantir.runtime.qkernels.hybrid import (asymmetric_quantize_rows, batch_matmul_hybrid, embedding_lookup_hybrid,
                                             fully_connected_hybrid, symmetric_quantize_rows, weight_row_sums)
from quantir.runtime.qkernels.hybrid_conv import conv2d_hybrid, depthwise_conv2d_hybrid
from quantir.runtime.qkernels.unidirectional_lstm import (UnidirectionalLstmParams, prepare_unidirectional_lstm,
                                                          unidirectional_lstm)

__all__ = [
    "QKernelError", "AccumulatorOverflowError", "KernelParams", "activation_range", "tflite_pads", "output_size",
    "ConvParams", "prepare_conv2d", "conv2d", "depthwise_conv2d",
    "FullyConnectedParams", "prepare_fully_connected", "fully_connected",
    "AddParams", "prepare_add", "add", "SubParams", "prepare_sub", "sub", "MulParams", "prepare_mul", "mul",
    "prepare_average_pool", "average_pool2d", "prepare_max_pool", "max_pool2d",
    "MeanParams", "prepare_mean", "mean", "SumParams", "prepare_sum", "reduce_sum",
    "prepare_concatenation", "concatenation",
    "RequantizeParams", "prepare_requantize", "quantize", "requantize", "dequantize",
    "SoftmaxParams", "SoftmaxLutParams", "prepare_softmax", "softmax", "softmax_lut",
    "prepare_logistic", "logistic", "prepare_tanh", "tanh",
    "HardSwishParams", "prepare_hard_swish", "hard_swish",
    "LeakyReluParams", "prepare_leaky_relu", "leaky_relu", "ReluParams", "prepare_relu", "relu",
    "prepare_pad", "pad", "prepare_resize_bilinear", "resize_bilinear", "resize_nearest",
    "prepare_l2_normalization", "l2_normalization",
    "ComparisonKind", "ComparisonParams", "prepare_comparison", "compare", "arg_max",
    "prepare_maximum_minimum", "maximum", "minimum", "prepare_gather", "gather",
    "prepare_space_to_depth", "space_to_depth", "space_to_depth_nhwc",
    "prepare_space_to_batch_nd", "space_to_batch_nd", "space_to_batch_nd_nhwc",
    "prepare_batch_to_space_nd", "batch_to_space_nd", "batch_to_space_nd_nhwc", "shape",
    "prepare_gelu", "gelu", "LogSoftmaxParams", "LogSoftmaxLutParams", "prepare_log_softmax", "log_softmax",
    "log_softmax_lut", "RsqrtParams", "prepare_rsqrt", "rsqrt",
    "BatchMatMulParams", "prepare_batch_matmul", "batch_matmul",
    "SoftmaxInt16Params",
    "SquaredDifferenceParams", "prepare_squared_difference", "squared_difference",
    "symmetric_quantize_rows", "asymmetric_quantize_rows", "fully_connected_hybrid", "batch_matmul_hybrid",
    "conv2d_hybrid", "depthwise_conv2d_hybrid", "embedding_lookup_hybrid", "weight_row_sums",
    "UnidirectionalLstmParams", "prepare_unidirectional_lstm", "unidirectional_lstm",
]
