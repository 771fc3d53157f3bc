"""quantir types -> ONNX tensor types.

The inverse of ``frontends/onnx/dtypes.py``: signless and signed ``iN`` are ONNX's signed
integers, ``uiN`` the unsigned ones, ``i1`` is BOOL. A quantized element type
(``!quant.uniform<i8:f32, ...>``) travels in ONNX as its storage integer, which is what
QuantizeLinear produces and DequantizeLinear consumes. Everything else (bf16, f8, index,
odd integer widths) is refused with ``UnsupportedOpError``.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from ...errors import UnsupportedOpError
from ...types import FloatType, IntegerType, QuantizedType, TensorType, Type

_FLOATS = {"f16": TensorProto.FLOAT16, "f32": TensorProto.FLOAT, "f64": TensorProto.DOUBLE}
_INTS = {(8, True): TensorProto.INT8, (16, True): TensorProto.INT16, (32, True): TensorProto.INT32,
         (64, True): TensorProto.INT64, (8, False): TensorProto.UINT8, (16, False): TensorProto.UINT16,
         (32, False): TensorProto.UINT32, (64, False): TensorProto.UINT64,
         (4, True): TensorProto.INT4, (4, False): TensorProto.UINT4}   # int4: weight-only storage, packed


def storage_element_type(t: Type) -> Type:
    """The element type as ONNX sees it: a quantized type becomes its storage integer."""
    et = t.element_type if isinstance(t, TensorType) else t
    if isinstance(et, QuantizedType):
        st = et.storage_type
        if isinstance(st, IntegerType) and st.is_signless and et.is_signed is False:
            return IntegerType(st.width, "unsigned")   # MLIR's ``u8`` spelling: signless storage, unsigned values
        return st
    return et


def onnx_elem_type(t: Type, what: str) -> int:
    """The ``TensorProto.DataType`` code of ``t``'s element type; ``what`` names the value for errors."""
    et = storage_element_type(t)
    if isinstance(et, FloatType) and et.name in _FLOATS:
        return _FLOATS[et.name]
    if isinstance(et, IntegerType):
        if et.width == 1:
            return TensorProto.BOOL
        code = _INTS.get((et.width, et.signedness != "unsigned"))
        if code is not None:
            return code
    raise UnsupportedOpError(f"{what} has element type '{et}', which has no ONNX tensor type quantir can export "
                             f"(supported: f16, f32, f64, i1, (u)i8/16/32/64 and quantized types stored in them)")


def numpy_dtype(t: Type, what: str) -> np.dtype:
    """The numpy dtype of ``t``'s ONNX element type."""
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(onnx_elem_type(t, what)))


def value_info(name: str, t: Type, what: str) -> onnx.ValueInfoProto:
    """A graph input/output description; dynamic dims become ``dim_param`` ``<name>_d<i>``."""
    elem = onnx_elem_type(t, what)
    shape = t.shape if isinstance(t, TensorType) else ()
    if shape is None:
        return onnx.helper.make_tensor_value_info(name, elem, None)
    dims = [d if d is not None else f"{name}_d{i}" for i, d in enumerate(shape)]
    return onnx.helper.make_tensor_value_info(name, elem, dims)
