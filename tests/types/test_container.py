"""check_quantized_container (spec §8) and the storage/expressed casts."""
from __future__ import annotations

import pytest

from quantir.types import (
    TensorType, VectorType, check_quantized_container, f32, i8, parse_type, quantized_element_type,
    to_expressed_type, to_storage_type, uniform, uniform_per_axis,
)

CASES = [
    # per-axis
    ("!quant.uniform<i8:f32:0, {1.0}>", "scalar types may not use per-axis quantization"),
    ("tensor<*x!quant.uniform<i8:f32:3, {1.0,2.0}>>", None),
    ("tensor<2x!quant.uniform<i8:f32:1, {1.0,2.0}>>", "quantized dimension must be less than tensor rank"),
    ("tensor<!quant.uniform<i8:f32:0, {1.0}>>", "quantized dimension must be less than tensor rank"),
    ("tensor<2x3x!quant.uniform<i8:f32:1, {1.0,2.0}>>", "quantized dimension size does not match number of scales"),
    ("tensor<2x?x!quant.uniform<i8:f32:1, {1.0,2.0}>>", None),
    ("tensor<2x2x!quant.uniform<i8:f32:1, {1.0,2.0}>>", None),
    # sub-channel, in the verifier's order
    ("!quant.uniform<i8:f32:{0:1}, {1.0}>", "scalar types may not use sub-channel quantization"),
    ("tensor<*x!quant.uniform<i8:f32:{0:1}, {1.0}>>",
     "tensor containing the sub-channel quantized type must be ranked"),
    ("tensor<4x!quant.uniform<i8:f32:{1:2}, {{1.0}}>>", "quantized dimension 1 must be less than tensor rank 1"),
    ("tensor<5x!quant.uniform<i8:f32:{0:2}, {1.0,2.0}>>",
     "tensor dimension size 5 at axis 0 must be divisible by the corresponding block size 2"),
    ("tensor<0x4x!quant.uniform<i8:f32:{1:2}, {{1.0,2.0}}>>",
     "tensor dimension size of zero is not allowed with sub-channel quantization"),
    ("tensor<4x4x!quant.uniform<i8:f32:{0:2}, {1.0,2.0}>>", "Rank of scales 1 must match the rank of the tensor 2"),
    ("tensor<4x4x!quant.uniform<i8:f32:{0:2}, {{1.0},{2.0},{3.0}}>>",
     "dimension size 2 of scales tensor at axis 0 should match (tensor dimension at axis / block sizes at axis) = 2"),
    ("tensor<4x4x!quant.uniform<i8:f32:{0:2}, {{1.0,2.0},{3.0,4.0}}>>",
     "dimension size 1 of scales tensor at axis 1 should match (tensor dimension at axis / block sizes at axis) = 1"),
    ("tensor<4x6x!quant.uniform<i8:f32:{0:2,1:3}, {{1.0,2.0},{3.0,4.0}}>>", None),
    ("tensor<?x6x!quant.uniform<i8:f32:{0:2,1:3}, {{1.0,2.0},{3.0,4.0}}>>", None),
    ("tensor<4x6x!quant.uniform<i8:f32:{0:4,0:2}, {{1.0},{2.0}}>>", None),  # the last block size wins
    ("tensor<4x6x!quant.uniform<i8:f32:{}, {{1.0}}>>", None),
    # others are unconstrained
    ("tensor<4x!quant.uniform<i8:f32, 1.0>>", None),
    ("!quant.uniform<i8:f32, 1.0>", None),
    ("tensor<4xf32>", None),
]


@pytest.mark.parametrize("text,message", CASES)
def test_check_quantized_container(text, message):
    assert check_quantized_container(parse_type(text)) == message


def test_explicit_quantized_type_for_qcast_inputs():
    per_axis = uniform_per_axis("i8", "f32", axis=1, scales=[1.0, 2.0])
    assert check_quantized_container(TensorType((2, 3), f32), per_axis) == \
        "quantized dimension size does not match number of scales"
    assert check_quantized_container(f32, per_axis) == "scalar types may not use per-axis quantization"
    assert check_quantized_container(TensorType((2, 2), f32), per_axis) is None


def test_casts():
    q = uniform("u8", "f32", scale=0.5)
    assert to_storage_type(q) == i8 and to_expressed_type(q) == f32
    assert to_storage_type(TensorType((4, None), q)) == TensorType((4, None), i8)
    assert to_expressed_type(TensorType(None, q)) == TensorType(None, f32)
    assert to_storage_type(VectorType((4,), f32)) is None and to_storage_type(f32) is None
    assert to_expressed_type(parse_type("!quant.any<i8>")) is None
    assert quantized_element_type(TensorType((2,), q)) == q and quantized_element_type(i8) is None
