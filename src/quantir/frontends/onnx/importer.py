"""ONNX graph -> ``func.func @main`` of ``nn`` ops.

Design notes
- Nodes are converted in graph order (ONNX requires topological order; a use before its
  definition is a ``ModelFormatError``). Each new op is folded on the spot when its
  operands are constants (``passes.fold_constants.fold_op``), so exporter-made shape
  subgraphs (Shape -> Gather -> Concat -> Reshape ...) collapse while importing and the
  inputs that must be constants are constants when the consumer reads them.
- Types come from quantir's own rules (``OpDef.infer``); the graph outputs' declared ONNX
  types are checked against them, which catches a wrong rule at import time.
- Names: graph inputs/outputs keep their ONNX names as ``quantir.name`` argument/result
  attributes, every value its tensor name as ``name_hint``, every op its node name as
  ``label``. Initializers become ``arith.constant`` holding the numpy array.
- Errors name the file, the node (name, op type, outputs) and what was wrong.
"""
from __future__ import annotations

import base64
import warnings
from typing import Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import ModelFormatError, QuantirError, ShapeError, UnsupportedOpError, VerifyError, quote_name
from ...ir import Function, Module, Operation, StringAttr, Value
from ...ir.attributes import DenseElementsAttr
from ...ir.dialects import arith, func, nn
from ...ir.opdef import from_attr
from ...passes.fold_constants import constant_value, fold_op, make_constant, replace_with_constants
from ...types import TensorType, Type
from . import ops as op_table
from . import symbolic
from .dtypes import INITIALIZER_ONLY, element_type
from .loader import LoadedModel


def tensor_type(type_proto: onnx.TypeProto, what: str) -> Type:
    if type_proto.WhichOneof("value") != "tensor_type":
        kind = type_proto.WhichOneof("value") or "no type"
        raise UnsupportedOpError(f"{what} is a {kind}; quantir imports tensors only")
    tt = type_proto.tensor_type
    et = element_type(tt.elem_type, what)
    if not tt.HasField("shape"):
        return TensorType(None, et)
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    return TensorType(dims, et)


def to_array(t: onnx.TensorProto, what: str) -> np.ndarray:
    element_type(t.data_type, what)  # refuses unsupported element types with a clear message
    return numpy_helper.to_array(t)


def attribute_value(a: onnx.AttributeProto, what: str):
    """A Python value for an ONNX attribute: str for STRING, tuple for lists, ndarray for TENSOR."""
    kind = a.type
    A = onnx.AttributeProto
    if kind == A.FLOAT:
        return float(a.f)
    if kind == A.INT:
        return int(a.i)
    if kind == A.STRING:
        return a.s.decode("utf-8")
    if kind == A.FLOATS:
        return tuple(float(v) for v in a.floats)
    if kind == A.INTS:
        return tuple(int(v) for v in a.ints)
    if kind == A.STRINGS:
        return tuple(s.decode("utf-8") for s in a.strings)
    if kind == A.TENSOR:
        return to_array(a.t, f"{what} attribute {quote_name(a.name)}")
    raise UnsupportedOpError(f"{what} attribute {quote_name(a.name)} of kind {A.AttributeType.Name(kind)} is "
                             f"not supported")


def _quantized_hint(node: onnx.NodeProto) -> str:
    """For a QOperator node (``QLinearConv``, ``QGemm``, ...): where such a model is read."""
    from .qoperator_to_qdq import is_quantized_node
    if not is_quantized_node(node):
        return ""
    return ("; the model is quantized already (QOperator): convert it with its own parameters by "
            "'quantir convert MODEL.onnx -o OUT.tflite' or quantir.load(path, qdq=True)")


def describe(node: onnx.NodeProto) -> str:
    outs = ", ".join(quote_name(o) for o in node.output if o)
    name = f"node {quote_name(node.name)}" if node.name else "unnamed node"
    return f"{name} ({node.op_type} -> {outs})"


