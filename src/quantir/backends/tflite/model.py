"""A TFLite model as plain Python data: what :mod:`.writer` serialises and :mod:`.reader` parses.

The structures mirror the flatbuffer tables one to one (``Model``, ``SubGraph``,
``Tensor``, ``QuantizationParameters``, ``OperatorCode``, ``Operator``, ``Buffer``) with
the subset of fields quantir uses, so ``read_model(write_model(m)) == m`` holds for every
model built here. Layout is whatever the tensors say: TFLite's builtin operators expect
NHWC activations, OHWI conv filters, ``[1, KH, KW, C_out]`` depthwise filters and
``[C_out, K]`` fully-connected weights.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantir.errors import ModelFormatError, UnsupportedOpError

from quantir.backends.tflite.schema import (
    NUMPY_DTYPES,
    PLACEHOLDER_FOR_GREATER_OP_CODES,
    SCHEMA_VERSION,
    BuiltinOperator,
    BuiltinOptions,
    TensorType,
)

__all__ = ["Quantization", "Tensor", "OperatorCode", "Operator", "SubGraph", "Model"]


@dataclass(frozen=True)
class Quantization:
    """``QuantizationParameters``: ``real = scale · (q - zero_point)``.

    Per-tensor: one scale and one zero point. Per-axis: one per index of
    ``quantized_dimension``. Scales are stored as float32 in the file.
    """

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    quantized_dimension: int = 0
    min: tuple[float, ...] = ()
    max: tuple[float, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "scale", tuple(float(np.float32(s)) for s in np.ravel(self.scale)))
        object.__setattr__(self, "zero_point", tuple(int(z) for z in np.ravel(self.zero_point)))
        object.__setattr__(self, "min", tuple(float(np.float32(v)) for v in np.ravel(self.min)))
        object.__setattr__(self, "max", tuple(float(np.float32(v)) for v in np.ravel(self.max)))
        if len(self.scale) != len(self.zero_point):
            raise ValueError(f"Quantization: {len(self.scale)} scales but {len(self.zero_point)} zero points")

    @property
    def per_axis(self) -> bool:
        return len(self.scale) > 1


@dataclass(frozen=True)
class Tensor:
    """``Tensor``: ``buffer`` indexes ``Model.buffers``; 0 is the empty sentinel (no data).

    ``shape_signature`` repeats ``shape`` with -1 for dynamic dims (a batch of any size);
    empty when every dim is static.
    """

    name: str
    shape: tuple[int, ...]
    type: TensorType
    buffer: int = 0
    quantization: Quantization | None = None
    is_variable: bool = False
    shape_signature: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "shape_signature", tuple(int(d) for d in self.shape_signature))
        if self.shape_signature and len(self.shape_signature) != len(self.shape):
            raise ValueError(f"tensor {self.name!r}: shape_signature {self.shape_signature} does not match "
                             f"the rank of shape {self.shape}")
        object.__setattr__(self, "type", TensorType(self.type))

    @property
    def dtype(self) -> np.dtype:
        if self.type not in NUMPY_DTYPES:
            # RESOURCE, STRING, VARIANT, COMPLEX...: a constant of such a type cannot be read as an array
            raise UnsupportedOpError(f"tensor {self.name!r} has type {self.type.name}, whose data quantir cannot read; "
                                     f"quantir reads int8 models (int8 and int32 tensors, float32 at QUANTIZE/"
                                     f"DEQUANTIZE)")
        return NUMPY_DTYPES[self.type]


@dataclass(frozen=True)
class OperatorCode:
    """``OperatorCode``; the file stores ``deprecated_builtin_code = min(code, 127)`` too."""

    builtin_code: int
    version: int = 1
    custom_code: str | None = None

    @property
    def deprecated_builtin_code(self) -> int:
        return min(int(self.builtin_code), PLACEHOLDER_FOR_GREATER_OP_CODES)

    @property
    def name(self) -> str:
        try:
            return BuiltinOperator(self.builtin_code).name
        except ValueError:
            return f"BUILTIN_{self.builtin_code}"


@dataclass(frozen=True)
class Operator:
    """``Operator``: indices into the subgraph's tensors; -1 marks an omitted optional input."""

    opcode_index: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: BuiltinOptions | None = None
    intermediates: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(int(i) for i in self.inputs))
        object.__setattr__(self, "outputs", tuple(int(i) for i in self.outputs))
        object.__setattr__(self, "intermediates", tuple(int(i) for i in self.intermediates))


@dataclass(frozen=True)
class SubGraph:
    tensors: tuple[Tensor, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operators: tuple[Operator, ...]
    name: str = ""


@dataclass(frozen=True)
class Model:
    """``Model``; ``buffers[0]`` must be the empty sentinel buffer."""

    operator_codes: tuple[OperatorCode, ...]
    subgraphs: tuple[SubGraph, ...]
    buffers: tuple[bytes, ...] = (b"",)
    description: str = ""
    version: int = SCHEMA_VERSION

    def tensor_data(self, tensor: Tensor) -> np.ndarray | None:
        """The constant contents of ``tensor`` as a (read-only) array of its shape, or None.

        Raises ModelFormatError when the buffer size does not match the shape and type.
        """
        data = self.buffers[tensor.buffer] if 0 <= tensor.buffer < len(self.buffers) else b""
        if not data:
            return None
        if tensor.type is TensorType.INT4:
            return _unpack_int4(tensor, data)
        need = int(np.prod(tensor.shape, dtype=np.int64)) * tensor.dtype.itemsize
        if len(data) != need:
            raise ModelFormatError(f"tensor {tensor.name!r}: buffer {tensor.buffer} holds {len(data)} bytes, "
                                   f"shape {tensor.shape} of {tensor.type.name} needs {need}")
        arr = np.frombuffer(data, dtype=tensor.dtype)
        return arr.reshape(tensor.shape)

    def operator_name(self, op: Operator) -> str:
        return self.operator_codes[op.opcode_index].name


def _unpack_int4(tensor: Tensor, data: bytes) -> np.ndarray:
    """An INT4 constant as int8 values in [-8, 7]: the row-major elements two per byte, the first
    in the low nibble (LiteRT's packing; an odd count ends with a padding nibble)."""
    n = int(np.prod(tensor.shape, dtype=np.int64))
    if len(data) != (n + 1) // 2:
        raise ModelFormatError(f"tensor {tensor.name!r}: buffer {tensor.buffer} holds {len(data)} bytes, "
                               f"shape {tensor.shape} of INT4 (two per byte) needs {(n + 1) // 2}")
    b = np.frombuffer(data, np.uint8)
    nibbles = np.stack([b & 0xF, b >> 4], axis=-1).reshape(-1)[:n].astype(np.int8)
    return np.where(nibbles > 7, nibbles - 16, nibbles).astype(np.int8).reshape(tensor.shape)
