"""The programmatic API of quantized types: factories, fields, properties, errors."""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from quantir.errors import VerifyError
from quantir.types import (
    AnyQuantizedType, CalibratedQuantizedType, FloatType, IntegerType, NoneType, QuantizedType,
    UniformQuantizedPerAxisType, UniformQuantizedSubChannelType, UniformQuantizedType,
    any_quantized, calibrated, f16, f32, i8, parse_type, storage_type_from_spelling, uniform,
    uniform_per_axis, uniform_sub_channel,
)


def test_uniform_factory_matches_parsed_type():
    t = uniform(storage="i8", expressed="f32", scale=0.05, zero_point=-3)
    assert t == parse_type("!quant.uniform<i8:f32, 0.05:-3>")
    assert hash(t) == hash(parse_type("!quant<uniform<i8:f32, 5.000000e-02:-3>>"))
    assert isinstance(t, QuantizedType) and isinstance(t, UniformQuantizedType)
    assert (t.scale, t.zero_point, t.expressed_type, t.is_signed) == (0.05, -3, f32, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.scale = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("spelling,storage,signed,lo,hi,dtype", [
    ("i8", IntegerType(8), True, -128, 127, np.int8),
    ("u8", IntegerType(8), False, 0, 255, np.uint8),
    ("si8", IntegerType(8, "signed"), True, -128, 127, np.int8),
    ("ui8", IntegerType(8, "unsigned"), False, 0, 255, np.uint8),
    ("i4", IntegerType(4), True, -8, 7, np.int8),
    ("u12", IntegerType(12), False, 0, 4095, np.uint16),
    ("i16", IntegerType(16), True, -32768, 32767, np.int16),
    ("i32", IntegerType(32), True, -(2**31), 2**31 - 1, np.int32),
    ("u32", IntegerType(32), False, 0, 2**32 - 1, np.uint32),
    ("i1", IntegerType(1), True, -1, 0, np.int8),
    ("f8E4M3FN", FloatType("f8E4M3FN"), True, -448, 448, None),
    ("f8E5M2", FloatType("f8E5M2"), True, -57344, 57344, None),
    ("f4E2M1FN", FloatType("f4E2M1FN"), True, -6, 6, None),
])
def test_storage_properties(spelling, storage, signed, lo, hi, dtype):
    t = uniform(spelling, "f32", scale=1.0)
    assert (t.storage_type, t.is_signed) == (storage, signed)
    assert (t.default_storage_min, t.default_storage_max) == (lo, hi)
    assert (t.storage_min, t.storage_max, t.has_default_storage_range) == (lo, hi, True)
    assert t.storage_numpy_dtype == (None if dtype is None else np.dtype(dtype))
    assert t.storage_width == storage.bitwidth
    assert str(t) == f"!quant.uniform<{spelling}:f32, 1.000000e+00>"
    assert storage_type_from_spelling(spelling) == (storage, signed)


def test_storage_range_and_keyword_constructor():
    t = uniform("i8", "f32", scale=0.5, storage_range=(-127, 127))
    assert (t.storage_min, t.storage_max, t.has_default_storage_range) == (-127, 127, False)
    assert str(t) == "!quant.uniform<i8<-127:127>:f32, 5.000000e-01>"
    direct = UniformQuantizedType(storage_type=i8, expressed_type=f32, scale=0.5, storage_min=-127)
    assert direct == t
    assert UniformQuantizedType(storage_type=i8, is_signed=False, expressed_type=f32, scale=1.0) == \
        uniform("u8", "f32", scale=1.0)


@pytest.mark.parametrize("kwargs,message", [
    (dict(storage="i33"), "illegal storage type size: 33"),
    (dict(storage="i0"), "illegal storage type size: 0"),
    (dict(storage="u"), "expected storage type width"),
    (dict(storage="int8"), "illegal storage type prefix"),
    (dict(storage="f16"), "illegal storage type prefix"),
    (dict(storage="i8", storage_range=(-129, 127)), "illegal storage type minimum: -129"),
    (dict(storage="i8", storage_range=(-128, 128)), "illegal storage type maximum: 128"),
    (dict(storage="i8", storage_range=(5, 5)), "illegal storage min and storage max: (5:5)"),
    (dict(expressed="i8"), "invalid kind of type specified"),
    (dict(expressed=i8), "invalid kind of type specified"),
    (dict(scale=0.0), "scale 0.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]"),
    (dict(scale=-1.0), "scale -1.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]"),
    (dict(scale=math.inf), "scale INF out of expressed type range [1.401298e-45, 3.402823e+38]"),
    (dict(expressed="f16", scale=1e5), "scale 1.000000e+05 out of expressed type range [5.960464e-08, 6.550400e+04]"),
    (dict(zero_point=2**63), "integer value too large"),
])
def test_uniform_factory_errors(kwargs, message):
    args = dict(storage="i8", expressed="f32", scale=1.0) | kwargs
    with pytest.raises(VerifyError) as info:
        uniform(**args)
    assert info.value.message == message


def test_nan_scale_is_accepted_and_equal_to_itself():
    t = uniform("i8", "f32", scale=math.nan)
    assert str(t) == "!quant.uniform<i8:f32, 0x7FF8000000000000>"
    assert t == uniform("i8", "f32", scale=math.nan) and t == parse_type(str(t))


def test_signedness_must_agree_with_explicit_integer_types():
    with pytest.raises(VerifyError, match="unsigned"):
        UniformQuantizedType(storage_type=IntegerType(8, "unsigned"), is_signed=True, expressed_type=f32, scale=1.0)
    with pytest.raises(VerifyError):
        UniformQuantizedType(storage_type=NoneType(), expressed_type=f32, scale=1.0)
    with pytest.raises(VerifyError, match="requires expressed type"):
        UniformQuantizedType(storage_type=i8, scale=1.0)


def test_per_axis():
    t = uniform_per_axis("u8", "f32", axis=1, scales=[0.5, 0.25], zero_points=[10, 0])
    assert str(t) == "!quant.uniform<u8:f32:1, {5.000000e-01:10,2.500000e-01}>"
    assert t == parse_type(str(t)) and isinstance(t, UniformQuantizedPerAxisType)
    assert t.scales == (0.5, 0.25) and t.zero_points == (10, 0) and t.quantized_dimension == 1
    np.testing.assert_array_equal(t.scales_array(), [0.5, 0.25])
    assert t.zero_points_array().dtype == np.int64 and t.num_channels == 2
    n = uniform_per_axis("i8", "f32", axis=0, scales=np.array([1.0, 2.0], np.float32))
    assert n.zero_points == (0, 0) and n.scales == (1.0, 2.0)


@pytest.mark.parametrize("kwargs,message", [
    (dict(axis=-1), "illegal quantized dimension: -1"),
    (dict(axis=2**31), "integer value too large"),
    (dict(zero_points=[1]), "illegal number of scales and zeroPoints: 2, 1"),
    (dict(scales=[1.0, 0.0], zero_points=None), "scale 0.000000e+00 out of expressed type range"),
    (dict(scales=[], zero_points=None), "per-axis quantization needs at least one scale"),
])
def test_per_axis_errors(kwargs, message):
    args = dict(storage="i8", expressed="f32", axis=0, scales=[1.0, 2.0], zero_points=[0, 0]) | kwargs
    with pytest.raises(VerifyError, match=re.escape(message)):
        uniform_per_axis(**args)


def test_sub_channel():
    t = uniform_sub_channel("u8", "f16", block_sizes=[(0, 2), (1, 3)],
                            scales=[[1.0, 0.1], [3.0, 4.0]], zero_points=[[255, 0], [1, 300]])
    assert t.shape == (2, 2) and t.block_sizes == ((0, 2), (1, 3)) and t.quantized_dimensions == (0, 1)
    assert t.zero_points == (-1, 0, 1, 44)  # wrapped to 8 bits, read back signed
    assert t.scales[1] == float(np.float16(0.1))  # rounded to the expressed type
    assert str(t) == ("!quant.uniform<u8:f16:{0:2, 1:3}, {{1.000000e+00:-1, 9.997550e-02}, "
                      "{3.000000e+00:1, 4.000000e+00:44}}>")
    assert t == parse_type(str(t))
    np.testing.assert_array_equal(t.zero_points_array(), [[-1, 0], [1, 44]])
    assert t.scales_array().shape == (2, 2)
    same = uniform_sub_channel("u8", "f16", block_sizes={0: 2, 1: 3}, scales=t.scales_array(),
                               zero_points=np.array([[255, 0], [1, 300]]))
    assert same == t and isinstance(same, UniformQuantizedSubChannelType)
    flat = UniformQuantizedSubChannelType(storage_type=i8, is_signed=False, expressed_type=f16,
                                          scales=t.scales, zero_points=t.zero_points,
                                          block_sizes=t.block_sizes, shape=(2, 2))
    assert flat == t


@pytest.mark.parametrize("kwargs,message", [
    (dict(block_sizes=[(0, 0)]), "illegal block size: 0"),
    (dict(block_sizes=[(-1, 2)]), "illegal quantized dimension: -1"),
    (dict(scales=[[1.0], [2.0, 3.0]]), "tensor literal is invalid; ranks are not consistent between elements"),
    (dict(zero_points=[1, 2]), "does not match"),
    (dict(scales=[[0.0]], zero_points=None), "scale 0.000000e+00 out of expressed type range"),
])
def test_sub_channel_errors(kwargs, message):
    args = dict(storage="i8", expressed="f32", block_sizes=[(0, 1)], scales=[[1.0]], zero_points=[[0]]) | kwargs
    with pytest.raises(VerifyError, match=re.escape(message)):
        uniform_sub_channel(**args)


def test_any_and_calibrated():
    a = any_quantized("u8", storage_range=(1, 255))
    assert str(a) == "!quant.any<u8<1:255>>" and a.expressed_type is None and isinstance(a, AnyQuantizedType)
    assert str(any_quantized("i8", "f16")) == "!quant.any<i8:f16>" and any_quantized("i8", f16).expressed_type == f16
    c = calibrated("f32", -1.0, 1.0)
    assert str(c) == "!quant.calibrated<f32<-1.000000e+00:1.000000e+00>>" and c == parse_type(str(c))
    assert isinstance(c, QuantizedType) and isinstance(c, CalibratedQuantizedType)
    assert (c.min, c.max, c.storage_type) == (-1.0, 1.0, NoneType())
    with pytest.raises(VerifyError, match=r"illegal min and max: \(1.000000e\+00:1.000000e\+00\)"):
        calibrated("f32", 1.0, 1.0)
    with pytest.raises(VerifyError, match="invalid kind of type specified"):
        calibrated("i8", 0.0, 1.0)


def test_types_work_as_dict_keys():
    d = {uniform("i8", "f32", scale=0.5): "a", parse_type("tensor<2x!quant.any<i8>>"): "b"}
    assert d[parse_type("!quant.uniform<i8:f32, 0.5>")] == "a"
    assert d[parse_type("tensor<2x!quant<any<i8>>>")] == "b"


@pytest.mark.parametrize("scales,zero_points,message", [
    ([1.0] * 500 + [1e-50] + [2.0] * 499, None, "scale 1.000000e-50 out of expressed type range"),
    ([math.nan, 1e-50, 1.0], None, "scale 1.000000e-50 out of expressed type range"),  # NaN first: min() is NaN
    ([1.0, math.nan, 1e39], None, "scale 1.000000e+39 out of expressed type range"),
    ([math.nan, 1e39], None, "scale 1.000000e+39 out of expressed type range"),
    ([1.0, 1e-50, "x"], None, "scale 1.000000e-50 out of expressed type range"),  # the first bad one
    ([1.0, "x", 1e-50], None, "expected a float scale, got 'x'"),
    ([1.0, True], None, "expected a float scale, got True"),
    ([1.0, 2.0], [0, 2**63], "integer value too large"),
    ([1.0, 2.0], [0, True], "expected an integer, got True"),
    ([1.0, 2.0], [0.0, 1], "expected an integer, got 0.0"),
])
def test_per_axis_checks_every_channel_in_order(scales, zero_points, message):
    """Many channels are checked as a whole when they are plain in-range numbers; otherwise channel
    by channel, so the first bad one is reported, as before."""
    with pytest.raises(VerifyError, match=re.escape(message)):
        UniformQuantizedPerAxisType(storage_type=i8, expressed_type=f32, scales=scales,
                                    zero_points=zero_points, quantized_dimension=0)


def test_per_axis_normalises_numpy_scalars_and_keeps_nan():
    t = UniformQuantizedPerAxisType(storage_type=i8, expressed_type=f32, quantized_dimension=0,
                                    scales=[np.float64(0.5), 0.25, math.nan, np.float32(2.0)],
                                    zero_points=[np.int64(3), 0, -1, np.int8(5)])
    assert [type(s) for s in t.scales] == [float] * 4 and [type(z) for z in t.zero_points] == [int] * 4
    assert t.scales[:2] == (0.5, 0.25) and math.isnan(t.scales[2]) and t.zero_points == (3, 0, -1, 5)
    many = UniformQuantizedPerAxisType(storage_type=i8, expressed_type=f32, quantized_dimension=0,
                                       scales=[2.0**-149, 3.4028234663852886e38] * 300,
                                       zero_points=[-(2**63), 2**63 - 1] * 300)
    assert many.num_channels == 600 and many.scales[:2] == (2.0**-149, 3.4028234663852886e38)