class NodeContext:
    """What a converter sees of one node: its inputs as values, constants, attributes."""

    def __init__(self, importer: "GraphImporter", node: onnx.NodeProto):
        self.importer = importer
        self.node = node
        self.op_type = node.op_type

    # inputs
    def input(self, i: int) -> Value | None:
        if i >= len(self.node.input) or not self.node.input[i]:
            return None
        return self.importer.value(self.node.input[i], self.node)

    def const_inputs(self) -> dict[str, object]:
        """The inputs listed in ``ops.CONSTANT_INPUTS`` as attribute values (absent ones left out)."""
        out = {}
        for spec in op_table.CONSTANT_INPUTS.get(self.op_type, ()):
            v = self.input(spec.index)
            if v is None:
                continue
            array = constant_value(v)
            if array is None:
                raise UnsupportedOpError(
                    f"input {spec.index} ({quote_name(self.node.input[spec.index])}, the {spec.attr}) of "
                    f"{self.op_type} must "
                    f"be a constant for quantir to know the result's shape, but it is computed at run time and "
                    f"does not fold to a constant")
            if array.size == 0 and spec.empty_is_absent:
                continue
            out[spec.attr] = spec.convert(array)
        return out

    def operands(self) -> list[Value]:
        """The inputs that stay operands: present and not turned into attributes."""
        slots = op_table.constant_input_slots(self.op_type)
        return [v for i in range(len(self.node.input)) if i not in slots and (v := self.input(i)) is not None]

    # attributes
    def raw_attributes(self) -> dict[str, object]:
        return {a.name: attribute_value(a, self.op_type) for a in self.node.attribute}

    def attributes(self) -> dict[str, object]:
        """snake_case attribute names with Python values; type codes become quantir types."""
        out = {}
        for a in self.node.attribute:
            value = attribute_value(a, self.op_type)
            if (self.op_type, a.name) in op_table.TYPE_ATTRIBUTES:
                value = element_type(value, f"{self.op_type} attribute {quote_name(a.name)}")
            out[op_table.snake_case(a.name)] = value
        return out

    # building
    def constant(self, array: np.ndarray, name_of_output: int | None = None) -> Value:
        op = make_constant(np.asarray(array), label=self.node.name or None)
        self.importer.fn.body.append(op)
        if name_of_output is not None:
            op.results[0].name_hint = self.node.output[name_of_output]
        return op.results[0]

    def generic(self, opdef) -> list[Value | None]:
        attrs = {**self.attributes(), **self.const_inputs()}
        return self.emit(opdef, self.operands(), **attrs)

    def emit(self, opdef, operands: Sequence[Value], **attrs) -> list[Value | None]:
        """Build, verify, append and (when possible) fold one op; returns the node's outputs."""
        for key in attrs:
            if key not in opdef.attributes:
                onnx_name = next((a.name for a in self.node.attribute if op_table.snake_case(a.name) == key), key)
                raise UnsupportedOpError(f"attribute {quote_name(onnx_name)} of {self.op_type} is not supported")
        attributes = opdef.make_attrs(attrs)
        values = {k: (from_attr(s.kind, attributes[k]) if k in attributes else s.default)
                  for k, s in opdef.attributes.items()}
        types = opdef.infer([v.type for v in operands], values)
        fixed = sum(1 for r in opdef.results if not r.variadic)
        wanted = len(self.node.output)
        types = types[:max(fixed, wanted)] if any(r.variadic for r in opdef.results) else types
        op = Operation(opdef, operands, types, attributes, label=self.node.name or None)
        for r, name in zip(op.results, self.node.output):
            r.name_hint = name or None
        opdef.verify_op(op)
        self.importer.fn.body.append(op)
        try:
            # keep_qdq: a model's own quantization (DequantizeLinear of constant weights) stays
            # visible instead of folding into float constants
            keep = self.importer.keep_qdq and opdef is nn.DEQUANTIZE_LINEAR
            folded = None if keep else fold_op(op)
        except (ValueError, IndexError, TypeError, ArithmeticError) as e:
            raise ShapeError(f"its inputs are constants, but evaluating it failed: {e}") from e
        results = op.results
        if folded is not None:
            results = [c.results[0] for c in replace_with_constants(op, folded)]
        elif (known := symbolic.evaluate(op, self.importer.symbolic)) is not None:
            results = [c.results[0] for c in replace_with_constants(op, [known])]
        else:
            symbolic.relate(op, self.importer.dim_classes, self.importer.symbolic)
        return list(results)


