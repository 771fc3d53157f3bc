"""Quantized types inside containers: the quant ops' integrity checks and storage casts.

:func:`check_quantized_container` is the part of the ``quant.qcast``/``dcast``/``scast``
verifiers that looks at the container shape (docs/mlir-quant-spec.md §8,
``verifyPerAxisQuantization``/``verifySubChannelQuantization`` in
``mlir/lib/Dialect/Quant/IR/QuantOps.cpp``). The op verifiers call it on their *input*
type after the shape-compatibility and type checks.
"""
from __future__ import annotations

from .builtin import ShapedType, TensorType, Type, VectorType
from .quant import QuantizedType, UniformQuantizedPerAxisType, UniformQuantizedSubChannelType

__all__ = ["check_quantized_container", "element_type_of", "quantized_element_type",
           "to_storage_type", "to_expressed_type"]


def element_type_of(t: Type) -> Type:
    """The element type of a shaped type, or ``t`` itself."""
    return t.element_type if isinstance(t, ShapedType) else t


def quantized_element_type(t: Type) -> QuantizedType | None:
    """The quantized (element) type of a scalar or container, else None."""
    e = element_type_of(t)
    return e if isinstance(e, QuantizedType) else None


def check_quantized_container(container: Type, quantized_type: QuantizedType | None = None) -> str | None:
    """MLIR's message if ``container`` cannot hold ``quantized_type``, else None.

    ``quantized_type`` defaults to the container's own element type (pass it explicitly for
    ``quant.qcast``, whose input holds floats while the result type carries the
    quantization). Only per-axis and sub-channel types are constrained:

    >>> from quantir.types import parse_type
    >>> check_quantized_container(parse_type("tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0}>>"))
    'quantized dimension size does not match number of scales'
    """
    q = quantized_element_type(container) if quantized_type is None else quantized_type
    if isinstance(q, UniformQuantizedPerAxisType):
        return _check_per_axis(container, q)
    if isinstance(q, UniformQuantizedSubChannelType):
        return _check_sub_channel(container, q)
    return None


def _check_per_axis(container: Type, q: UniformQuantizedPerAxisType) -> str | None:
    if not isinstance(container, TensorType):
        return "scalar types may not use per-axis quantization"
    if not container.is_ranked:
        return None
    axis = q.quantized_dimension
    if axis >= container.rank:
        return "quantized dimension must be less than tensor rank"
    size = container.shape[axis]
    if size is not None and size != len(q.scales):
        return "quantized dimension size does not match number of scales"
    return None


def _check_sub_channel(container: Type, q: UniformQuantizedSubChannelType) -> str | None:
    if not isinstance(container, TensorType):
        return "scalar types may not use sub-channel quantization"
    if not container.is_ranked:
        return "tensor containing the sub-channel quantized type must be ranked"
    shape, rank = container.shape, container.rank
    block_of = list(shape)  # a dim without a block size is one block: one scale along it
    for d, b in q.block_sizes:
        if d >= rank:
            return f"quantized dimension {d} must be less than tensor rank {rank}"
        if shape[d] is not None and shape[d] % b:
            return (f"tensor dimension size {shape[d]} at axis {d} must be divisible by the "
                    f"corresponding block size {b}")
        block_of[d] = b
    if any(s == 0 for s in shape):
        return "tensor dimension size of zero is not allowed with sub-channel quantization"
    if len(q.shape) != rank:
        return f"Rank of scales {len(q.shape)} must match the rank of the tensor {rank}"
    for i, (size, block) in enumerate(zip(shape, block_of)):
        if size is None or block is None:
            continue
        expected = size // block
        if expected != q.shape[i]:
            return (f"dimension size {expected} of scales tensor at axis {i} should match "
                    f"(tensor dimension at axis / block sizes at axis) = {expected}")
    return None


def _swap_element(t: Type, new_element: Type) -> Type:
    if isinstance(t, (TensorType, VectorType)):
        return t.clone(element_type=new_element)
    return new_element


def to_storage_type(t: Type) -> Type | None:
    """``QuantizedType::castToStorageType``: quant scalar/tensor/vector -> its storage twin.

    ``!quant.uniform<u8:f32, 1.0>`` and ``tensor<4x!quant...>`` give ``i8`` and
    ``tensor<4xi8>`` (the signless storage); None when ``t`` holds no quantized type.
    """
    q = quantized_element_type(t)
    if q is None or not isinstance(t, (QuantizedType, TensorType, VectorType)):
        return None
    return _swap_element(t, q.storage_type)


def to_expressed_type(t: Type) -> Type | None:
    """``QuantizedType::castToExpressedType``: quant scalar/tensor/vector -> float twin."""
    q = quantized_element_type(t)
    if q is None or q.expressed_type is None or not isinstance(t, (QuantizedType, TensorType, VectorType)):
        return None
    return _swap_element(t, q.expressed_type)
