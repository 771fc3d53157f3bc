"""Serialise a :class:`~.model.Model` into TFLite flatbuffer bytes, with ``flatbuffers.Builder`` directly.

Two entry points:

* :func:`write_model` — ``Model`` -> ``bytes`` (file identifier ``TFL3``, schema version 3);
* :class:`ModelBuilder` — an incremental API (add tensors, constants, operators; declare
  inputs and outputs) whose :meth:`~ModelBuilder.build` gives the ``Model`` and
  :meth:`~ModelBuilder.finish` the bytes.

Flatbuffers are built back to front: every vector, string and child table must be finished
before the table that points at it is started. Scalars equal to their schema default are
omitted, as flatc-generated code does, so a reader sees the default either way.

Example: a one-op int8 RELU model.

>>> import numpy as np
>>> from quantir.backends.tflite import ModelBuilder, BuiltinOperator, Quantization, read_model
>>> b = ModelBuilder()
>>> x = b.add_tensor("x", (1, 4), np.int8, Quantization([0.5], [-3]))
>>> y = b.add_tensor("y", (1, 4), np.int8, Quantization([0.5], [-3]))
>>> _ = b.add_operator(BuiltinOperator.RELU, [x], [y])
>>> b.set_io([x], [y])
>>> data = b.finish()
>>> data[4:8], read_model(data).subgraphs[0].tensors[0].quantization.zero_point
(b'TFL3', (-3,))
"""
from __future__ import annotations

from collections.abc import Sequence

import flatbuffers
import numpy as np

from quantir.backends.tflite.model import Model, Operator, OperatorCode, Quantization, SubGraph, Tensor
from quantir.backends.tflite.schema import (
    BUFFER_ALIGNMENT,
    FILE_IDENTIFIER,
    INT8_OP_VERSIONS,
    OPERATOR_OPTIONS,
    TABLE_SLOTS,
    VECTOR_KINDS,
    BufferField,
    BuiltinOperator,
    BuiltinOptions,
    ModelField,
    OperatorCodeField,
    OperatorField,
    QuantizationField,
    RawOptions,
    SubGraphField,
    TensorField,
    TensorType,
    option_fields,
    option_table_slots,
    tensor_type_of,
)
from quantir.errors import VerifyError

__all__ = ["write_model", "ModelBuilder"]


# ---------------------------------------------------------------------------
# Low-level helpers over flatbuffers.Builder


def _aligned_bytes(b: flatbuffers.Builder, data: bytes, alignment: int) -> int:
    """A ``[ubyte]`` vector whose first element is ``alignment``-aligned (``force_align``)."""
    n = len(data)
    b.StartVector(1, n, alignment)
    b.head = b.head - n
    b.Bytes[b.head:b.head + n] = data
    return b.EndVector()


def _int_vector(b: flatbuffers.Builder, values: Sequence[int], dtype: str = "<i4") -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype=dtype).reshape(-1))


