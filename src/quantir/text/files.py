"""Reading IR text from a file: one path for ``quantir opt``, ``show``, ``run``, ``check`` and
``quantir.load``, so each says the same one line for the same file.

The bytes are decoded as UTF-8 with ``surrogateescape``, as ``mlir-opt`` reads bytes: a byte
that is not UTF-8 inside a string literal is data (printed back as ``\\FF``), anywhere else the
lexer reports it at its ``line:col``. A file that is missing, a directory or unreadable is a
``ParseError`` naming the file.
"""
from __future__ import annotations

import os
import sys

from ..errors import ParseError

__all__ = ["read_ir_file", "decode_ir_bytes"]


def decode_ir_bytes(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def read_ir_file(path: str | os.PathLike) -> str:
    """The text of an IR file (``"-"``: standard input)."""
    name = os.fspath(path)
    if name == "-":
        stream = getattr(sys.stdin, "buffer", None)
        return decode_ir_bytes(stream.read()) if stream is not None else sys.stdin.read()
    try:
        with open(name, "rb") as f:
            return decode_ir_bytes(f.read())
    except FileNotFoundError:
        raise ParseError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ParseError(f"{name}: is a directory, not IR text") from None
    except OSError as e:
        raise ParseError(f"{name}: cannot read the IR text: {e.strerror or e}") from None
