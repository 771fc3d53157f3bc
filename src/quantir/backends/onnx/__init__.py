"""ONNX export: ``to_onnx(module) -> onnx.ModelProto`` and ``save_onnx(module, path)``.

>>> import numpy as np, onnx
>>> from quantir.ir import Function, Module, StringAttr, dialects
>>> from quantir.types import TensorType, f32
>>> t = TensorType((None, 4), f32)
>>> fn = Function.create("main", [t], [t], arg_attrs=[{"quantir.name": StringAttr("x")}],
...                      res_attrs=[{"quantir.name": StringAttr("y")}])
>>> y = fn.body.append(dialects.nn.RELU.build(fn.arguments)).result
>>> _ = fn.body.append(dialects.func.RETURN.build([y], []))
>>> model = to_onnx(Module([fn]))
>>> onnx.checker.check_model(model)
>>> [n.op_type for n in model.graph.node], model.graph.input[0].name, model.opset_import[0].version
(['Relu'], 'x', 21)

What is exported:

- ``nn`` ops as the ONNX ops they mirror (``ops.py``); attributes that came from ONNX
  constant inputs (Reshape's shape, Slice's bounds, Clip's min/max, Pad's pads, Resize's
  scales, Reduce axes from opset 18 ...) become initializers wired to those inputs again;
  opaque ``nn.onnx_op`` nodes as the NodeProto they carry;
- ``arith.constant`` as initializers (numpy arrays through ``numpy_helper.from_array``);
- ``quant.qcast``/``dcast`` on per-tensor and per-axis ``!quant.uniform`` types as
  QuantizeLinear/DequantizeLinear (``quant.py``; ONNX rounds half to even), ``quant.scast``
  as Identity;
- the function's arguments and results as graph inputs and outputs named by their
  ``quantir.name`` attributes (the names ``quantir.runtime.run`` uses), with their shapes;
  a dynamic dim is a ``dim_param``.

Any other op raises ``UnsupportedOpError`` naming it. Defaults: opset 21 and IR version 10
(ONNX 1.16). The installed ONNX Runtime 1.32 loads models up to IR 14 / opset 28, but has no
kernels for some of the newest op versions (QuantizeLinear/DequantizeLinear-28 are refused
when the session is created); opset 21 runs on every ONNX Runtime since 1.18 and has
everything quantir exports (blocked and 16-bit Q/DQ, Gelu, ``num_outputs`` Split, Reduce
axes as inputs). ``opset`` may be 13..28, with the IR version of the ONNX release that
introduced it; features a lower opset lacks are refused, never dropped.

Constants: large splats (all elements bitwise equal, 1024 elements or more) are
written as ConstantOfShape nodes, as exporters write weight fills, so that such a model
stays small; ONNX Runtime folds them back when it loads the model. Constants nothing uses
are left out.
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
from .quantized import save_quantized, to_onnx_quantized  # noqa: F401  (quantized.py: QDQ / QOperator)

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
