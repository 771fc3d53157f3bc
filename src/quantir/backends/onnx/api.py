"""The ONNX backend's entry points for any module: ``to_onnx``, ``save_onnx`` and ``export``
(the package docstring says what is exported), with the opset and IR version choices.

The quantized export (``quantized.py``) builds on these; the package re-exports both.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import onnx

from ...errors import UnsupportedOpError
from ...fileio import check_output
from ...ir import Function, Module, Value
from .exporter import Exported, export as _export, write_model

__all__ = ["to_onnx", "save_onnx", "export", "Exported", "DEFAULT_OPSET", "DEFAULT_IR_VERSION", "MIN_OPSET",
           "MAX_OPSET", "ir_version_for"]

DEFAULT_OPSET = 21
DEFAULT_IR_VERSION = 10
MIN_OPSET = 13
MAX_OPSET = onnx.defs.onnx_opset_version()


def ir_version_for(opset: int) -> int:
    """The IR version of the first ONNX release with ``opset`` (10 for the default opset 21)."""
    for _release, ir, default_opset, *_ in onnx.helper.VERSION_TABLE:
        if default_opset >= opset:
            return ir
    return onnx.IR_VERSION


def _check_opset(opset: int | None) -> int:
    opset = DEFAULT_OPSET if opset is None else int(opset)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UnsupportedOpError(f"cannot export at opset {opset}: quantir exports opsets {MIN_OPSET} to {MAX_OPSET} "
                                 f"(the installed onnx {onnx.__version__} knows up to {MAX_OPSET})")
    return opset


def export(module: Module | Function, *, opset: int | None = None,
           extra_outputs: Sequence[Value] = ()) -> Exported:
    """The model plus the ONNX name of every value; ``extra_outputs`` are values of the
    function to add as graph outputs after the function's own (the ORT executor's
    ``expose``)."""
    opset = _check_opset(opset)
    return _export(module, opset=opset, ir_version=ir_version_for(opset), extra_outputs=extra_outputs)


def to_onnx(module: Module | Function, *, opset: int | None = None) -> onnx.ModelProto:
    """``module``'s main function as an ONNX model (see the module docstring).

    Raises ``UnsupportedOpError`` for an op, attribute or element type without an ONNX form
    at ``opset`` (default 21), and ``VerifyError`` for clashing input/output names.
    """
    return export(module, opset=opset).model


def save_onnx(module: Module | Function, path: "str | os.PathLike", *, opset: int | None = None) -> Path:
    """Export and write ``path`` atomically: a temporary file in the same directory, then
    ``os.replace``, so ``path`` is either the old file or the complete new one.

    Models over 2 GB (protobuf's limit) are refused with a ``QuantirError``.
    """
    path = Path(path)
    check_output(path)  # a missing directory or a read-only one fails before the export, not after
    write_model(to_onnx(module, opset=opset), path)
    return path
