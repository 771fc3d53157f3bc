"""Parse ``.tflite`` bytes into a :class:`~.model.Model`, checking every offset.

The reader walks the flatbuffer by slot (the numbers in :mod:`.schema`) with its own
bounds-checked primitives rather than the ``flatbuffers`` package's table accessors,
so a truncated or corrupt file always raises :class:`~quantir.errors.ModelFormatError`
naming what was being read and where — never an ``IndexError`` or ``struct.error``.

Flatbuffer layout in brief: a table at ``pos`` starts with an int32 ``soffset``; its
vtable is at ``pos - soffset`` and holds ``uint16`` vtable size, table size, then one
``uint16`` per slot (0 = field absent, else the field's offset from ``pos``). Offsets to
vectors, strings and tables are ``uint32`` relative to where they are stored; a vector
starts with its ``uint32`` length.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from quantir.backends.tflite.model import Model, Operator, OperatorCode, Quantization, SubGraph, Tensor
from quantir.backends.tflite.schema import (
    FILE_IDENTIFIER,
    OPTIONS_CLASSES,
    SCALAR_KINDS,
    VECTOR_KINDS,
    BufferField,
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
)
from quantir.errors import ModelFormatError

__all__ = ["read_model", "load_model"]


class _Buffer:
    """Bounds-checked little-endian reads from the file bytes."""

    def __init__(self, data: bytes, source: str):
        self.data = data
        self.size = len(data)
        self.source = source

    def fail(self, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.source}: corrupt or truncated TFLite file: {message}")

    def need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.size:
            raise self.fail(f"{what} needs bytes [{pos}, {pos + size}) but the file has {self.size} bytes")

    def unpack(self, fmt: str, pos: int, what: str):
        self.need(pos, struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, self.data, pos)[0]

    def table(self, pos: int, what: str) -> _Table:
        return _Table(self, pos, what)


class _Table:
    def __init__(self, buf: _Buffer, pos: int, what: str):
        self.buf, self.pos, self.what = buf, pos, what
        soffset = buf.unpack("<i", pos, f"{what} table header")
        self.vtable = pos - soffset
        self.vtable_size = buf.unpack("<H", self.vtable, f"{what} vtable")
        self.table_size = buf.unpack("<H", self.vtable + 2, f"{what} vtable")
        if self.vtable_size < 4 or self.vtable_size % 2:
            raise buf.fail(f"{what}: vtable size {self.vtable_size} at byte {self.vtable} is invalid")
        buf.need(self.vtable, self.vtable_size, f"{what} vtable")
        buf.need(pos, max(self.table_size, 4), f"{what} table")

    def field_pos(self, slot: int) -> int | None:
        entry = 4 + 2 * slot
        if entry + 2 > self.vtable_size:
            return None
        off = self.buf.unpack("<H", self.vtable + entry, f"{self.what} vtable")
        if off == 0:
            return None
        if off >= max(self.table_size, 4):
            raise self.buf.fail(f"{self.what}: field {slot} at offset {off} lies outside its "
                                f"{self.table_size}-byte table")
        return self.pos + off

    def scalar(self, slot: int, fmt: str, default, name: str):
        p = self.field_pos(slot)
        return default if p is None else self.buf.unpack(fmt, p, f"{self.what}.{name}")

    def _target(self, slot: int, name: str) -> int | None:
        p = self.field_pos(slot)
        if p is None:
            return None
        return p + self.buf.unpack("<I", p, f"{self.what}.{name} offset")

    def table(self, slot: int, name: str) -> _Table | None:
        t = self._target(slot, name)
        return None if t is None else _Table(self.buf, t, f"{self.what}.{name}")

    def vector(self, slot: int, elem_size: int, name: str) -> tuple[int, int] | None:
        """``(start, length)`` of a vector field, with its bytes checked to be in the file."""
        t = self._target(slot, name)
        if t is None:
            return None
        length = self.buf.unpack("<I", t, f"{self.what}.{name} length")
        self.buf.need(t + 4, length * elem_size, f"{self.what}.{name} ({length} elements)")
        return t + 4, length

    def array(self, slot: int, dtype: str, name: str) -> np.ndarray:
        dt = np.dtype(dtype)
        vec = self.vector(slot, dt.itemsize, name)
        if vec is None:
            return np.zeros(0, dtype=dt)
        start, length = vec
        return np.frombuffer(self.buf.data, dtype=dt, count=length, offset=start).copy()

    def bytes_(self, slot: int, name: str) -> bytes:
        vec = self.vector(slot, 1, name)
        if vec is None:
            return b""
        start, length = vec
        return bytes(self.buf.data[start:start + length])

    def string(self, slot: int, name: str) -> str | None:
        vec = self.vector(slot, 1, name)
        if vec is None:
            return None
        start, length = vec
        try:
            return bytes(self.buf.data[start:start + length]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.buf.fail(f"{self.what}.{name} is not valid UTF-8 ({e.reason})") from None

    def tables(self, slot: int, name: str) -> list[_Table]:
        vec = self.vector(slot, 4, name)
        if vec is None:
            return []
        start, length = vec
        out = []
        for i in range(length):
            p = start + 4 * i
            out.append(_Table(self.buf, p + self.buf.unpack("<I", p, f"{self.what}.{name}[{i}]"),
                              f"{self.what}.{name}[{i}]"))
        return out


def _enum(cls, value: int, what: str, buf: _Buffer):
    try:
        return cls(value)
    except ValueError:
        raise buf.fail(f"{what} = {value} is not a valid {cls.__name__}") from None


def _read_options(buf: _Buffer, op: _Table, what: str) -> BuiltinOptions | None:
    options_type = op.scalar(OperatorField.BUILTIN_OPTIONS_TYPE, "<B", 0, "builtin_options_type")
    table = op.table(OperatorField.BUILTIN_OPTIONS, "builtin_options")
    if options_type == 0:
        return None
    if table is None:
        raise buf.fail(f"{what}: builtin_options_type {options_type} is set but the options table is missing")
    cls = OPTIONS_CLASSES.get(options_type)
    if cls is None:
        return RawOptions(options_type=options_type)
    values = {}
    for f in option_fields(cls):
        if f.kind in VECTOR_KINDS:
            values[f.name] = tuple(int(v) for v in table.array(f.slot, VECTOR_KINDS[f.kind][0], f.name))
            continue
        fmt = SCALAR_KINDS[f.kind][0]
        raw = table.scalar(f.slot, fmt, f.schema_default, f.name)
        if f.kind == "float32":
            raw = float(raw)
        if f.enum is not None:
            raw = _enum(f.enum, int(raw), f"{what}.{cls.__name__}.{f.name}", buf)
        values[f.name] = raw
    return cls(**values)


def _read_quantization(buf: _Buffer, t: _Table | None, what: str) -> Quantization | None:
    if t is None:
        return None
    scale = t.array(QuantizationField.SCALE, "<f4", "scale")
    zero_point = t.array(QuantizationField.ZERO_POINT, "<i8", "zero_point")
    qmin = t.array(QuantizationField.MIN, "<f4", "min")
    qmax = t.array(QuantizationField.MAX, "<f4", "max")
    axis = t.scalar(QuantizationField.QUANTIZED_DIMENSION, "<i", 0, "quantized_dimension")
    if scale.size == 0 and zero_point.size == 0 and qmin.size == 0 and qmax.size == 0:
        return None
    if scale.size != zero_point.size:
        raise buf.fail(f"{what}: {scale.size} scales but {zero_point.size} zero points")
    return Quantization(tuple(scale.tolist()), tuple(zero_point.tolist()), int(axis),
                        tuple(qmin.tolist()), tuple(qmax.tolist()))


def _read_tensor(buf: _Buffer, t: _Table, what: str) -> Tensor:
    shape = tuple(int(d) for d in t.array(TensorField.SHAPE, "<i4", "shape"))
    ttype = _enum(TensorType, t.scalar(TensorField.TYPE, "<b", 0, "type"), f"{what}.type", buf)
    buffer = t.scalar(TensorField.BUFFER, "<I", 0, "buffer")
    name = t.string(TensorField.NAME, "name") or ""
    quant = _read_quantization(buf, t.table(TensorField.QUANTIZATION, "quantization"), f"{what} ({name!r})")
    is_variable = bool(t.scalar(TensorField.IS_VARIABLE, "<?", False, "is_variable"))
    signature = tuple(int(d) for d in t.array(TensorField.SHAPE_SIGNATURE, "<i4", "shape_signature"))
    if signature and len(signature) != len(shape):
        raise ModelFormatError(f"{what} ({name!r}): shape_signature {signature} does not match shape {shape}")
    return Tensor(name, shape, ttype, int(buffer), quant, is_variable, signature)


def _read_operator(buf: _Buffer, t: _Table, what: str) -> Operator:
    return Operator(
        opcode_index=int(t.scalar(OperatorField.OPCODE_INDEX, "<I", 0, "opcode_index")),
        inputs=tuple(int(i) for i in t.array(OperatorField.INPUTS, "<i4", "inputs")),
        outputs=tuple(int(i) for i in t.array(OperatorField.OUTPUTS, "<i4", "outputs")),
        options=_read_options(buf, t, what),
        intermediates=tuple(int(i) for i in t.array(OperatorField.INTERMEDIATES, "<i4", "intermediates")),
    )


def _read_operator_code(t: _Table) -> OperatorCode:
    deprecated = t.scalar(OperatorCodeField.DEPRECATED_BUILTIN_CODE, "<b", 0, "deprecated_builtin_code")
    code = t.scalar(OperatorCodeField.BUILTIN_CODE, "<i", 0, "builtin_code")
    version = t.scalar(OperatorCodeField.VERSION, "<i", 1, "version")
    custom = t.string(OperatorCodeField.CUSTOM_CODE, "custom_code")
    # Old files only set the deprecated byte; LiteRT's GetBuiltinCode takes the larger one.
    return OperatorCode(max(int(deprecated), int(code)), int(version), custom)


def _read_buffer(buf: _Buffer, t: _Table, what: str) -> bytes:
    offset = t.scalar(BufferField.OFFSET, "<Q", 0, "offset")
    if offset > 1:
        raise ModelFormatError(f"{buf.source}: {what} stores its data outside the flatbuffer "
                               "(models over 2 GB); quantir does not read such files")
    return t.bytes_(BufferField.DATA, "data")


def _parse(buf: _Buffer) -> Model:
    if buf.size < 8:
        raise buf.fail(f"{buf.size} bytes is too short for a flatbuffer header")
    ident = bytes(buf.data[4:8])
    if ident != FILE_IDENTIFIER:
        raise ModelFormatError(f"{buf.source}: not a TFLite model: file identifier {ident!r}, "
                               f"expected {FILE_IDENTIFIER!r}")
    root = buf.table(buf.unpack("<I", 0, "root offset"), "Model")
    version = int(root.scalar(ModelField.VERSION, "<I", 0, "version"))
    codes = tuple(_read_operator_code(t) for t in root.tables(ModelField.OPERATOR_CODES, "operator_codes"))
    buffers = tuple(_read_buffer(buf, t, f"buffers[{i}]")
                    for i, t in enumerate(root.tables(ModelField.BUFFERS, "buffers")))
    description = root.string(ModelField.DESCRIPTION, "description") or ""
    subgraphs = []
    for si, sg in enumerate(root.tables(ModelField.SUBGRAPHS, "subgraphs")):
        tensors = tuple(_read_tensor(buf, t, f"subgraphs[{si}].tensors[{i}]")
                        for i, t in enumerate(sg.tables(SubGraphField.TENSORS, "tensors")))
        operators = tuple(_read_operator(buf, t, f"subgraphs[{si}].operators[{i}]")
                          for i, t in enumerate(sg.tables(SubGraphField.OPERATORS, "operators")))
        subgraphs.append(SubGraph(
            tensors=tensors,
            inputs=tuple(int(i) for i in sg.array(SubGraphField.INPUTS, "<i4", "inputs")),
            outputs=tuple(int(i) for i in sg.array(SubGraphField.OUTPUTS, "<i4", "outputs")),
            operators=operators,
            name=sg.string(SubGraphField.NAME, "name") or "",
        ))
    model = Model(codes, tuple(subgraphs), buffers or (b"",), description, version)
    _check_references(buf, model)
    return model


def _check_references(buf: _Buffer, model: Model) -> None:
    """Indices inside the model must point at existing objects."""
    for si, sg in enumerate(model.subgraphs):
        n_t = len(sg.tensors)
        for i, t in enumerate(sg.tensors):
            if t.buffer >= len(model.buffers):
                raise buf.fail(f"subgraphs[{si}].tensors[{i}] ({t.name!r}) points at buffer {t.buffer}, "
                               f"the model has {len(model.buffers)}")
        for idx in (*sg.inputs, *sg.outputs):
            if not 0 <= idx < n_t:
                raise buf.fail(f"subgraphs[{si}] input/output {idx} is not a tensor index (0..{n_t - 1})")
        for oi, op in enumerate(sg.operators):
            if op.opcode_index >= len(model.operator_codes):
                raise buf.fail(f"subgraphs[{si}].operators[{oi}] uses operator code {op.opcode_index}, "
                               f"the model has {len(model.operator_codes)}")
            for idx in (*op.inputs, *op.outputs):
                if not -1 <= idx < n_t:
                    raise buf.fail(f"subgraphs[{si}].operators[{oi}] refers to tensor {idx} (0..{n_t - 1})")


def read_model(data: bytes | bytearray | memoryview, source: str = "<bytes>") -> Model:
    """Parse a ``.tflite`` flatbuffer. Raises ModelFormatError on anything malformed."""
    buf = _Buffer(bytes(data), source)
    try:
        return _parse(buf)
    except ModelFormatError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError, MemoryError) as e:  # belt and braces
        raise buf.fail(f"{type(e).__name__}: {e}") from None


def load_model(path: str | Path) -> Model:
    """Read and parse a ``.tflite`` file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ModelFormatError(f"{p}: cannot read TFLite file: {e.strerror or e}") from None
    return read_model(data, str(p))
