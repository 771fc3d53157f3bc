"""Builtin types: construction, printing, properties, parsing and MLIR's diagnostics."""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

from quantir.errors import ParseError, VerifyError
from quantir.types import (
    FLOAT_TYPE_NAMES, ComplexType, FloatType, FunctionType, IndexType, IntegerType, MemRefType,
    NoneType, OpaqueType, TensorType, TupleType, VectorType, bf16, f16, f32, f64, i1, i8, i16, i32,
    i64, index, parse_type,
)


def test_singletons_and_spelling():
    assert [str(t) for t in (i1, i8, i16, i32, i64, f16, bf16, f32, f64, index)] == \
        ["i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "index"]
    assert str(IntegerType(8, "signed")) == "si8" and str(IntegerType(4, "unsigned")) == "ui4"
    assert str(NoneType()) == "none" and IndexType() == index


def test_structural_equality_hash_and_immutability():
    assert IntegerType(8) == i8 and hash(IntegerType(8)) == hash(i8)
    assert IntegerType(8, "signed") != i8
    assert TensorType((2, None), f32) == parse_type("tensor<2x?xf32>")
    assert len({TensorType((2,), f32), TensorType((2,), f32), TensorType((3,), f32)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        i8.width = 16  # type: ignore[misc]


@pytest.mark.parametrize("name,bits,max_finite,min_denormal,dtype", [
    ("f16", 16, 65504.0, 2.0**-24, np.float16), ("bf16", 16, 3.3895313892515355e38, 2.0**-133, None),
    ("f32", 32, 3.4028234663852886e38, 2.0**-149, np.float32), ("f64", 64, 1.7976931348623157e308, 5e-324, np.float64),
    ("tf32", 19, 3.4011621342146535e38, 2.0**-136, None), ("f8E4M3FN", 8, 448.0, 2.0**-9, None),
    ("f8E5M2", 8, 57344.0, 2.0**-16, None), ("f8E4M3FNUZ", 8, 240.0, 2.0**-10, None),
    ("f8E5M2FNUZ", 8, 57344.0, 2.0**-17, None), ("f8E4M3B11FNUZ", 8, 30.0, 2.0**-13, None),
    ("f8E4M3", 8, 240.0, 2.0**-9, None), ("f8E3M4", 8, 15.5, 2.0**-6, None),
    ("f8E8M0FNU", 8, 2.0**127, 2.0**-127, None), ("f6E2M3FN", 6, 7.5, 0.125, None),
    ("f6E3M2FN", 6, 28.0, 0.0625, None), ("f4E2M1FN", 4, 6.0, 0.5, None),
    ("f80", 80, math.inf, 0.0, "longdouble"), ("f128", 128, math.inf, 0.0, None),
])
def test_float_type_properties(name, bits, max_finite, min_denormal, dtype):
    t = FloatType(name)
    assert str(t) == name and t.bitwidth == bits
    assert t.max_finite == max_finite and t.min_denormal == min_denormal
    if dtype == "longdouble":
        assert t.numpy_dtype in (None, np.dtype(np.longdouble))
    else:
        assert t.numpy_dtype == (None if dtype is None else np.dtype(dtype))


def test_exact_float_limits():
    assert FloatType("f80").exact_max_finite == Fraction((1 << 64) - 1) * 2 ** (16383 - 63)
    assert FloatType("f16").exact_min_denormal == Fraction(1, 2**24)
    assert set(FLOAT_TYPE_NAMES) >= {"f16", "bf16", "f32", "f64", "tf32", "f80", "f8E4M3FN", "f4E2M1FN"}


def test_shaped_type_properties():
    t = TensorType((2, None, 3), f32)
    assert (t.rank, t.is_ranked, t.has_static_shape, t.num_elements) == (3, True, False, None)
    assert t.is_dynamic_dim(1) and not t.is_dynamic_dim(0)
    s = TensorType((2, 3), i8)
    assert (s.rank, s.has_static_shape, s.num_elements) == (2, True, 6)
    assert TensorType((), f32).num_elements == 1 and str(TensorType((), f32)) == "tensor<f32>"
    u = TensorType(None, f32)
    assert (u.rank, u.is_ranked, u.has_static_shape, str(u)) == (None, False, False, "tensor<*xf32>")
    assert s.clone(element_type=f32) == TensorType((2, 3), f32)
    assert s.clone(shape=(None,)) == TensorType((None,), i8)


@pytest.mark.parametrize("t,text", [
    (TensorType((2, None), f32), "tensor<2x?xf32>"),
    (VectorType((2, 4), f32, (False, True)), "vector<2x[4]xf32>"),
    (VectorType((), f32), "vector<f32>"),
    (MemRefType((4,), f32, 1), "memref<4xf32, 1>"),
    (MemRefType(None, f32), "memref<*xf32>"),
    (FunctionType((i8, f32), (f32,)), "(i8, f32) -> f32"),
    (FunctionType((), ()), "() -> ()"),
    (FunctionType((i8,), (f32, i8)), "(i8) -> (f32, i8)"),
    (FunctionType((i8,), (FunctionType((i8,), (i8,)),)), "(i8) -> ((i8) -> i8)"),
    (ComplexType(f32), "complex<f32>"), (TupleType((i8, f32)), "tuple<i8, f32>"), (TupleType(()), "tuple<>"),
    (OpaqueType("foo", "bar<1, 2>"), "!foo.bar<1, 2>"), (OpaqueType("foo", '"x"'), '!foo<"x">'),
])
def test_print_and_parse_back(t, text):
    assert str(t) == text
    assert parse_type(text) == t


@pytest.mark.parametrize("make,message", [
    (lambda: IntegerType(-1), "integer bitwidth is limited to 16777215 bits"),
    (lambda: IntegerType(8, "weird"), "invalid integer signedness"),
    (lambda: FloatType("f7"), "unknown float type"),
    (lambda: TensorType((2,), NoneType()), "invalid tensor element type"),
    (lambda: TensorType((-1,), f32), "invalid tensor dimension"),
    (lambda: VectorType((0,), f32), "vector types must have positive constant sizes but got 0"),
    (lambda: VectorType((4,), TensorType((4,), f32)), "failed to verify 'elementType'"),
    (lambda: MemRefType((4,), NoneType()), "invalid memref element type"),
    (lambda: ComplexType(index), "invalid element type for complex"),
])
def test_construction_errors(make, message):
    with pytest.raises(VerifyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


@pytest.mark.parametrize("text,col,message", [
    ("tensor<4f32>", 9, "expected 'x' in dimension list"),
    ("tensor<4x>", 10, "expected non-function type"),
    ("tensor<-1xf32>", 8, "expected non-function type"),
    ("tensor<99999999999999999999xf32>", 8, "invalid dimension"),
    ("tensor<9223372036854775808xf32>", 8, "invalid dimension"),
    ("tensor<*f32>", 9, "expected 'x' in dimension list"),
    ("tensor<4xnone>", 10, "invalid tensor element type"),
    ("tensor<4x(i8)->i8>", 10, "invalid tensor element type"),
    ("tensor<4x?>", 11, "expected 'x' in dimension list"),
    ("vector<4x!quant.uniform<i8:f32, 0.5>>", 1, "failed to verify 'elementType': VectorElementTypeInterface instance"),
    ("vector<0xf32>", 1, "vector types must have positive constant sizes but got 0"),
    ("vector<?xf32>", 8, "expected non-function type"),
    ("memref<4x!quant.uniform<i8:f32, 0.5>>", 10, "invalid memref element type"),
    ("(i8) -> (i8) -> i8", 14, "found trailing characters: '-> i8'"),
    ("i16777216", 1, "integer bitwidth is limited to 16777215 bits"),
    ("complex<index>", 9, "invalid element type for complex"),
    ("foo", 1, "expected non-function type"),
    ("!quant", 6, "undefined symbol alias id 'quant'"),
    ("", 1, "expected non-function type"),
])
def test_builtin_parse_errors(text, col, message):
    with pytest.raises(ParseError) as info:
        parse_type(text)
    assert (info.value.message, info.value.loc.col) == (message, col)


@pytest.mark.parametrize("text,canonical", [
    ("tensor<4 x f32>", "tensor<4xf32>"), ("tensor<0x10xf32>", "tensor<0x10xf32>"),
    ("tensor<9223372036854775807xf32>", "tensor<9223372036854775807xf32>"),
    ("tensor<4xcomplex<f32>>", "tensor<4xcomplex<f32>>"), ("i0", "i0"), ("si0", "si0"),
    ("i16777215", "i16777215"), ("  f32  ", "f32"), ("tensor<2x?x4xf32>", "tensor<2x?x4xf32>"),
    ("memref<?x4xf32, 1>", "memref<?x4xf32, 1>"),
])
def test_builtin_canonical_forms(text, canonical):
    assert str(parse_type(text)) == canonical


@pytest.mark.parametrize("name", FLOAT_TYPE_NAMES)
def test_every_float_keyword_parses(name):
    assert parse_type(name) == FloatType(name)


@pytest.mark.parametrize("name", FLOAT_TYPE_NAMES)
def test_cached_float_limits_are_the_exact_limits_rounded(name):
    """max_finite/min_denormal are computed once per format; every instance gets the same doubles."""
    def to_double(q: Fraction) -> float:
        try:
            return float(q)
        except OverflowError:
            return math.inf

    t, again = FloatType(name), FloatType(name)
    for _ in range(2):
        assert t.max_finite == again.max_finite == to_double(t.exact_max_finite)
        assert t.min_denormal == again.min_denormal == to_double(t.exact_min_denormal)
        assert type(t.max_finite) is float and type(t.min_denormal) is float
