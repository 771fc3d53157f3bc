"""TFLite import: read an int8 ``.tflite`` model into quantir's integer IR.

>>> from quantir.frontends.tflite import import_tflite, load_tflite
>>> # result = import_tflite("model.tflite")      # .module, .bindings
>>> # module = load_tflite("model.tflite")        # just the module

The function ``@main`` takes and returns the subgraph's inputs and outputs in TFLite's
layout and names, so the same feeds run in LiteRT and in ``quantir.runtime.run``. Inside,
NHWC ops become NCHW ``qnn`` ops with transposes only where layouts meet (see
:mod:`.importer`). ``bindings`` map every non-constant tensor index to the IR value that
holds it and the permutation back to TFLite's layout, so every intermediate can be compared
with LiteRT's.

Supported (int8, per tensor or per axis, as LiteRT's int8 spec uses them): ``SUPPORTED_OPS``
(UNIDIRECTIONAL_SEQUENCE_LSTM in the full-integer form quantir writes, a REVERSE_V2 pair around it
as its reverse direction: :mod:`.ops_recurrent`);
operators that compute in float32 (a dynamic-range model's float part) become ``nn`` ops
(``FLOAT_OPS``, :mod:`.ops_float`). Float16/float64 tensors and other ops raise
``UnsupportedOpError``; corrupt files and
inconsistent shapes ``ModelFormatError``. Spec violations the IR can express are imported
as they are, for ``quantir check`` to report. Only the schema layer
(:mod:`quantir.backends.tflite`) is used; ``ai_edge_litert`` is never imported.
"""
from __future__ import annotations

import os
from pathlib import Path

from ...backends.tflite.model import Model
from ...backends.tflite.reader import load_model, read_model
from ...backends.tflite.schema import BuiltinOperator
from ...ir import Module
from .importer import Binding, Converter, Importer, TFLiteImport
from .ops_recurrent import CONVERTERS as _RECURRENT
from .ops_recurrent import HYBRID_CONVERTERS as _RECURRENT_HYBRID
from .ops_select import CONVERTERS as _SELECT
from .ops_shape import CONVERTERS as _SHAPE
from .ops_split import CONVERTERS as _SPLIT
from .ops_tensor import CONVERTERS as _TENSOR
from .ops_window import CONVERTERS as _WINDOW
from .ops_hybrid import CONVERTERS as _HYBRID
from .ops_float import CONVERTERS as FLOAT_CONVERTERS

__all__ = ["import_tflite", "load_tflite", "TFLiteImport", "Binding", "SUPPORTED_OPS", "FLOAT_OPS"]

CONVERTERS: dict[BuiltinOperator, Converter] = {**_WINDOW, **_TENSOR, **_SHAPE, **_SELECT, **_SPLIT, **_RECURRENT}
# dynamic-range ops; a hybrid LSTM is routed to its refusal
HYBRID_CONVERTERS: dict[BuiltinOperator, Converter] = {**_HYBRID, **_RECURRENT_HYBRID}
SUPPORTED_OPS: frozenset[BuiltinOperator] = frozenset(CONVERTERS)
FLOAT_OPS: frozenset[BuiltinOperator] = frozenset(FLOAT_CONVERTERS)


def import_tflite(source: bytes | str | os.PathLike | Model, *, subgraph: int = 0) -> TFLiteImport:
    """Import one subgraph of an int8 TFLite model (file path, bytes, or a parsed ``Model``).

    Raises ``ModelFormatError`` (corrupt or truncated file, missing constant data,
    inconsistent shapes; names the tensor) and ``UnsupportedOpError`` (float16/float64 tensors,
    ops outside ``SUPPORTED_OPS`` / ``FLOAT_OPS``; names the op and its output tensor).
    """
    if isinstance(source, Model):
        model, name = source, "<model>"
    elif isinstance(source, (bytes, bytearray, memoryview)):
        model, name = read_model(source), "<bytes>"
    else:
        model, name = load_model(source), str(Path(source))
    return Importer(model, subgraph, name, CONVERTERS, HYBRID_CONVERTERS, FLOAT_CONVERTERS).run()


def load_tflite(path: str | os.PathLike) -> Module:
    """The module of ``import_tflite(path)``."""
    return import_tflite(path).module
