"""The subset of the TFLite flatbuffer schema that quantir writes and reads, as data.

Transcribed by hand from ``tflite/converter/schema/schema.fbs`` (google-ai-edge/LiteRT;
the same file as ``tensorflow/lite/schema/schema.fbs``), schema version 3, file
identifier ``TFL3``. Nothing here is generated code and nothing imports ``ai_edge_litert``;
``tests/backends/tflite`` checks every number below against LiteRT's generated module.

How a flatbuffer table is laid out matters for the writer and the reader, so each root
table lists its fields by **slot**: the field's position in the ``.fbs`` declaration,
counting deprecated fields, with a union taking two slots (its ``_type`` byte, then the
offset). Builtin option tables are dataclasses whose fields carry their slot, scalar kind
and schema default in ``metadata``; :func:`option_fields` reads that back, so one
declaration drives both :mod:`.writer` and :mod:`.reader`.

Only the option tables an int8 CNN needs are declared; an operator whose options are not
declared here can still be written with ``options=None`` (or read back as
:class:`RawOptions`).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from enum import IntEnum

from typing import Any, ClassVar

import numpy as np

from ...quantize.builtins import BuiltinOperator  # the operator codes: the quantizer names ops by them

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3
PLACEHOLDER_FOR_GREATER_OP_CODES = 127


class TensorType(IntEnum):
    """``enum TensorType : byte``."""

    FLOAT32 = 0
    FLOAT16 = 1
    INT32 = 2
    UINT8 = 3
    INT64 = 4
    STRING = 5
    BOOL = 6
    INT16 = 7
    COMPLEX64 = 8
    INT8 = 9
    FLOAT64 = 10
    COMPLEX128 = 11
    UINT64 = 12
    RESOURCE = 13
    VARIANT = 14
    UINT32 = 15
    UINT16 = 16
    INT4 = 17
    BFLOAT16 = 18


# TensorType <-> numpy, for the types that have a plain numpy equivalent.
NUMPY_DTYPES: dict[TensorType, np.dtype] = {
    TensorType.FLOAT32: np.dtype("<f4"),
    TensorType.FLOAT16: np.dtype("<f2"),
    TensorType.INT32: np.dtype("<i4"),
    TensorType.UINT8: np.dtype("u1"),
    TensorType.INT64: np.dtype("<i8"),
    TensorType.BOOL: np.dtype("?"),
    TensorType.INT16: np.dtype("<i2"),
    TensorType.INT8: np.dtype("i1"),
    TensorType.FLOAT64: np.dtype("<f8"),
    TensorType.UINT64: np.dtype("<u8"),
    TensorType.UINT32: np.dtype("<u4"),
    TensorType.UINT16: np.dtype("<u2"),
}


def tensor_type_of(dtype: Any) -> TensorType:
    """The TensorType of a numpy dtype (``np.int8`` -> ``INT8``)."""
    dt = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
    for tt, npdt in NUMPY_DTYPES.items():
        if npdt == dt:
            return tt
    raise ValueError(f"no TFLite tensor type for numpy dtype {np.dtype(dtype)}")


class ActivationFunctionType(IntEnum):
    """``enum ActivationFunctionType : byte`` (fused activations)."""

    NONE = 0
    RELU = 1
    RELU_N1_TO_1 = 2
    RELU6 = 3
    TANH = 4
    SIGN_BIT = 5


class Padding(IntEnum):
    """``enum Padding : byte``; SAME puts the odd extra pixel at the end (``padding.h``)."""

    SAME = 0
    VALID = 1


class FullyConnectedWeightsFormat(IntEnum):
    DEFAULT = 0
    SHUFFLED4x16INT8 = 1


class BuiltinOptionsType(IntEnum):
    """Index of each table in ``union BuiltinOptions`` (NONE = 0, then declaration order)."""

    NONE = 0
    Conv2DOptions = 1
    DepthwiseConv2DOptions = 2
    Pool2DOptions = 5
    FullyConnectedOptions = 8
    SoftmaxOptions = 9
    ConcatenationOptions = 10
    AddOptions = 11
    L2NormOptions = 12
    ResizeBilinearOptions = 15
    ReshapeOptions = 17
    SpaceToDepthOptions = 19
    MulOptions = 21
    PadOptions = 22
    GatherOptions = 23
    TransposeOptions = 26
    ReducerOptions = 27
    SubOptions = 28
    DivOptions = 29
    SqueezeOptions = 30
    StridedSliceOptions = 32
    SplitOptions = 35
    DequantizeOptions = 38
    MaximumMinimumOptions = 39
    PadV2Options = 43
    SliceOptions = 48
    TransposeConvOptions = 49
    ResizeNearestNeighborOptions = 74
    LeakyReluOptions = 75
    SplitVOptions = 79
    QuantizeOptions = 89
    HardSwishOptions = 91
    DepthToSpaceOptions = 94
    BatchToSpaceNDOptions = 24
    SpaceToBatchNDOptions = 25
    ArgMaxOptions = 40
    LessOptions = 41
    GreaterOptions = 44
    GreaterEqualOptions = 45
    LessEqualOptions = 46
    EqualOptions = 53
    NotEqualOptions = 54
    ShapeOptions = 55
    LogSoftmaxOptions = 36
    GeluOptions = 116
    BatchMatMulOptions = 101
    SquaredDifferenceOptions = 76
    UnidirectionalSequenceLSTMOptions = 71
    ReverseV2Options = 81


# ---------------------------------------------------------------------------
# Root tables: field slots.


class ModelField(IntEnum):
    VERSION = 0
    OPERATOR_CODES = 1
    SUBGRAPHS = 2
    DESCRIPTION = 3
    BUFFERS = 4
    METADATA_BUFFER = 5
    METADATA = 6
    SIGNATURE_DEFS = 7


class SubGraphField(IntEnum):
    TENSORS = 0
    INPUTS = 1
    OUTPUTS = 2
    OPERATORS = 3
    NAME = 4


class TensorField(IntEnum):
    SHAPE = 0
    TYPE = 1
    BUFFER = 2
    NAME = 3
    QUANTIZATION = 4
    IS_VARIABLE = 5
    SPARSITY = 6
    SHAPE_SIGNATURE = 7
    HAS_RANK = 8


class QuantizationField(IntEnum):
    MIN = 0
    MAX = 1
    SCALE = 2
    ZERO_POINT = 3
    DETAILS_TYPE = 4
    DETAILS = 5
    QUANTIZED_DIMENSION = 6


class OperatorField(IntEnum):
    OPCODE_INDEX = 0
    INPUTS = 1
    OUTPUTS = 2
    BUILTIN_OPTIONS_TYPE = 3
    BUILTIN_OPTIONS = 4
    CUSTOM_OPTIONS = 5
    CUSTOM_OPTIONS_FORMAT = 6
    MUTATING_VARIABLE_INPUTS = 7
    INTERMEDIATES = 8


class OperatorCodeField(IntEnum):
    DEPRECATED_BUILTIN_CODE = 0
    CUSTOM_CODE = 1
    VERSION = 2
    BUILTIN_CODE = 3


class BufferField(IntEnum):
    DATA = 0
    OFFSET = 1
    SIZE = 2


# Number of slots each root table has in this schema (for StartObject).
TABLE_SLOTS = {"Model": 8, "SubGraph": 5, "Tensor": 9, "QuantizationParameters": 7,
               "Operator": 9, "OperatorCode": 4, "Buffer": 1}

BUFFER_ALIGNMENT = 16  # ``data:[ubyte] (force_align: 16)``


# ---------------------------------------------------------------------------
# Builtin option tables.

# Scalar kinds: flatbuffers type, struct format, byte size.
SCALAR_KINDS = {"bool": ("<?", 1), "int8": ("<b", 1), "int32": ("<i", 4), "float32": ("<f", 4)}
VECTOR_KINDS = {"[int32]": ("<i", 4)}


def _slot(slot: int, kind: str, default: Any = None, *, schema_default: Any = None):
    """A dataclass field stored in flatbuffer slot ``slot``.

    ``default`` is the Python default; ``schema_default`` the value a reader assumes for
    an absent field (what the ``.fbs`` says, 0 / false / [] unless written otherwise).
    The writer omits a field equal to its schema default, as flatc-generated code does.
    """
    if schema_default is None:
        schema_default = default if kind in SCALAR_KINDS else None
    meta = {"slot": slot, "kind": kind, "schema_default": schema_default}
    if kind in VECTOR_KINDS:
        return field(default_factory=tuple, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class BuiltinOptions:
    """Base of the option tables; ``OPTIONS_TYPE`` is the union index.

    Values are normalised to what the file can hold (float32 floats, enum members, int
    tuples), so an options object equals the one read back from its own bytes.
    """

    OPTIONS_TYPE: ClassVar[BuiltinOptionsType]

    def __post_init__(self):
        for f in option_fields(type(self)):
            v = getattr(self, f.name)
            if f.kind == "float32":
                v = float(np.float32(v))
            elif f.kind == "bool":
                v = bool(v)
            elif f.kind in VECTOR_KINDS:
                v = tuple(int(x) for x in v)
            elif f.enum is not None:
                v = f.enum(int(v))
            else:
                v = int(v)
            object.__setattr__(self, f.name, v)


@dataclass(frozen=True)
class Conv2DOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.Conv2DOptions
    padding: Padding = _slot(0, "int8", Padding.SAME)
    stride_w: int = _slot(1, "int32", 1, schema_default=0)
    stride_h: int = _slot(2, "int32", 1, schema_default=0)
    fused_activation_function: ActivationFunctionType = _slot(3, "int8", ActivationFunctionType.NONE)
    dilation_w_factor: int = _slot(4, "int32", 1)
    dilation_h_factor: int = _slot(5, "int32", 1)
    quantized_bias_type: TensorType = _slot(6, "int8", TensorType.FLOAT32)


@dataclass(frozen=True)
class TransposeConvOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.TransposeConvOptions
    padding: Padding = _slot(0, "int8", Padding.SAME)
    stride_w: int = _slot(1, "int32", 1, schema_default=0)
    stride_h: int = _slot(2, "int32", 1, schema_default=0)
    fused_activation_function: ActivationFunctionType = _slot(3, "int8", ActivationFunctionType.NONE)
    quantized_bias_type: TensorType = _slot(4, "int8", TensorType.FLOAT32)


@dataclass(frozen=True)
class DepthwiseConv2DOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.DepthwiseConv2DOptions
    padding: Padding = _slot(0, "int8", Padding.SAME)
    stride_w: int = _slot(1, "int32", 1, schema_default=0)
    stride_h: int = _slot(2, "int32", 1, schema_default=0)
    depth_multiplier: int = _slot(3, "int32", 1, schema_default=0)
    fused_activation_function: ActivationFunctionType = _slot(4, "int8", ActivationFunctionType.NONE)
    dilation_w_factor: int = _slot(5, "int32", 1)
    dilation_h_factor: int = _slot(6, "int32", 1)


@dataclass(frozen=True)
class Pool2DOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.Pool2DOptions
    padding: Padding = _slot(0, "int8", Padding.SAME)
    stride_w: int = _slot(1, "int32", 1, schema_default=0)
    stride_h: int = _slot(2, "int32", 1, schema_default=0)
    filter_width: int = _slot(3, "int32", 1, schema_default=0)
    filter_height: int = _slot(4, "int32", 1, schema_default=0)
    fused_activation_function: ActivationFunctionType = _slot(5, "int8", ActivationFunctionType.NONE)


@dataclass(frozen=True)
class FullyConnectedOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.FullyConnectedOptions
    fused_activation_function: ActivationFunctionType = _slot(0, "int8", ActivationFunctionType.NONE)
    weights_format: FullyConnectedWeightsFormat = _slot(1, "int8", FullyConnectedWeightsFormat.DEFAULT)
    keep_num_dims: bool = _slot(2, "bool", False)
    asymmetric_quantize_inputs: bool = _slot(3, "bool", False)
    quantized_bias_type: TensorType = _slot(4, "int8", TensorType.FLOAT32)


@dataclass(frozen=True)
class SoftmaxOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SoftmaxOptions
    beta: float = _slot(0, "float32", 1.0, schema_default=0.0)


@dataclass(frozen=True)
class ConcatenationOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.ConcatenationOptions
    axis: int = _slot(0, "int32", 0)
    fused_activation_function: ActivationFunctionType = _slot(1, "int8", ActivationFunctionType.NONE)


@dataclass(frozen=True)
class AddOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.AddOptions
    fused_activation_function: ActivationFunctionType = _slot(0, "int8", ActivationFunctionType.NONE)
    pot_scale_int16: bool = _slot(1, "bool", True)


@dataclass(frozen=True)
class SubOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SubOptions
    fused_activation_function: ActivationFunctionType = _slot(0, "int8", ActivationFunctionType.NONE)
    pot_scale_int16: bool = _slot(1, "bool", True)


@dataclass(frozen=True)
class DivOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.DivOptions
    fused_activation_function: ActivationFunctionType = _slot(0, "int8", ActivationFunctionType.NONE)


@dataclass(frozen=True)
class MulOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.MulOptions
    fused_activation_function: ActivationFunctionType = _slot(0, "int8", ActivationFunctionType.NONE)


@dataclass(frozen=True)
class L2NormOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.L2NormOptions
    fused_activation_function: ActivationFunctionType = _slot(0, "int8", ActivationFunctionType.NONE)


@dataclass(frozen=True)
class ResizeBilinearOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.ResizeBilinearOptions
    # slots 0 and 1 are the deprecated new_height / new_width
    align_corners: bool = _slot(2, "bool", False)
    half_pixel_centers: bool = _slot(3, "bool", False)


@dataclass(frozen=True)
class ResizeNearestNeighborOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.ResizeNearestNeighborOptions
    align_corners: bool = _slot(0, "bool", False)
    half_pixel_centers: bool = _slot(1, "bool", False)


@dataclass(frozen=True)
class ReshapeOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.ReshapeOptions
    new_shape: tuple[int, ...] = _slot(0, "[int32]")


@dataclass(frozen=True)
class SqueezeOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SqueezeOptions
    squeeze_dims: tuple[int, ...] = _slot(0, "[int32]")


@dataclass(frozen=True)
class ReducerOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.ReducerOptions
    keep_dims: bool = _slot(0, "bool", False)


@dataclass(frozen=True)
class GatherOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.GatherOptions
    axis: int = _slot(0, "int32", 0)
    batch_dims: int = _slot(1, "int32", 0)


@dataclass(frozen=True)
class SplitOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SplitOptions
    num_splits: int = _slot(0, "int32", 0)


@dataclass(frozen=True)
class SplitVOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SplitVOptions
    num_splits: int = _slot(0, "int32", 0)


@dataclass(frozen=True)
class StridedSliceOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.StridedSliceOptions
    begin_mask: int = _slot(0, "int32", 0)
    end_mask: int = _slot(1, "int32", 0)
    ellipsis_mask: int = _slot(2, "int32", 0)
    new_axis_mask: int = _slot(3, "int32", 0)
    shrink_axis_mask: int = _slot(4, "int32", 0)
    offset: bool = _slot(5, "bool", False)


@dataclass(frozen=True)
class SpaceToDepthOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SpaceToDepthOptions
    block_size: int = _slot(0, "int32", 0)


@dataclass(frozen=True)
class DepthToSpaceOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.DepthToSpaceOptions
    block_size: int = _slot(0, "int32", 0)


@dataclass(frozen=True)
class LeakyReluOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.LeakyReluOptions
    alpha: float = _slot(0, "float32", 0.0)


# Tables without fields.
@dataclass(frozen=True)
class PadOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.PadOptions


@dataclass(frozen=True)
class PadV2Options(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.PadV2Options


@dataclass(frozen=True)
class TransposeOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.TransposeOptions


@dataclass(frozen=True)
class SliceOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SliceOptions


@dataclass(frozen=True)
class DequantizeOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.DequantizeOptions


@dataclass(frozen=True)
class QuantizeOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.QuantizeOptions


@dataclass(frozen=True)
class MaximumMinimumOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.MaximumMinimumOptions


@dataclass(frozen=True)
class HardSwishOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.HardSwishOptions


@dataclass(frozen=True)
class ArgMaxOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.ArgMaxOptions
    # ONNX ArgMax gives int64; an absent field reads as 0 (FLOAT32), which LiteRT refuses.
    output_type: TensorType = _slot(0, "int8", TensorType.INT64, schema_default=TensorType.FLOAT32)


@dataclass(frozen=True)
class ShapeOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.ShapeOptions
    out_type: TensorType = _slot(0, "int8", TensorType.INT64, schema_default=TensorType.FLOAT32)


@dataclass(frozen=True)
class BatchToSpaceNDOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.BatchToSpaceNDOptions


@dataclass(frozen=True)
class SpaceToBatchNDOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SpaceToBatchNDOptions


@dataclass(frozen=True)
class EqualOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.EqualOptions


@dataclass(frozen=True)
class NotEqualOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.NotEqualOptions


@dataclass(frozen=True)
class LessOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.LessOptions


@dataclass(frozen=True)
class LessEqualOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.LessEqualOptions


@dataclass(frozen=True)
class GreaterOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.GreaterOptions


@dataclass(frozen=True)
class GreaterEqualOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.GreaterEqualOptions


@dataclass(frozen=True)
class LogSoftmaxOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.LogSoftmaxOptions


@dataclass(frozen=True)
class GeluOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.GeluOptions
    approximate: bool = _slot(0, "bool", False)  # True: the tanh form


@dataclass(frozen=True)
class BatchMatMulOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.BatchMatMulOptions
    adj_x: bool = _slot(0, "bool", False)
    adj_y: bool = _slot(1, "bool", False)
    asymmetric_quantize_inputs: bool = _slot(2, "bool", False)


@dataclass(frozen=True)
class SquaredDifferenceOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.SquaredDifferenceOptions


@dataclass(frozen=True)
class UnidirectionalSequenceLSTMOptions(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.UnidirectionalSequenceLSTMOptions
    fused_activation_function: ActivationFunctionType = _slot(0, "int8", ActivationFunctionType.NONE)
    cell_clip: float = _slot(1, "float32", 0.0)   # 0: no clipping
    proj_clip: float = _slot(2, "float32", 0.0)
    time_major: bool = _slot(3, "bool", False)   # True: [T, B, I]
    asymmetric_quantize_inputs: bool = _slot(4, "bool", False)   # (hybrid only)
    diagonal_recurrent_tensors: bool = _slot(5, "bool", False)


@dataclass(frozen=True)
class ReverseV2Options(BuiltinOptions):
    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.ReverseV2Options


@dataclass(frozen=True)
class RawOptions(BuiltinOptions):
    """Options of a union member this module does not declare (reader only): the raw table.

    ``fields`` maps slot number to the raw bytes of that field's inline value.
    """

    OPTIONS_TYPE: ClassVar = BuiltinOptionsType.NONE
    options_type: int = 0
    fields: tuple[tuple[int, bytes], ...] = ()


OPTIONS_CLASSES: dict[int, type[BuiltinOptions]] = {
    cls.OPTIONS_TYPE.value: cls
    for cls in (Conv2DOptions, DepthwiseConv2DOptions, Pool2DOptions, FullyConnectedOptions, SoftmaxOptions,
                ConcatenationOptions, AddOptions, SubOptions, MulOptions, L2NormOptions, ResizeBilinearOptions,
                ResizeNearestNeighborOptions, ReshapeOptions, SqueezeOptions, ReducerOptions, GatherOptions,
                SplitOptions, StridedSliceOptions, SpaceToDepthOptions, DepthToSpaceOptions, LeakyReluOptions,
                PadOptions, PadV2Options, TransposeOptions, SliceOptions, DequantizeOptions, QuantizeOptions,
                MaximumMinimumOptions, HardSwishOptions,
                ArgMaxOptions, ShapeOptions, BatchToSpaceNDOptions, SpaceToBatchNDOptions, EqualOptions,
                NotEqualOptions, LessOptions, LessEqualOptions, GreaterOptions, GreaterEqualOptions,
                LogSoftmaxOptions, GeluOptions, BatchMatMulOptions,
                TransposeConvOptions, SplitVOptions, SquaredDifferenceOptions, DivOptions,
                UnidirectionalSequenceLSTMOptions, ReverseV2Options)
}


@dataclass(frozen=True)
class OptionField:
    name: str
    slot: int
    kind: str
    schema_default: Any
    enum: type | None


@functools.cache
def option_fields(cls: type[BuiltinOptions]) -> tuple[OptionField, ...]:
    """The flatbuffer fields of an option table, in slot order."""
    out = []
    for f in dataclasses.fields(cls):
        if "slot" not in f.metadata:
            continue
        enum = f.type if isinstance(f.type, type) and issubclass(f.type, IntEnum) else None
        if enum is None and isinstance(f.default, IntEnum):
            enum = type(f.default)
        out.append(OptionField(f.name, f.metadata["slot"], f.metadata["kind"], f.metadata["schema_default"], enum))
    return tuple(sorted(out, key=lambda o: o.slot))


def option_table_slots(cls: type[BuiltinOptions]) -> int:
    fields_ = option_fields(cls)
    return max((f.slot for f in fields_), default=-1) + 1


# Operator -> the option table it carries (for validation and for readers).
OPERATOR_OPTIONS: dict[BuiltinOperator, type[BuiltinOptions] | None] = {
    BuiltinOperator.ADD: AddOptions,
    BuiltinOperator.AVERAGE_POOL_2D: Pool2DOptions,
    BuiltinOperator.MAX_POOL_2D: Pool2DOptions,
    BuiltinOperator.L2_POOL_2D: Pool2DOptions,
    BuiltinOperator.CONCATENATION: ConcatenationOptions,
    BuiltinOperator.CONV_2D: Conv2DOptions,
    BuiltinOperator.DEPTHWISE_CONV_2D: DepthwiseConv2DOptions,
    BuiltinOperator.TRANSPOSE_CONV: TransposeConvOptions,
    BuiltinOperator.DEQUANTIZE: DequantizeOptions,
    BuiltinOperator.FULLY_CONNECTED: FullyConnectedOptions,
    BuiltinOperator.L2_NORMALIZATION: L2NormOptions,
    BuiltinOperator.LOGISTIC: None,
    BuiltinOperator.MUL: MulOptions,
    BuiltinOperator.RELU: None,
    BuiltinOperator.RELU6: None,
    BuiltinOperator.RELU_N1_TO_1: None,
    BuiltinOperator.RELU_0_TO_1: None,
    BuiltinOperator.RESHAPE: ReshapeOptions,
    BuiltinOperator.RESIZE_BILINEAR: ResizeBilinearOptions,
    BuiltinOperator.RESIZE_NEAREST_NEIGHBOR: ResizeNearestNeighborOptions,
    BuiltinOperator.SOFTMAX: SoftmaxOptions,
    BuiltinOperator.TANH: None,
    BuiltinOperator.PAD: PadOptions,
    BuiltinOperator.PADV2: PadV2Options,
    BuiltinOperator.TRANSPOSE: TransposeOptions,
    BuiltinOperator.MEAN: ReducerOptions,
    BuiltinOperator.SUM: ReducerOptions,
    BuiltinOperator.REDUCE_MAX: ReducerOptions,
    BuiltinOperator.SUB: SubOptions,
    BuiltinOperator.DIV: DivOptions,
    BuiltinOperator.SQUEEZE: SqueezeOptions,
    BuiltinOperator.QUANTIZE: QuantizeOptions,
    BuiltinOperator.HARD_SWISH: HardSwishOptions,
    BuiltinOperator.LEAKY_RELU: LeakyReluOptions,
    BuiltinOperator.MAXIMUM: MaximumMinimumOptions,
    BuiltinOperator.MINIMUM: MaximumMinimumOptions,
    BuiltinOperator.GATHER: GatherOptions,
    BuiltinOperator.SPLIT: SplitOptions,
    BuiltinOperator.SPLIT_V: SplitVOptions,
    BuiltinOperator.STRIDED_SLICE: StridedSliceOptions,
    BuiltinOperator.SLICE: SliceOptions,
    BuiltinOperator.SPACE_TO_DEPTH: SpaceToDepthOptions,
    BuiltinOperator.DEPTH_TO_SPACE: DepthToSpaceOptions,
    BuiltinOperator.ARG_MAX: ArgMaxOptions,
    BuiltinOperator.SHAPE: ShapeOptions,
    BuiltinOperator.BATCH_TO_SPACE_ND: BatchToSpaceNDOptions,
    BuiltinOperator.SPACE_TO_BATCH_ND: SpaceToBatchNDOptions,
    BuiltinOperator.EQUAL: EqualOptions,
    BuiltinOperator.NOT_EQUAL: NotEqualOptions,
    BuiltinOperator.LESS: LessOptions,
    BuiltinOperator.LESS_EQUAL: LessEqualOptions,
    BuiltinOperator.GREATER: GreaterOptions,
    BuiltinOperator.GREATER_EQUAL: GreaterEqualOptions,
    BuiltinOperator.LOG_SOFTMAX: LogSoftmaxOptions,
    BuiltinOperator.GELU: GeluOptions,
    BuiltinOperator.RSQRT: None,
    BuiltinOperator.BATCH_MATMUL: BatchMatMulOptions,
    BuiltinOperator.SQUARED_DIFFERENCE: SquaredDifferenceOptions,
    BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM: UnidirectionalSequenceLSTMOptions,
    BuiltinOperator.REVERSE_V2: ReverseV2Options,
}

# Operator version to declare for the int8 (per-channel) kernels, as the TFLite converter's
# ``op_version.cc`` assigns it for int8 inputs without int16 / hybrid features. LiteRT's
# resolver registers every version from 1 up to its maximum, so a lower version than the
# converter would pick still resolves; these only keep written models close to converted ones.
INT8_OP_VERSIONS: dict[BuiltinOperator, int] = {
    BuiltinOperator.ADD: 2,
    BuiltinOperator.AVERAGE_POOL_2D: 2,
    BuiltinOperator.CONCATENATION: 2,
    BuiltinOperator.CONV_2D: 3,
    BuiltinOperator.DEPTHWISE_CONV_2D: 3,
    BuiltinOperator.DEQUANTIZE: 2,
    BuiltinOperator.FULLY_CONNECTED: 4,
    BuiltinOperator.L2_NORMALIZATION: 2,
    BuiltinOperator.LOGISTIC: 2,
    BuiltinOperator.MAX_POOL_2D: 2,
    BuiltinOperator.MUL: 2,
    BuiltinOperator.RELU: 2,
    BuiltinOperator.RELU6: 2,
    BuiltinOperator.RELU_N1_TO_1: 1,
    BuiltinOperator.RESHAPE: 1,
    BuiltinOperator.RESIZE_BILINEAR: 2,
    BuiltinOperator.RESIZE_NEAREST_NEIGHBOR: 2,   # 3 with align_corners or half_pixel_centers
    BuiltinOperator.SOFTMAX: 2,
    BuiltinOperator.TANH: 2,
    BuiltinOperator.PAD: 2,
    BuiltinOperator.PADV2: 2,
    BuiltinOperator.TRANSPOSE: 2,
    BuiltinOperator.MEAN: 2,
    BuiltinOperator.SUM: 2,
    BuiltinOperator.SUB: 2,
    BuiltinOperator.SQUEEZE: 1,
    BuiltinOperator.STRIDED_SLICE: 2,
    BuiltinOperator.SLICE: 2,
    BuiltinOperator.QUANTIZE: 2,
    BuiltinOperator.HARD_SWISH: 1,
    BuiltinOperator.LEAKY_RELU: 2,
    BuiltinOperator.SQUARED_DIFFERENCE: 2,
    BuiltinOperator.REVERSE_V2: 3,
    BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM: 1,   # the full-integer (8x8_16) form; 2, 3 are hybrid
}