def _offset_vector(b: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


_PREPEND_SLOT = {"bool": "PrependBoolSlot", "int8": "PrependInt8Slot", "int32": "PrependInt32Slot",
                 "float32": "PrependFloat32Slot"}


def _write_options(b: flatbuffers.Builder, options: BuiltinOptions) -> int:
    cls = type(options)
    fields = option_fields(cls)
    vectors = {}
    for f in fields:  # children first
        if f.kind in VECTOR_KINDS:
            values = getattr(options, f.name)
            if values:
                vectors[f.slot] = _int_vector(b, values)
    b.StartObject(option_table_slots(cls))
    for f in fields:
        if f.kind in VECTOR_KINDS:
            if f.slot in vectors:
                b.PrependUOffsetTRelativeSlot(f.slot, vectors[f.slot], 0)
            continue
        value = getattr(options, f.name)
        default = f.schema_default
        if f.kind == "bool":
            value, default = bool(value), bool(default)
        elif f.kind == "float32":
            value, default = float(np.float32(value)), float(np.float32(default))
        else:
            value, default = int(value), int(default)
        getattr(b, _PREPEND_SLOT[f.kind])(f.slot, value, default)
    return b.EndObject()


def _write_quantization(b: flatbuffers.Builder, q: Quantization) -> int:
    vecs = {}
    if q.min:
        vecs[QuantizationField.MIN] = b.CreateNumpyVector(np.asarray(q.min, dtype="<f4"))
    if q.max:
        vecs[QuantizationField.MAX] = b.CreateNumpyVector(np.asarray(q.max, dtype="<f4"))
    vecs[QuantizationField.SCALE] = b.CreateNumpyVector(np.asarray(q.scale, dtype="<f4"))
    vecs[QuantizationField.ZERO_POINT] = b.CreateNumpyVector(np.asarray(q.zero_point, dtype="<i8"))
    b.StartObject(TABLE_SLOTS["QuantizationParameters"])
    for slot, off in vecs.items():
        b.PrependUOffsetTRelativeSlot(slot, off, 0)
    b.PrependInt32Slot(QuantizationField.QUANTIZED_DIMENSION, int(q.quantized_dimension), 0)
    return b.EndObject()


def _write_tensor(b: flatbuffers.Builder, t: Tensor) -> int:
    shape = _int_vector(b, t.shape)
    signature = _int_vector(b, t.shape_signature) if t.shape_signature else None
    name = b.CreateString(t.name)
    quant = _write_quantization(b, t.quantization) if t.quantization is not None else None
    b.StartObject(TABLE_SLOTS["Tensor"])
    b.PrependUOffsetTRelativeSlot(TensorField.SHAPE, shape, 0)
    b.PrependInt8Slot(TensorField.TYPE, int(t.type), 0)
    b.PrependUint32Slot(TensorField.BUFFER, int(t.buffer), 0)
    b.PrependUOffsetTRelativeSlot(TensorField.NAME, name, 0)
    if quant is not None:
        b.PrependUOffsetTRelativeSlot(TensorField.QUANTIZATION, quant, 0)
    b.PrependBoolSlot(TensorField.IS_VARIABLE, bool(t.is_variable), False)
    if signature is not None:
        b.PrependUOffsetTRelativeSlot(TensorField.SHAPE_SIGNATURE, signature, 0)
    return b.EndObject()


def _write_operator(b: flatbuffers.Builder, op: Operator) -> int:
    inputs = _int_vector(b, op.inputs)
    outputs = _int_vector(b, op.outputs)
    intermediates = _int_vector(b, op.intermediates) if op.intermediates else None
    options = None
    if op.options is not None:
        if isinstance(op.options, RawOptions):
            raise VerifyError("RawOptions (options of an undeclared table) cannot be written back; "
                              "declare the table in quantir.backends.tflite.schema")
        options = _write_options(b, op.options)
    b.StartObject(TABLE_SLOTS["Operator"])
    b.PrependUint32Slot(OperatorField.OPCODE_INDEX, int(op.opcode_index), 0)
    b.PrependUOffsetTRelativeSlot(OperatorField.INPUTS, inputs, 0)
    b.PrependUOffsetTRelativeSlot(OperatorField.OUTPUTS, outputs, 0)
    if options is not None:
        b.PrependUint8Slot(OperatorField.BUILTIN_OPTIONS_TYPE, int(type(op.options).OPTIONS_TYPE), 0)
        b.PrependUOffsetTRelativeSlot(OperatorField.BUILTIN_OPTIONS, options, 0)
    if intermediates is not None:
        b.PrependUOffsetTRelativeSlot(OperatorField.INTERMEDIATES, intermediates, 0)
    return b.EndObject()


def _write_subgraph(b: flatbuffers.Builder, sg: SubGraph) -> int:
    tensors = _offset_vector(b, [_write_tensor(b, t) for t in sg.tensors])
    operators = _offset_vector(b, [_write_operator(b, op) for op in sg.operators])
    inputs = _int_vector(b, sg.inputs)
    outputs = _int_vector(b, sg.outputs)
    name = b.CreateString(sg.name) if sg.name else None
    b.StartObject(TABLE_SLOTS["SubGraph"])
    b.PrependUOffsetTRelativeSlot(SubGraphField.TENSORS, tensors, 0)
    b.PrependUOffsetTRelativeSlot(SubGraphField.INPUTS, inputs, 0)
    b.PrependUOffsetTRelativeSlot(SubGraphField.OUTPUTS, outputs, 0)
    b.PrependUOffsetTRelativeSlot(SubGraphField.OPERATORS, operators, 0)
    if name is not None:
        b.PrependUOffsetTRelativeSlot(SubGraphField.NAME, name, 0)
    return b.EndObject()


def _write_operator_code(b: flatbuffers.Builder, oc: OperatorCode) -> int:
    custom = b.CreateString(oc.custom_code) if oc.custom_code is not None else None
    b.StartObject(TABLE_SLOTS["OperatorCode"])
    b.PrependInt8Slot(OperatorCodeField.DEPRECATED_BUILTIN_CODE, oc.deprecated_builtin_code, 0)
    if custom is not None:
        b.PrependUOffsetTRelativeSlot(OperatorCodeField.CUSTOM_CODE, custom, 0)
    b.PrependInt32Slot(OperatorCodeField.VERSION, int(oc.version), 1)
    b.PrependInt32Slot(OperatorCodeField.BUILTIN_CODE, int(oc.builtin_code), 0)
    return b.EndObject()


def _write_buffer(b: flatbuffers.Builder, data: bytes) -> int:
    vec = _aligned_bytes(b, data, BUFFER_ALIGNMENT) if data else None
    b.StartObject(TABLE_SLOTS["Buffer"])
    if vec is not None:
        b.PrependUOffsetTRelativeSlot(BufferField.DATA, vec, 0)
    return b.EndObject()


# ---------------------------------------------------------------------------
# Validation


def _check_model(model: Model) -> None:
    if not model.buffers or model.buffers[0]:
        raise VerifyError("TFLite model: buffers[0] must exist and be empty (the sentinel buffer)")
    n_codes, n_buffers = len(model.operator_codes), len(model.buffers)
    if not model.subgraphs:
        raise VerifyError("TFLite model: at least one subgraph is required")
    for oc in model.operator_codes:
        if not 0 <= int(oc.builtin_code) < 2**31 or int(oc.version) < 1:
            raise VerifyError(f"TFLite model: bad operator code {oc}")
    for si, sg in enumerate(model.subgraphs):
        n_t = len(sg.tensors)
        for t in sg.tensors:
            if not 0 <= t.buffer < n_buffers:
                raise VerifyError(f"subgraph {si}: tensor {t.name!r} points at buffer {t.buffer}, "
                                  f"the model has {n_buffers}")
            if any(d < 0 for d in t.shape):
                raise VerifyError(f"subgraph {si}: tensor {t.name!r} has a negative dimension {t.shape}")
            data = model.buffers[t.buffer]
            if data and t.type in (TensorType.INT8, TensorType.UINT8, TensorType.INT16, TensorType.INT32,
                                   TensorType.INT64, TensorType.FLOAT32):
                expected = int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
                if len(data) != expected:
                    raise VerifyError(f"subgraph {si}: tensor {t.name!r} of shape {t.shape} and type "
                                      f"{t.type.name} needs {expected} bytes, buffer {t.buffer} has {len(data)}")
            if t.quantization is not None and t.quantization.per_axis:
                axis = t.quantization.quantized_dimension
                if not 0 <= axis < len(t.shape) or t.shape[axis] != len(t.quantization.scale):
                    raise VerifyError(f"subgraph {si}: tensor {t.name!r}: {len(t.quantization.scale)} per-axis "
                                      f"scales along dimension {axis} of shape {t.shape}")
        for idx in (*sg.inputs, *sg.outputs):
            if not 0 <= idx < n_t:
                raise VerifyError(f"subgraph {si}: input/output tensor index {idx} out of range [0, {n_t})")
        for oi, op in enumerate(sg.operators):
            if not 0 <= op.opcode_index < n_codes:
                raise VerifyError(f"subgraph {si} operator {oi}: opcode_index {op.opcode_index} out of range "
                                  f"[0, {n_codes})")
            for idx in op.inputs:
                if not -1 <= idx < n_t:
                    raise VerifyError(f"subgraph {si} operator {oi}: input tensor {idx} out of range")
            for idx in (*op.outputs, *op.intermediates):
                if not 0 <= idx < n_t:
                    raise VerifyError(f"subgraph {si} operator {oi}: output tensor {idx} out of range")
            code = model.operator_codes[op.opcode_index].builtin_code
            try:
                expected_cls = OPERATOR_OPTIONS.get(BuiltinOperator(code), "unknown")
            except ValueError:
                expected_cls = "unknown"
            if op.options is not None and expected_cls != "unknown" and type(op.options) is not expected_cls:
                raise VerifyError(f"subgraph {si} operator {oi} ({BuiltinOperator(code).name}) takes "
                                  f"{getattr(expected_cls, '__name__', 'no options')}, "
                                  f"found {type(op.options).__name__}")


def write_model(model: Model, *, check: bool = True) -> bytes:
    """The ``.tflite`` bytes of ``model`` (validated first; raises VerifyError when inconsistent).
    ``check=False`` writes an inconsistent model as it is: for tests and fuzzers of readers."""
    if check:
        _check_model(model)
    size = sum(len(d) + BUFFER_ALIGNMENT for d in model.buffers) + 4096
    b = flatbuffers.Builder(size)
    buffers = _offset_vector(b, [_write_buffer(b, d) for d in model.buffers])
    subgraphs = _offset_vector(b, [_write_subgraph(b, sg) for sg in model.subgraphs])
    codes = _offset_vector(b, [_write_operator_code(b, oc) for oc in model.operator_codes])
    description = b.CreateString(model.description)
    b.StartObject(TABLE_SLOTS["Model"])
    b.PrependUint32Slot(ModelField.VERSION, int(model.version), 0)
    b.PrependUOffsetTRelativeSlot(ModelField.OPERATOR_CODES, codes, 0)
    b.PrependUOffsetTRelativeSlot(ModelField.SUBGRAPHS, subgraphs, 0)
    b.PrependUOffsetTRelativeSlot(ModelField.DESCRIPTION, description, 0)
    b.PrependUOffsetTRelativeSlot(ModelField.BUFFERS, buffers, 0)
    root = b.EndObject()
    b.Finish(root, file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


# ---------------------------------------------------------------------------
# Incremental builder


class ModelBuilder:
    """Build a single-subgraph TFLite model step by step.

    Tensors are referred to by the index :meth:`add_tensor` / :meth:`add_constant` return.
    Operator codes are deduplicated by ``(code, version)``; the version defaults to
    :data:`~.schema.INT8_OP_VERSIONS` (or 1).
    """

    def __init__(self, description: str = "quantir", subgraph_name: str = "main"):
        self.description = description
        self.subgraph_name = subgraph_name
        self.buffers: list[bytes] = [b""]
        self.tensors: list[Tensor] = []
        self.operators: list[Operator] = []
        self.operator_codes: list[OperatorCode] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def add_buffer(self, data: bytes | np.ndarray) -> int:
        """Append a data buffer (numpy arrays are stored little-endian, C order); returns its index."""
        if isinstance(data, np.ndarray):
            arr = data.astype(data.dtype.newbyteorder("<"), copy=False) if data.dtype.itemsize > 1 else data
            data = np.ascontiguousarray(arr).tobytes()
        self.buffers.append(bytes(data))
        return len(self.buffers) - 1

    def add_tensor(self, name: str, shape: Sequence[int], dtype, quantization: Quantization | None = None,
                   *, buffer: int = 0, is_variable: bool = False, shape_signature: Sequence[int] = ()) -> int:
        """Add a tensor; ``dtype`` is a numpy dtype or a :class:`~.schema.TensorType`."""
        ttype = dtype if isinstance(dtype, TensorType) else tensor_type_of(dtype)
        self.tensors.append(Tensor(name, tuple(shape), ttype, buffer, quantization, is_variable,
                                   tuple(shape_signature)))
        return len(self.tensors) - 1

    def add_constant(self, name: str, data: np.ndarray, quantization: Quantization | None = None) -> int:
        """Add a constant tensor holding ``data`` (its dtype and shape are the tensor's)."""
        data = np.asarray(data)
        return self.add_tensor(name, data.shape, data.dtype, quantization, buffer=self.add_buffer(data))

    def opcode_index(self, code: BuiltinOperator | int, version: int | None = None) -> int:
        code = int(code)
        if version is None:
            try:
                version = INT8_OP_VERSIONS.get(BuiltinOperator(code), 1)
            except ValueError:
                version = 1
        for i, oc in enumerate(self.operator_codes):
            if oc.builtin_code == code and oc.version == version:
                return i
        self.operator_codes.append(OperatorCode(code, version))
        return len(self.operator_codes) - 1

    def add_operator(self, code: BuiltinOperator | int, inputs: Sequence[int], outputs: Sequence[int],
                     options: BuiltinOptions | None = None, *, version: int | None = None) -> int:
        """Append an operator (execution order is insertion order); returns its index."""
        try:
            expected = OPERATOR_OPTIONS.get(BuiltinOperator(code), "unknown")
        except ValueError:
            expected = "unknown"
        if options is None and expected not in (None, "unknown"):
            options = expected()  # write the table with defaults, as the converter does
        self.operators.append(Operator(self.opcode_index(code, version), tuple(inputs), tuple(outputs), options))
        return len(self.operators) - 1

    def set_io(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        self.inputs, self.outputs = list(inputs), list(outputs)

    def build(self) -> Model:
        sg = SubGraph(tuple(self.tensors), tuple(self.inputs), tuple(self.outputs), tuple(self.operators),
                      self.subgraph_name)
        return Model(tuple(self.operator_codes), (sg,), tuple(self.buffers), self.description)

    def finish(self) -> bytes:
        return write_model(self.build())
