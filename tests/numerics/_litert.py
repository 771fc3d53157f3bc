"""Build one-op LiteRT models by hand and run them with the reference kernels (test oracle).

Only the tests import this; it needs ``ai_edge_litert`` (the ``oracle`` extra) and skips
otherwise. Models are assembled with the flatbuffer object API of
``ai_edge_litert.schema_py_generated``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

litert = pytest.importorskip("ai_edge_litert.interpreter")
schema = pytest.importorskip("ai_edge_litert.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")

_TYPES = {np.float32: schema.TensorType.FLOAT32, np.int8: schema.TensorType.INT8,
          np.int32: schema.TensorType.INT32}


@dataclass
class Tensor:
    shape: tuple[int, ...]
    dtype: type
    scale: float | list[float] | None = None
    zero_point: int | list[int] = 0
    data: np.ndarray | None = None  # constant buffer contents
    axis: int = 0


@dataclass
class Op:
    code: int
    inputs: list[int]
    outputs: list[int]
    options_type: int = 0
    options: object = None
    version: int = 2


@dataclass
class Model:
    tensors: list[Tensor]
    ops: list[Op]
    inputs: list[int]
    outputs: list[int]
    _codes: list[int] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        m = schema.ModelT()
        m.version = 3
        m.buffers = [schema.BufferT()]
        sg = schema.SubGraphT()
        sg.tensors = []
        for i, t in enumerate(self.tensors):
            tt = schema.TensorT()
            tt.name = f"t{i}"
            tt.shape = list(t.shape)
            tt.type = _TYPES[t.dtype]
            buf = schema.BufferT()
            if t.data is not None:
                buf.data = np.ascontiguousarray(t.data, dtype=t.dtype).view(np.uint8).ravel().tolist()
            m.buffers.append(buf)
            tt.buffer = len(m.buffers) - 1
            if t.scale is not None:
                q = schema.QuantizationParametersT()
                q.scale = [float(s) for s in np.atleast_1d(t.scale)]
                q.zeroPoint = [int(z) for z in np.atleast_1d(t.zero_point)]
                q.quantizedDimension = t.axis
                tt.quantization = q
            sg.tensors.append(tt)
        codes: list[tuple[int, int]] = []
        sg.operators = []
        for op in self.ops:
            if (op.code, op.version) not in codes:
                codes.append((op.code, op.version))
            o = schema.OperatorT()
            o.opcodeIndex = codes.index((op.code, op.version))
            o.inputs, o.outputs = list(op.inputs), list(op.outputs)
            o.builtinOptionsType = op.options_type
            o.builtinOptions = op.options
            sg.operators.append(o)
        m.operatorCodes = []
        for code, version in codes:
            oc = schema.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, 127)
            oc.version = version
            m.operatorCodes.append(oc)
        sg.inputs, sg.outputs = list(self.inputs), list(self.outputs)
        m.subgraphs = [sg]
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def run_reference(model: Model, *feeds: np.ndarray) -> np.ndarray:
    """Run with ``BUILTIN_REF`` (LiteRT reference kernels) and return the first output."""
    interp = litert.Interpreter(model_content=model.to_bytes(),
                                experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), feeds):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"]).copy()


def options(cls_name: str, **fields) -> object:
    obj = getattr(schema, cls_name)()
    for k, v in fields.items():
        setattr(obj, k, v)
    return obj
