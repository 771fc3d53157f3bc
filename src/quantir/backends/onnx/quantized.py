"""The integer (``qnn``) module as an ONNX model for ONNX Runtime: QDQ or QOperator format.

>>> model = to_onnx_quantized(result.module, format="qdq")          # doctest: +SKIP
>>> save_quantized(result.module, "model.int8.onnx", format="qoperator")   # doctest: +SKIP

Design notes
- Export is a conversion, then the ordinary exporter. ``qnn`` ops have no ONNX twin, so
  ``convert`` first rewrites the integer function into an *ONNX-shaped* one, op by op from a
  table (``qdq.CONVERT`` or ``qoperator.CONVERT``, built with ``builder.Builder``), using only
  what the ``nn``/``quant`` exporter already writes: float ``nn`` ops, ``quant.qcast``/
  ``quant.dcast`` (→ QuantizeLinear/DequantizeLinear, ``quant.py``), ``nn.qlinear_conv``,
  ``nn.clip`` on int8, ``nn.dequantize_linear`` (for int32 bias, which ``quant.dcast`` does not
  export), and ``nn.onnx_op`` for the ``com.microsoft`` contrib ops. ``exporter.export`` then names values,
  writes initializers, checks every node's types against the ONNX schema and emits the graph,
  so names and initializers behave exactly as in a float export.
- **QDQ** (what ``onnxruntime.quantization`` writes with ``QuantFormat.QDQ``): every qnn op
  becomes its float ONNX op between DequantizeLinear of its inputs and QuantizeLinear of its
  result, with int8 per-channel weights and int32 bias as initializers behind
  DequantizeLinear. Each quantized tensor has exactly one Q (where it is made) and one DQ
  (shared by all its consumers, and reused for the function's own ``quant.dcast``), so a CNN
  keeps one Q at its input and one DQ at its output plus one Q/DQ pair per op boundary; ONNX
  Runtime fuses DQ → op → Q into its integer kernels.
- **QOperator**: ops ONNX Runtime runs on int8 directly (QLinearConv, QGemm, QLinearMatMul,
  QLinearAdd, QLinearMul, QLinearAveragePool, QLinearGlobalAveragePool, QLinearConcat,
  QLinearSigmoid, QLinearSoftmax, MaxPool, Pad, Clip, nearest Resize (or Gather), and the
  data-movement ops); the elementwise ops without an exact int8 kernel (Sub, Tanh, HardSwish,
  Gelu, LeakyRelu, requantize, ...) as lookup tables of quantir's own integers (``tables.py``);
  a transposed conv and a mean over other axes through QLinearConv / QLinearGlobalAveragePool
  (``qoperator.py``). What is left (bilinear Resize, ...) takes its QDQ form:
  DequantizeLinear → float op → QuantizeLinear.
- Fused activations. LiteRT clamps the requantized result to ``CalculateActivationRangeQuantized``
  (``numerics.fused_activation_range``). When that range is the whole int8 range the clamp is
  a no-op and nothing is emitted (the usual case: a ReLU output has zero point -128). Otherwise
  QDQ emits Relu / Clip(0, 6) / Clip(-1, 1) before the output QuantizeLinear and QOperator an
  int8 Clip to the exact integer range after the QLinear op.
- Numerics (docs/numerics.md §4.5, §4.6). ONNX Runtime requantizes with a float32 multiplier
  and rounds half to even; LiteRT (the reference interpreter) uses 31-bit fixed point and
  rounds half away from zero. Each op alone is within ±1 step of the interpreter (a few tenths
  of a percent of the elements of a conv; ~10% for mean, leaky_relu and mul, whose LiteRT
  kernels truncate a folded 1/N or round many exact ties); through a network these differences
  grow wherever an op's output scale is finer than its input's. Max pool, pad, concat, clamps
  on equal parameters and data movement are exact.
- ``activations="uint8"`` re-encodes every int8 activation tensor as uint8 with the zero point
  moved up by 128, the form ONNX Runtime on x86 fuses completely (``uint8.py`` says why).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import onnx

from ...errors import QuantirError
from ...fileio import check_output
from ...ir import Function, Module
from ...errors import UnsupportedOpError
from ...types import QuantizedType
from ...ir.opdef import OpDef
from . import qdq, qoperator
from .api import DEFAULT_OPSET, to_onnx
from .builder import Builder, Converter, base_name
from .exporter import write_model
from .uint8 import uint8_activations

__all__ = ["to_onnx_quantized", "save_quantized", "convert", "uint8_activations", "FORMATS", "ACTIVATIONS",
           "TABLES"]

FORMATS = ("qdq", "qoperator")
ACTIVATIONS = ("int8", "uint8")   # storage of activation tensors in the export (weights are always int8)
TABLES: Mapping[str, Mapping[OpDef, Converter]] = {"qdq": qdq.CONVERT, "qoperator": qoperator.CONVERT}


def _check_format(format: str) -> str:
    f = str(format).lower()
    if f not in FORMATS:
        raise QuantirError(f"unknown quantized ONNX format '{format}': use 'qdq' or 'qoperator'")
    return f


def _check_activations(activations: str) -> str:
    a = str(activations).lower()
    if a not in ACTIVATIONS:
        raise QuantirError(f"unknown activation storage '{activations}': use 'int8' or 'uint8'")
    return a


def convert(module: Module | Function, *, format: str = "qdq", opset: int | None = None,
            activations: str = "int8", requantized: list | None = None) -> Module:
    """The ONNX-shaped twin of ``module``'s main function (what ``to_onnx_quantized`` exports);
    useful to inspect as text. Raises ``UnsupportedOpError`` naming a qnn op without an export.
    ``requantized``, for "qoperator": a list that gets ``(label, qnn op, why)`` of each op the
    export computes in float between DequantizeLinear and QuantizeLinear (its QDQ form)."""
    f = _check_format(format)
    fn = module.main if isinstance(module, Module) else module
    wide = _int16_value(fn)
    if wide is not None and activations == "uint8":
        raise UnsupportedOpError(f"'{wide}' is int16 (LiteRT 16x8 mode or a mixed-precision promotion): uint8 "
                                 f"activations re-encode 8-bit values only; save with activations='int8', or "
                                 f"quantize with Config(budget=None) for an all-int8 model")
    if _check_activations(activations) == "uint8":
        fn = uint8_activations(fn)
    # QOperator: an op on int16 values takes its integer form in ONNX Runtime's integer ops
    # (qoperator.WIDE, sixteen.py): ONNX Runtime's QLinear* ops are 8-bit
    builder = Builder(fn, TABLES[f], f, DEFAULT_OPSET if opset is None else int(opset),
                      wide=qoperator.WIDE if f == "qoperator" else None)
    out = builder.run()
    if requantized is not None and f == "qoperator":
        requantized.extend((op.label or base_name(op.results[0]), op.name, qoperator.why_requantized(op))
                           for op in builder.requantized)
    return Module([out], name=module.name if isinstance(module, Module) else None)


def _int16_value(fn: Function) -> str | None:
    """The name of the first value of ``fn`` stored in int16, or None."""
    for op in fn.ops:
        for v in op.results:
            q = getattr(v.type, "element_type", None)
            if isinstance(q, QuantizedType) and q.storage_width == 16:
                return v.name_hint or op.name
    return None


def to_onnx_quantized(module: Module | Function, *, format: str = "qdq", opset: int | None = None,
                      activations: str = "int8", requantized: list | None = None) -> onnx.ModelProto:
    """The integer module as an ONNX model that ONNX Runtime runs with its int8 kernels.

    ``format``: ``"qdq"`` (float ops between QuantizeLinear/DequantizeLinear, int8 per-channel
    weights and int32 bias behind DequantizeLinear) or ``"qoperator"`` (QLinearConv, QGemm and
    the ``com.microsoft`` QLinear* ops). ``opset`` defaults to 21. ``activations``: ``"int8"``
    (the integer module's own storage) or ``"uint8"`` (the same values re-encoded with zero
    points + 128, which ONNX Runtime on x86 fuses completely; see the module notes). Raises
    ``UnsupportedOpError`` for an op with no export in that format. ``requantized``: see ``convert``.
    """
    f = _check_format(format)
    a = _check_activations(activations)
    opset = DEFAULT_OPSET if opset is None else int(opset)
    model = to_onnx(convert(module, format=f, opset=opset, activations=a, requantized=requantized), opset=opset)
    model.doc_string = f"quantir int8 export, {f.upper()} format" + (", uint8 activations" if a == "uint8" else "")
    return model


def save_quantized(module: Module | Function, path: "str | os.PathLike", *, format: str = "qdq",
                   opset: int | None = None, activations: str = "int8", requantized: list | None = None) -> Path:
    """Export (see ``to_onnx_quantized``) and write ``path`` atomically: the model is built and
    serialized before the file is touched, then written to a temporary file and renamed, so
    ``path`` is the old file or the complete new one, never a partial one."""
    path = Path(path)
    check_output(path)  # a missing directory or a read-only one fails before the export, not after
    write_model(to_onnx_quantized(module, format=format, opset=opset, activations=activations,
                                  requantized=requantized), path)
    return path
