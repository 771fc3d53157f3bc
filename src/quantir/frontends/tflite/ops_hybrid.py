"""Converters for LiteRT's dynamic-range ("hybrid") operators: a float32 activation, int8 constant
weights with their scales, a float32 result (the importer picks these when ``Importer.is_hybrid``)."""
from __future__ import annotations

from ...backends.tflite.schema import BuiltinOperator as OP
from .importer import Converter

__all__ = ["CONVERTERS"]

CONVERTERS: dict[OP, Converter] = {}
