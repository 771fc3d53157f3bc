"""Int8 activations re-encoded as uint8 (``activations="uint8"`` of the quantized export).

Design notes
- ONNX Runtime on x86 runs int8-activation QDQ groups as integer kernels only after turning
  each Q → DQ pair into uint8 (``QDQS8ToU8Transformer``), which it cannot do for a Q whose
  tensor feeds several ops (a residual branch): those ops then run in float between their Q/DQ
  nodes — correct, slower. ONNX Runtime's own quantizer (``QuantType.QInt8`` activations) gives
  the same graph and the same result; the QOperator export is all integer kernels.
- ``activations="uint8"`` (both formats) avoids that: every int8 activation tensor is written as
  uint8 with the same scale and its zero point (and storage range) moved up by 128 — stored
  value ``q + 128`` for ``q``, so every DequantizeLinear gives the same real numbers and every
  QuantizeLinear the same steps (saturation included) as the int8 form: the same model,
  re-encoded. Weights stay int8 (per-channel, symmetric) and bias int32, which is ONNX
  Runtime's preferred x86 form (U8S8): it fuses every DQ → op → Q group, residual branches
  included, with no S8→U8 conversion, and its QOperator int8 kernels are U8S8 as well.
  On EfficientNet-Lite0 ONNX Runtime 1.32 makes all 49 convolutions and 9 adds QLinearConv /
  QLinearAdd, against 35 QLinearConv + 14 float Conv + 9 float Add for int8 activations; QDQ
  latency (batch 32, one thread) 0.48× fp32 against 0.87×, and the QOperator form 0.49×
  against 6× (bench/quantize_vs_ort.py). Same outputs as the int8 form within ONNX Runtime's
  one-step kernel differences (tests/backends/onnx/test_uint8_activations.py).
  Caveat from ONNX Runtime's docs: on x86 CPUs with AVX2 but without VNNI, U8S8 kernels use
  VPMADDUBSW, whose int16 pair sums can saturate for large weights times large activations
  (ORT's ``reduce_range`` exists for this); AVX512-VNNI/AVX-VNNI CPUs are exact. The int8 form
  takes the same U8S8 kernels wherever ORT fuses it, so this is not a new risk. The function's
  own inputs and outputs must be float (as ``quantir.quantize`` makes them); integer
  interfaces keep the int8 form.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedOpError
from ...ir import Function, Value
from ...ir.attributes import IntegerAttr
from ...ir.builder import OpBuilder, function_like
from ...ir.dialects import arith, qnn, quant
from ...ir.mapping import IRMapping
from ...types import IntegerType, TensorType, Type, UniformQuantizedType
from .builder import constant_array, qtype

__all__ = ["uint8_activations"]


def _uint8_type(t: Type) -> Type | None:
    """``t`` with int8 per-tensor storage moved to uint8 (zero point and storage range + 128), else None."""
    q = qtype(t)
    if not isinstance(q, UniformQuantizedType) or not q.is_signed or not isinstance(q.storage_type, IntegerType) \
            or q.storage_type.width != 8:
        return None
    u = UniformQuantizedType(storage_type=IntegerType(8), is_signed=False, expressed_type=q.expressed_type,
                             scale=q.scale, zero_point=int(q.zero_point) + 128, storage_min=q.storage_min + 128,
                             storage_max=q.storage_max + 128)
    return t.clone(element_type=u) if isinstance(t, TensorType) else u


def uint8_activations(fn: Function) -> Function:
    """A copy of the integer function with every int8 per-tensor activation stored as uint8.

    Same scales; zero points, storage ranges and stored integers move up by 128, so each
    tensor holds the same real values and every clamp, pad value and rounding is the same
    step. Weights (operand ``w`` of conv / fully_connected, kept int8 even if per-tensor),
    per-axis types and int32 bias are unchanged. Raises ``UnsupportedOpError`` when an input
    or output of the function is an int8 tensor (its type would change).
    """
    weights = {op.operands[1] for op in fn.ops if op.opdef in (qnn.CONV, qnn.FULLY_CONNECTED)
               and len(op.operands) > 1}
    interface = [v for v in list(fn.arguments) + list(fn.outputs) if v not in weights and _uint8_type(v.type)]
    if interface:
        raise UnsupportedOpError(f"uint8 activations need float inputs and outputs; '{interface[0].name_hint}' is "
                                 f"{interface[0].type} (export with activations='int8')")
    out = function_like(fn)
    b = OpBuilder.at_end(out)
    new: IRMapping[Value] = IRMapping()
    new.map_all(fn.arguments, out.arguments)
    for op in fn.ops:
        types = [r.type if r in weights else (_uint8_type(r.type) or r.type) for r in op.results]
        operands = [new.lookup(v) for v in op.operands]
        attributes = dict(op.attributes)
        changed = any(t is not r.type for t, r in zip(types, op.results))
        if changed and op.opdef is quant.SCAST:
            # a stored constant: its integers move with the zero point
            ints = constant_array(op.operands[0])
            if ints is None:
                raise UnsupportedOpError(f"{op.describe()}: reinterpreting a computed int8 tensor as "
                                         f"quantized has no uint8 form")
            shifted = (np.asarray(ints).astype(np.int16) + 128).astype(np.uint8)
            operands = [b.constant(shifted, IntegerType(8), name=op.operands[0].name_hint)]
        elif changed and op.opdef is arith.CONSTANT:
            raise UnsupportedOpError(f"{op.describe()}: a constant typed int8-quantized has no uint8 form")
        elif changed and op.opdef is qnn.PAD and op.attr("value") is not None:
            attributes["value"] = IntegerAttr(int(op.attr("value")) + 128, attributes["value"].type)
        b.clone(op, new, operands=operands, result_types=types, attributes=attributes)
    return out
