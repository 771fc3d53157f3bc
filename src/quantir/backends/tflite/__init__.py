"""TFLite backend: a hand-written flatbuffer schema layer, writer and reader.

* :mod:`.schema` — enums, field slots and builtin option tables of ``schema.fbs`` (v3);
* :mod:`.model` — the model as plain data (tensors, quantization, buffers, operators);
* :mod:`.writer` — :func:`write_model` and the incremental :class:`ModelBuilder`;
* :mod:`.reader` — :func:`read_model` / :func:`load_model`, bounds-checked, raising
  :class:`~quantir.errors.ModelFormatError` on corrupt input;
* :mod:`.litert` — run a model in the LiteRT interpreter (optional; imports
  ``ai_edge_litert`` only when called, the core never needs it).

TFLite's builtin operators are NHWC; quantir's IR keeps ONNX's NCHW, so a lowering
transposes activations and filters (conv OIHW -> OHWI, depthwise OIHW -> 1HWO).
"""
from quantir.backends.tflite.model import Model, Operator, OperatorCode, Quantization, SubGraph, Tensor
from quantir.backends.tflite.reader import load_model, read_model
from quantir.backends.tflite.schema import (
    INT8_OP_VERSIONS,
    ActivationFunctionType,
    AddOptions,
    BuiltinOperator,
    BuiltinOptions,
    BuiltinOptionsType,
    ConcatenationOptions,
    Conv2DOptions,
    DepthwiseConv2DOptions,
    DequantizeOptions,
    FullyConnectedOptions,
    HardSwishOptions,
    L2NormOptions,
    LeakyReluOptions,
    MulOptions,
    Padding,
    PadOptions,
    PadV2Options,
    Pool2DOptions,
    QuantizeOptions,
    RawOptions,
    ReducerOptions,
    ReshapeOptions,
    ResizeBilinearOptions,
    SoftmaxOptions,
    SqueezeOptions,
    SubOptions,
    TensorType,
    TransposeOptions,
)
from quantir.backends.tflite.writer import ModelBuilder, write_model

__all__ = [
    "Model", "SubGraph", "Tensor", "Quantization", "Operator", "OperatorCode",
    "ModelBuilder", "write_model", "read_model", "load_model",
    "TensorType", "BuiltinOperator", "BuiltinOptionsType", "ActivationFunctionType", "Padding",
    "INT8_OP_VERSIONS", "BuiltinOptions", "RawOptions",
    "AddOptions", "SubOptions", "MulOptions", "Conv2DOptions", "DepthwiseConv2DOptions", "Pool2DOptions",
    "FullyConnectedOptions", "SoftmaxOptions", "ConcatenationOptions", "L2NormOptions",
    "ResizeBilinearOptions", "ReshapeOptions", "SqueezeOptions", "ReducerOptions", "PadOptions",
    "PadV2Options", "TransposeOptions", "DequantizeOptions", "QuantizeOptions", "HardSwishOptions",
    "LeakyReluOptions",
]
