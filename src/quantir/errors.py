"""Typed errors. Every error says what was expected, what was found, and where.

Diagnostics read like MLIR's: ``FILE:LINE:COL: error: MESSAGE``. A location is optional
because errors raised by the Python API (not by parsing text) may have none.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A point in a source file; line and column count from 1, as MLIR does."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class QuantirError(Exception):
    """Base of every error quantir raises on purpose."""

    def __init__(self, message: str, loc: Location | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc

    def __str__(self) -> str:
        return f"{self.loc}: error: {self.message}" if self.loc else self.message


class ParseError(QuantirError):
    """Malformed text: IR, types, or a model file."""


class VerifyError(QuantirError):
    """Well-formed text or objects that break an invariant (a verifier rule)."""


class UnsupportedOpError(QuantirError):
    """An operator quantir cannot import or execute. Names the op, the node and the file."""


class ShapeError(QuantirError):
    """Shapes that do not fit: wrong feed shape, incompatible operands."""


class CalibrationError(QuantirError):
    """Calibration data that cannot give sound parameters: empty, NaN/Inf, wrong feeds."""


class ModelFormatError(ParseError):
    """A model file (ONNX, TFLite) that is truncated, corrupt or not of the expected format."""


class OutputError(QuantirError):
    """An output that cannot or must not be written: it is an input, a directory, under a missing
    or read-only directory; or the write failed (disk full, permission denied)."""
