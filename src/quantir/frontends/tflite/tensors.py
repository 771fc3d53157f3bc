"""TFLite tensors as IR types: shapes (``-1`` in ``shape_signature`` -> dynamic) and
quantization (``!quant.uniform`` per tensor or per axis).

What a file says is represented as it is, spec violations included (asymmetric weights, odd
bias scales): ``quantir check`` judges them on the IR. The IR types state only what the file
states, so imported weights keep the full int8 storage range ``[-128, 127]`` (a file cannot
say "narrow range"); the checker looks at the stored values instead.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from ...backends.tflite.model import Quantization, Tensor
from ...backends.tflite.schema import TensorType as TFLType
from ...errors import ModelFormatError, QuantirError, UnsupportedOpError
from ...types import (FloatType, IntegerType, TensorType, Type, UniformQuantizedPerAxisType,
                      UniformQuantizedType)

__all__ = ["dims", "is_quantized", "element_type", "tensor_type", "STORAGE"]

F32 = FloatType("f32")
STORAGE = {TFLType.INT8: IntegerType(8), TFLType.INT16: IntegerType(16), TFLType.INT32: IntegerType(32),
           TFLType.INT4: IntegerType(4)}   # int4: only weight-only constants (the importer refuses others)


def dims(t: Tensor) -> tuple[int | None, ...]:
    """The tensor's dims with ``None`` where ``shape_signature`` says -1 (any size)."""
    sig = t.shape_signature or t.shape
    return tuple(None if d < 0 else int(d) for d in sig)


def is_quantized(t: Tensor) -> bool:
    return t.quantization is not None and len(t.quantization.scale) > 0


def element_type(t: Tensor, axis_to_ir: Callable[[int], int] = lambda a: a) -> Type:
    """The IR element type of ``t``; ``axis_to_ir`` maps a per-axis ``quantized_dimension``
    (a TFLite axis) to the IR axis of the layout the value is built in.

    int8 tensors must be quantized (ModelFormatError otherwise); quantized int16 tensors are 16x8
    activations; int32 tensors are quantized
    biases or plain integers; int64 and bool are plain (indices, comparison results); float32 is
    ``f32``; other types are not read.
    """
    if t.type in STORAGE and is_quantized(t):
        return _quantized(t, t.quantization, STORAGE[t.type], axis_to_ir)
    if t.type is TFLType.INT8:
        raise ModelFormatError(f"tensor '{t.name}' is int8 but has no quantization parameters (scale, zero point)")
    if t.type is TFLType.INT32:
        return IntegerType(32)
    if t.type in (TFLType.INT64, TFLType.BOOL):   # ARG_MAX's or SHAPE's indices, a comparison's result
        return IntegerType(64 if t.type is TFLType.INT64 else 1)
    if t.type is TFLType.FLOAT32:
        return F32
    raise UnsupportedOpError(f"tensor '{t.name}' has element type {t.type.name}; quantir reads int8 models "
                             f"(int8 activations and weights, int32 biases, float32 at QUANTIZE/DEQUANTIZE)")


def _quantized(t: Tensor, q: Quantization, storage: IntegerType, axis_to_ir: Callable[[int], int]) -> Type:
    # a scale that is not finite and positive leaves real = scale·(q - zp) undefined: refused here, for
    # every tensor, rather than imported for `check` (NaN passes the types' range test)
    bad = [s for s in q.scale if not (math.isfinite(s) and s > 0)]
    if bad:
        raise ModelFormatError(f"tensor '{t.name}': scale {bad[0]:g} must be finite and positive; LiteRT's "
                               f"arithmetic is undefined with it (re-quantize the model)")
    try:
        if len(q.scale) == 1:
            return UniformQuantizedType(storage_type=storage, expressed_type=F32, scale=q.scale[0],
                                        zero_point=q.zero_point[0])
        axis = q.quantized_dimension
        if not 0 <= axis < len(t.shape) or t.shape[axis] != len(q.scale):
            raise ModelFormatError(f"tensor '{t.name}': {len(q.scale)} per-axis scales along dimension {axis} "
                                   f"of shape {list(t.shape)}")
        return UniformQuantizedPerAxisType(storage_type=storage, expressed_type=F32, scales=q.scale,
                                           zero_points=q.zero_point, quantized_dimension=axis_to_ir(axis))
    except ModelFormatError:
        raise
    except QuantirError as e:
        raise ModelFormatError(f"tensor '{t.name}': invalid quantization parameters: {e.message}") from None


def tensor_type(t: Tensor, shape: tuple, axis_to_ir: Callable[[int], int] = lambda a: a) -> TensorType:
    return TensorType(shape, element_type(t, axis_to_ir))