class GraphImporter:
    def __init__(self, loaded: LoadedModel, keep_unsupported: bool,
                 constant_inputs: Mapping[str, np.ndarray] | None, keep_qdq: bool = False):
        self.keep_qdq = keep_qdq
        self.loaded = loaded
        self.model = loaded.model
        self.source = loaded.source
        self.keep_unsupported = keep_unsupported
        self.constant_inputs = dict(constant_inputs or {})
        self.values: dict[str, Value] = {}
        self._onnx_types: dict[str, onnx.TypeProto] | None = None
        self.symbolic: dict[Value, symbolic.SymTensor] = {}   # partially known shape tensors
        self.dim_classes = symbolic.DimClasses()               # dynamic dims known to be equal
        self.fn: Function

    def error(self, cls, message: str) -> QuantirError:
        return cls(f"{self.source}: {message}")

    def value(self, name: str, node: onnx.NodeProto | None = None) -> Value:
        try:
            return self.values[name]
        except KeyError:
            where = describe(node) if node is not None else "a graph output"
            raise self.error(ModelFormatError, f"{where} uses tensor {quote_name(name)}, which no initializer, "
                                               f"graph input or "
                                               f"earlier node defines (the graph is not topologically sorted "
                                               f"or is truncated)") from None

    def run(self) -> Module:
        graph = self.model.graph
        init_names = {t.name for t in graph.initializer}
        unknown = set(self.constant_inputs) - {i.name for i in graph.input}
        if unknown:
            raise self.error(ModelFormatError, f"constant_inputs names {sorted(unknown)}, which are not graph inputs")
        args = [i for i in graph.input if i.name not in init_names and i.name not in self.constant_inputs]
        try:
            arg_types = [tensor_type(i.type, f"graph input {quote_name(i.name)}") for i in args]
        except UnsupportedOpError as e:
            raise self.error(UnsupportedOpError, e.message) from None
        self.fn = Function.create("main", arg_types, [],
                                  arg_attrs=[{"quantir.name": StringAttr(i.name)} for i in args])
        for a, i in zip(self.fn.arguments, args):
            a.name_hint = i.name
            self.values[i.name] = a
        symbolic.join_named_dims(self.dim_classes, self.fn.arguments, args)
        for t in graph.initializer:
            if t.data_type in INITIALIZER_ONLY:   # int4 weights: one value per byte, typed i4/ui4
                et = INITIALIZER_ONLY[t.data_type]
                held = numpy_helper.to_array(t).astype(np.uint8 if et.signedness == "unsigned" else np.int8)
                self._define_constant(t.name, DenseElementsAttr(held, TensorType(tuple(held.shape), et)))
                continue
            try:
                array = to_array(t, f"initializer {quote_name(t.name)}")
            except UnsupportedOpError as e:
                raise self.error(UnsupportedOpError, e.message) from None
            self._define_constant(t.name, array)
        for name, array in self.constant_inputs.items():
            self._define_constant(name, np.asarray(array))
        for node in graph.node:
            self._convert(node)
        outputs = [self.value(o.name) for o in graph.output]
        for o, v in zip(graph.output, outputs):
            self._check_declared(o, v)
        self.fn.body.append(func.RETURN.build(outputs, []))
        self.fn.res_attrs = [{"quantir.name": StringAttr(o.name)} for o in graph.output]
        self.fn.update_type()
        return Module([self.fn], name=graph.name or None)

    def _define_constant(self, name: str, array: "np.ndarray | DenseElementsAttr") -> None:
        op = (arith.CONSTANT.build([], [array.type], value=array) if isinstance(array, DenseElementsAttr)
              else make_constant(array))
        op.results[0].name_hint = name
        self.fn.body.append(op)
        self.values[name] = op.results[0]

    def _convert(self, node: onnx.NodeProto) -> None:
        domain = node.domain if node.domain not in ("ai.onnx",) else ""
        ctx = NodeContext(self, node)
        try:
            if domain != "":
                raise UnsupportedOpError(f"op {quote_name(node.op_type)} of domain {quote_name(domain)} is not "
                                         f"supported "
                                         f"(quantir imports the default ONNX domain)")
            if node.op_type in op_table.CUSTOM:
                results = op_table.CUSTOM[node.op_type](ctx)
            elif node.op_type in op_table.GENERIC:
                results = ctx.generic(op_table.GENERIC[node.op_type])
            else:
                raise UnsupportedOpError(f"op {quote_name(node.op_type)} is not supported")
        except UnsupportedOpError as e:
            if self.keep_unsupported:
                results = self._opaque(node, e)
            else:
                raise self.error(UnsupportedOpError, f"{describe(node)}: {e.message}{_quantized_hint(node)}") from None
        except (ShapeError, VerifyError) as e:
            raise self.error(type(e), f"{describe(node)}: {e.message}") from None
        except ModelFormatError:
            raise
        for name, v in zip(node.output, results):
            if name and v is not None:
                self.values[name] = v

    # -- opaque nodes ---------------------------------------------------------------------------
    def _onnx_type(self, name: str) -> onnx.TypeProto | None:
        if self._onnx_types is None:
            try:
                inferred = onnx.shape_inference.infer_shapes(self.model)
            except Exception:  # noqa: BLE001 - best effort: keep what the model declares
                inferred = self.model
            g = inferred.graph
            self._onnx_types = {v.name: v.type for v in (*g.value_info, *g.output, *g.input)}
        return self._onnx_types.get(name)

    def _opaque(self, node: onnx.NodeProto, reason: UnsupportedOpError) -> list[Value | None]:
        """An ``nn.onnx_op`` whose operands/results are the node's non-empty inputs/outputs."""
        types = []
        for name in node.output:
            if not name:
                continue
            t = self._onnx_type(name)
            if t is None:
                raise self.error(UnsupportedOpError, f"{describe(node)}: {reason.message}; it cannot be kept "
                                 f"opaque because the type of output {quote_name(name)} is unknown to ONNX shape "
                                 f"inference")
            try:
                types.append(tensor_type(t, f"output {quote_name(name)}"))
            except UnsupportedOpError as e:
                raise self.error(UnsupportedOpError, f"{describe(node)}: {reason.message}; it cannot be kept "
                                                     f"opaque: {e.message}") from None
        domain = node.domain or ""
        opset = next((o.version for o in self.model.opset_import if o.domain in (domain, "ai.onnx" if not domain
                                                                                   else domain)), 0)
        operands = [self.value(i, node) for i in node.input if i]
        op = nn.ONNX_OP.build(operands, types, label=node.name or None, op_type=node.op_type, domain=domain,
                              opset=opset, node=base64.b64encode(node.SerializeToString()).decode("ascii"))
        results = iter(op.results)
        aligned = [next(results) if name else None for name in node.output]
        for r, name in zip(op.results, [n for n in node.output if n]):
            r.name_hint = name
        self.fn.body.append(op)
        return aligned

    def _check_declared(self, out: onnx.ValueInfoProto, v: Value) -> None:
        if not out.type.HasField("tensor_type") or not out.type.tensor_type.elem_type:
            return
        try:
            declared = tensor_type(out.type, f"graph output {quote_name(out.name)}")
        except UnsupportedOpError as e:
            raise self.error(UnsupportedOpError, e.message) from None
        ours = v.type
        if not isinstance(ours, TensorType):
            return
        mismatch = declared.element_type != ours.element_type
        if declared.shape is not None and ours.shape is not None:
            conflict = any(a is not None and b is not None and a != b for a, b in zip(declared.shape, ours.shape))
            if len(declared.shape) != len(ours.shape) and None in ours.shape and not conflict and not mismatch:
                # a shape computed at run time: ONNX Runtime runs such a file and warns about the
                # declared rank too, so the model's graph, not its declaration, decides
                warnings.warn(f"{self.source}: graph output {quote_name(out.name)} is declared as {declared}, but "
                              f"its graph computes {ours} (ONNX Runtime returns that rank as well); quantir "
                              f"keeps the computed type", UserWarning, stacklevel=2)
                return
            mismatch |= len(declared.shape) != len(ours.shape) or conflict
        if mismatch:
            raise self.error(ShapeError, f"graph output {quote_name(out.name)} is declared as {declared} but "
                                         f"quantir infers "
                                         f"{ours}")
