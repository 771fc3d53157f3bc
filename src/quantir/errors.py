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


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "'": "\\'", "\\": "\\\\"}


def quote_name(name: "str | bytes") -> str:
    """``name`` in single quotes, safe to echo on one line of a terminal or a log.

    Names come from model files, so they may hold newlines, escape sequences or bytes that
    are not UTF-8; echoed raw, a tensor named ``"x\\nquantir check: 0 violations"`` would
    forge a line of output. Printable characters stay as they are; ``'``, ``\\``, control
    and other non-printable characters are escaped as Python escapes them (``\\n``,
    ``\\x1b``, ``\\u200b``); bytes that are not UTF-8 show as ``\\xNN``.

    >>> quote_name("conv1/weight"), quote_name("a\\nb"), quote_name(b"x\\xff")
    ("'conv1/weight'", "'a\\\\nb'", "'x\\\\xff'")
    """
    if isinstance(name, (bytes, bytearray)):
        name = bytes(name).decode("utf-8", "surrogateescape")
    out = []
    for c in str(name):
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif "\udc80" <= c <= "\udcff":      # an undecodable byte kept by surrogateescape
            out.append(f"\\x{ord(c) - 0xdc00:02x}")
        elif c.isprintable():
            out.append(c)
        else:
            out.append(repr(c)[1:-1])
    return "'" + "".join(out) + "'"


class OutputError(QuantirError):
    """An output that cannot or must not be written: it is an input, a directory, under a missing
    or read-only directory; or the write failed (disk full, permission denied)."""


class QuantizationWarning(UserWarning):
    """A quantization that succeeded on data or weights that make it unsound: degenerate calibration
    samples, constant activations, weights that quantize to zeros. Names the tensors and what to give
    instead; kept on ``Result.warnings`` too."""


class ResourceError(QuantirError):
    """A tensor or scratch buffer larger than the configured limit: names what was being made,
    the shape and bytes requested and the limit, so that a hostile or careless file cannot
    make quantir allocate without bound."""
