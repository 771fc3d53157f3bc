"""Weight-only quantization: int8 or int4 weights, per channel or block-wise, float activations.

No calibration data is needed. Each chosen constant weight — MatMul/Gemm B, Conv W, the table of a
Gather (embeddings) — becomes its storage integers (``arith.constant`` of ``i8``/``i4``), a
``quant.scast`` to the quant dialect's type and a ``quant.dcast`` in front of the float op, which is
left as it was: the interpreter runs the module as it is, and the ONNX backend writes each chain as
one DequantizeLinear (``backends/onnx/weight_only.py``).

Granularity. Per channel (``block_size=None``): one scale per output channel
(``!quant.uniform<i8:f32:1, {...}>``, MatMul [K, N] axis 1, Gemm with transB axis 0, Conv axis 0,
an embedding table one scale per row). Block-wise: blocks of ``block_size`` consecutive elements
along the reduction axis (MatMul K = axis 0, Conv input channels = axis 1, an embedding row =
axis 1), one scale per block and output channel: ``!quant.uniform<i4:f32:{0:32, 1:1}, {{...}}>``,
the layout of ONNX's blocked DequantizeLinear. A weight whose blocked dimension the block size
does not divide stays float, with the reason (refused rather than padded: the quant dialect's
sub-channel type requires whole blocks, and a padded weight is no longer the model's tensor).

Ranges. Symmetric (zero point 0): int8 in LiteRT's narrow range [-127, 127], int4 in [-8, 7] with
the scale set by the largest magnitude over 7. Asymmetric: the group's [min, max] on the full
storage range with a zero point.

Rounding. ``rounding="rtn"`` is round-to-nearest with the scale from the group's extremes.
``"mse"`` (default) without calibration data searches, per group, the clipping ratio of the scale
(18 ratios from 1.0 down to 0.5) that minimizes the group's squared error, the integers rounded to
nearest: it needs no data and costs a few vectorized passes per weight. With calibration data,
2-D MatMul/Gemm weights take GPTQ (``gptq``): the input's E[x x^T] is collected on the samples,
the block scales come from the search above, and the rows of W are rounded one by one, largest
E[x_k^2] first, each row's error pushed onto the rows not yet rounded through the inverse
Hessian, so what is minimized is the layer's output error rather than the weight's; a conv
weight's search then weights element k's error by E[x_k^2] of its input channel. Why GPTQ: on
MiniLM int4 block 32 the weights' own error is not what the embedding feels (BERT's LayerNorm
outputs carry a few channels 10-100x larger than the rest, and an error on their rows dominates
each matmul's output); measured on 256 held-out sentences, mean cosine vs fp32: RTN 0.956, MSE
search 0.963, E[x^2]-weighted search 0.971, GPTQ 0.991 (asymmetric: RTN-with-search 0.974, GPTQ
0.993). GPTQ lowers the weight SQNR it reports (it trades weight error for output error);
``WeightLayer.sqnr_rtn_db`` is round-to-nearest's SQNR on the same weight, side by side, and
``bench/weight_only.py`` gives the model-level figures each run.

What stays float: constants read by other ops, weights under ``min_elements`` elements
(LiteRT's converter keeps weights under 1024 elements float: ``weights_min_num_elements``), op
kinds not in ``ops``, batched constant B, and undivisible blocks; each with its reason.
"""
from __future__ import annotations

from .array import quantize_array
from .check import weight_only_rows as weight_only_rows
from .config import MIN_ELEMENTS, OPS, WeightOnlyConfig, WeightOnlyError
from .gptq import gptq as gptq
from .importance import input_importance
from .result import FloatWeight, WeightLayer, WeightOnlyResult
from .rewrite import quantize_weights
from .sites import _constant as _constant, _float_weight as _float_weight, find_sites as find_sites

# the ``name as name`` imports are re-exports outside __all__ that quantize/dynamic.py, quantize/check_qdq.py,
# api.py and the tests import from this package
__all__ = ["WeightOnlyConfig", "WeightOnlyResult", "WeightOnlyError", "WeightLayer", "FloatWeight",
           "quantize_weights", "quantize_array", "input_importance", "OPS", "MIN_ELEMENTS"]
