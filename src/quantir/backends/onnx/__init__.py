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

from .api import (DEFAULT_IR_VERSION, DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, Exported, export, ir_version_for,
                  save_onnx, to_onnx)
from .quantized import save_quantized, to_onnx_quantized

__all__ = ["to_onnx", "save_onnx", "export", "Exported", "DEFAULT_OPSET", "DEFAULT_IR_VERSION", "MIN_OPSET",
           "MAX_OPSET", "ir_version_for", "to_onnx_quantized", "save_quantized"]
