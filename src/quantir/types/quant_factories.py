"""Keyword factories for quantized types, taking MLIR spellings.

They check exactly what MLIR checks when it parses the same type and raise
:class:`~quantir.errors.VerifyError` with MLIR's message::

    >>> str(uniform(storage="u8", expressed="f32", scale=0.5, zero_point=10))
    '!quant.uniform<u8:f32, 5.000000e-01:10>'
    >>> uniform(storage="i8", expressed="f32", scale=0.0)
    Traceback (most recent call last):
    ...
    quantir.errors.VerifyError: scale 0.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]

``storage`` is a spelling (``"i8"``, ``"u8"``, ``"si4"``, ``"ui8"``, ``"f8E4M3FN"``) or an
IntegerType/FloatType; ``expressed`` a float type name or FloatType; ``storage_range`` an
optional ``(min, max)``.
"""
from __future__ import annotations

from ..errors import ParseError, VerifyError
from .builtin import FloatType, IntegerType, Type
from .lexer import Lexer, Source, Tok
from .quant import (
    AnyQuantizedType, CalibratedQuantizedType, UniformQuantizedPerAxisType,
    UniformQuantizedSubChannelType, UniformQuantizedType,
)

__all__ = ["uniform", "uniform_per_axis", "uniform_sub_channel", "any_quantized", "calibrated",
           "storage_type_from_spelling"]


def storage_type_from_spelling(storage) -> tuple[Type, bool]:
    """``"u8"`` -> (i8, False); ``"si8"`` -> (si8, True); a Type -> (type, its signedness)."""
    if isinstance(storage, IntegerType):
        return storage, storage.signedness != "unsigned"
    if isinstance(storage, Type):
        return storage, True
    if not isinstance(storage, str):
        raise VerifyError(f"expected a storage type spelling such as 'i8', got {storage!r}")
    from .parser import TypeParser
    from .quant_parser import parse_storage_type

    p = TypeParser(Lexer(Source(storage, "<storage>")))
    try:
        result = parse_storage_type(p)
        if p.tok.kind is not Tok.EOF:
            raise VerifyError(f"invalid storage type spelling {storage!r}")
    except ParseError as e:
        raise VerifyError(e.message) from None
    return result


def _expressed(expressed) -> FloatType | None:
    if expressed is None or isinstance(expressed, FloatType):
        return expressed
    if isinstance(expressed, str):
        try:
            return FloatType(expressed)
        except VerifyError:
            pass
    raise VerifyError("invalid kind of type specified")


def _storage_kwargs(storage, storage_range) -> dict:
    st, signed = storage_type_from_spelling(storage)
    kw = dict(storage_type=st, is_signed=signed)
    if storage_range is not None:
        kw["storage_min"], kw["storage_max"] = storage_range
    return kw


def uniform(storage="i8", expressed="f32", scale: float = 1.0, zero_point: int = 0,
            storage_range: tuple[int, int] | None = None) -> UniformQuantizedType:
    """Per-layer ``!quant.uniform<storage:expressed, scale:zero_point>``."""
    return UniformQuantizedType(expressed_type=_expressed(expressed), scale=scale,
                                zero_point=zero_point, **_storage_kwargs(storage, storage_range))


def uniform_per_axis(storage="i8", expressed="f32", axis: int = 0, scales=(), zero_points=None,
                     storage_range: tuple[int, int] | None = None) -> UniformQuantizedPerAxisType:
    """Per-axis ``!quant.uniform<storage:expressed:axis, {s:z,...}>``; zero points default to 0."""
    return UniformQuantizedPerAxisType(
        expressed_type=_expressed(expressed), scales=scales, zero_points=zero_points,
        quantized_dimension=axis, **_storage_kwargs(storage, storage_range))


def uniform_sub_channel(storage="i8", expressed="f32", block_sizes=(), scales=(), zero_points=None,
                        storage_range: tuple[int, int] | None = None) -> UniformQuantizedSubChannelType:
    """Block-wise ``!quant.uniform<storage:expressed:{d:b,...}, {{...}}>``.

    ``block_sizes`` is a sequence of ``(dimension, block_size)`` or a dict; ``scales`` and
    ``zero_points`` are nested sequences or numpy arrays of the same shape.
    """
    if isinstance(block_sizes, dict):
        block_sizes = tuple(block_sizes.items())
    return UniformQuantizedSubChannelType(
        expressed_type=_expressed(expressed), scales=scales, zero_points=zero_points,
        block_sizes=tuple(tuple(b) for b in block_sizes), **_storage_kwargs(storage, storage_range))


def any_quantized(storage="i8", expressed=None,
                  storage_range: tuple[int, int] | None = None) -> AnyQuantizedType:
    """``!quant.any<storage[:expressed]>``."""
    return AnyQuantizedType(expressed_type=_expressed(expressed), **_storage_kwargs(storage, storage_range))


def calibrated(expressed="f32", min: float = 0.0, max: float = 0.0) -> CalibratedQuantizedType:  # noqa: A002
    """``!quant.calibrated<expressed<min:max>>``; requires ``min < max``."""
    et = _expressed(expressed)
    if et is None:
        raise VerifyError("invalid kind of type specified")
    return CalibratedQuantizedType(expressed_type=et, min=min, max=max)
