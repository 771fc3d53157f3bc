"""quantir's type system: MLIR builtin types and the ``quant`` dialect's types.

Types are immutable, hashable values whose ``str`` is the canonical MLIR text;
:func:`parse_type` reads that text back with MLIR's diagnostics. The contract is
docs/mlir-quant-spec.md.

>>> from quantir.types import parse_type, uniform
>>> t = parse_type("tensor<4x!quant.uniform<i8:f32, 0.05:-3>>")
>>> t.element_type == uniform("i8", "f32", scale=0.05, zero_point=-3)
True
>>> str(t)
'tensor<4x!quant.uniform<i8:f32, 5.000000e-02:-3>>'
"""
from .builtin import (
    FLOAT_TYPE_NAMES, ComplexType, FloatType, FunctionType, IndexType, IntegerType, MemRefType,
    NoneType, OpaqueType, ShapedType, TensorType, TupleType, Type, VectorType,
    bf16, f16, f32, f64, i1, i8, i16, i32, i64, index,
)
from .container import (
    check_quantized_container, element_type_of, quantized_element_type, to_expressed_type,
    to_storage_type,
)
from .floatfmt import format_mlir_float, format_mlir_float_e
from .parser import TypeParser, parse_type
from .quant import (
    AnyQuantizedType, CalibratedQuantizedType, QuantizedType, UniformQuantizedPerAxisType,
    UniformQuantizedSubChannelType, UniformQuantizedType,
)
from .quant_factories import (
    any_quantized, calibrated, storage_type_from_spelling, uniform, uniform_per_axis,
    uniform_sub_channel,
)

__all__ = [
    # builtin
    "Type", "IntegerType", "FloatType", "IndexType", "NoneType", "ShapedType", "TensorType",
    "VectorType", "MemRefType", "FunctionType", "ComplexType", "TupleType", "OpaqueType",
    "FLOAT_TYPE_NAMES", "i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "index",
    # quant
    "QuantizedType", "UniformQuantizedType", "UniformQuantizedPerAxisType",
    "UniformQuantizedSubChannelType", "AnyQuantizedType", "CalibratedQuantizedType",
    "uniform", "uniform_per_axis", "uniform_sub_channel", "any_quantized", "calibrated",
    "storage_type_from_spelling",
    # containers
    "check_quantized_container", "element_type_of", "quantized_element_type",
    "to_storage_type", "to_expressed_type",
    # text
    "parse_type", "TypeParser", "format_mlir_float", "format_mlir_float_e",
]
