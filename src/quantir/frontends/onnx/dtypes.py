"""ONNX tensor element types <-> quantir element types.

Signed integers map to MLIR's signless ``iN`` (as ``numpy_to_element_type`` does), unsigned
ones to ``uiN``, BOOL to ``i1``. Types without numpy storage in quantir (strings, complex,
bfloat16, the float8/float4 and sub-byte integer families) are refused with
``UnsupportedOpError`` at the first tensor that uses them.
"""
from __future__ import annotations

from onnx import TensorProto

from ...errors import UnsupportedOpError
from ...types import FloatType, IntegerType, Type

ELEMENT_TYPES: dict[int, Type] = {
    TensorProto.FLOAT: FloatType("f32"),
    TensorProto.DOUBLE: FloatType("f64"),
    TensorProto.FLOAT16: FloatType("f16"),
    TensorProto.INT8: IntegerType(8),
    TensorProto.INT16: IntegerType(16),
    TensorProto.INT32: IntegerType(32),
    TensorProto.INT64: IntegerType(64),
    TensorProto.UINT8: IntegerType(8, "unsigned"),
    TensorProto.UINT16: IntegerType(16, "unsigned"),
    TensorProto.UINT32: IntegerType(32, "unsigned"),
    TensorProto.UINT64: IntegerType(64, "unsigned"),
    TensorProto.BOOL: IntegerType(1),
}
ONNX_TYPES: dict[Type, int] = {t: code for code, t in ELEMENT_TYPES.items()}
# 4-bit integers are read as initializers only (weight-only models' weights, held one value per
# byte); graph values, casts and attributes of these types stay refused
INITIALIZER_ONLY: dict[int, Type] = {TensorProto.INT4: IntegerType(4), TensorProto.UINT4: IntegerType(4, "unsigned")}


def element_type(code: int, what: str) -> Type:
    """The quantir element type of ONNX type ``code``; ``what`` names the tensor for errors."""
    try:
        return ELEMENT_TYPES[code]
    except KeyError:
        name = TensorProto.DataType.Name(code) if code in TensorProto.DataType.values() else str(code)
        raise UnsupportedOpError(f"{what} has element type {name}, which quantir does not support "
                                 f"(supported: float, double, float16, (u)int8/16/32/64, bool)") from None
