"""``func.func @main`` -> ONNX ``GraphProto``: names, initializers, nodes, inputs and outputs.

Design notes
- Names. Graph inputs and outputs keep the names the runtime uses (``quantir.name``
  argument/result attributes, see ``runtime.input_names``/``output_names``); every other
  value keeps its ``name_hint`` (the ONNX tensor name it was imported from) when that is
  still free, else gets a ``__<k>`` suffix; unnamed values get ``t<k>``. ``Exported.names``
  maps each value to its ONNX name, which is how the ORT executor finds the tensors it
  exposes.
- An output that cannot simply be named after its result — an argument passed through, the
  same value returned twice, a value already named by an earlier output — gets an Identity
  node, so every output name is exactly what the function says.
- ``arith.constant`` becomes an initializer (``numpy_helper.from_array``: raw bytes, never
  Python lists). Constants feeding attributes of ONNX inputs (Reshape's shape ...) are
  made by the op converters as extra initializers.
- Every node's input and output element types are checked against the ONNX schema's type
  constraints at the target opset, so an export ONNX Runtime would reject fails here with
  the op's name instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from ... import __version__
from ...errors import QuantirError, UnsupportedOpError, VerifyError
from ...fileio import atomic_write
from ...ir import Function, Module, Operation, Value
from ..naming import unique_name
from ...ir.attributes import DenseElementsAttr, DenseResourceAttr, FloatAttr, IntegerAttr, uniform_value
from ...ir.dialects import arith, func
from ...runtime.interpreter import input_names, output_names
from . import ops as op_table
from . import quant as quant_table
from .dtypes import numpy_dtype, onnx_elem_type, value_info


@dataclass
class Exported:
    """An exported model and the ONNX name of every value of the function."""

    model: onnx.ModelProto
    names: dict[Value, str]
    input_names: list[str]
    output_names: list[str]
    extra_outputs: list[str] = field(default_factory=list)


class NodeContext:
    """What op converters use to emit nodes and initializers (see ``ops.py``, ``quant.py``)."""

    def __init__(self, exporter: "GraphExporter"):
        self._ex = exporter
        self.opset = exporter.opset

    def name(self, v: Value) -> str:
        return self._ex.names[v]

    def result_names(self, op: Operation) -> list[str]:
        return [self._ex.names[r] for r in op.results]

    def describe(self, op: Operation) -> str:
        return op.describe()

    def node_name_hint(self, op: Operation) -> str:
        return op.label or (op.results[0].name_hint if op.results and op.results[0].name_hint else
                            op.name.split(".")[-1])

    def fresh(self, hint: str, like: Value) -> str:
        """A new tensor name for a value a converter makes up, of the element type of ``like``."""
        name = self._ex.claim(hint)
        self._ex.tensor_types[name] = onnx_elem_type(like.type, f"value '{name}'")
        return name

    def constant(self, array: np.ndarray, hint: str) -> str:
        """An initializer holding ``array`` (an equal one made by a converter before is
        reused); returns its name."""
        return self._ex.add_initializer(array, hint, share=True)

    def require_domain(self, domain: str, version: int) -> None:
        have = self._ex.domains.get(domain)
        if have is not None and have != version:
            raise UnsupportedOpError(f"opaque ops of domain '{domain}' use opsets {have} and {version}; "
                                     f"one model has one opset per domain")
        self._ex.domains[domain] = version

    def node(self, op: Operation, op_type: str, inputs: Sequence[str], outputs: Sequence[str],
             attributes: "Mapping[str, Any] | Iterable[onnx.AttributeProto]", domain: str = "") -> None:
        if isinstance(attributes, Mapping):
            attributes = [onnx.helper.make_attribute(k, v) for k, v in attributes.items()]
        node = onnx.helper.make_node(op_type, list(inputs), list(outputs), name=self._ex.node_name(op.label, op_type),
                                     domain=domain or None)
        node.attribute.extend(attributes)
        if not domain:
            self._ex.check_types(op, node)
        self._ex.nodes.append(node)


# A constant of at least this many equal elements is written as a ConstantOfShape node (as
# exporters write such fills) instead of an initializer; ONNX Runtime folds it back at load.
SPLAT_MIN_ELEMENTS = 1024


class GraphExporter:
    def __init__(self, fn: Function, opset: int, graph_name: str):
        self.fn = fn
        self.opset = opset
        self.graph_name = graph_name
        self.names: dict[Value, str] = {}
        self.used: set[str] = set()
        self.tensor_types: dict[str, int] = {}   # ONNX element type of every name, for the schema checks
        self.initializers: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []
        self.domains: dict[str, int] = {}
        self._node_names: set[str] = set()
        self._shared: dict[tuple, str] = {}
        self._counter = 0
        # base -> the first suffix not yet tried for it. Names are never released, so a search
        # resumes where the last one for its base stopped: n claims of one base stay linear.
        self._next_tensor: dict[str, int] = {}
        self._next_node: dict[str, int] = {}

    # -- naming ---------------------------------------------------------------------------------
    def claim(self, base: str) -> str:
        """``base`` if no tensor has that name yet, else the first free ``base__<k>``, k = 1, 2, ..."""
        return unique_name(base, "__", self.used, self._next_tensor)

    def node_name(self, label: str | None, op_type: str) -> str:
        """The op's label (the ONNX node name it came from) or its op type, made unique."""
        return unique_name(label or op_type, "_", self._node_names, self._next_node, allow_empty=True)

    def _name_values(self, ins: list[str], outs: list[str]) -> list[tuple[Value, str]]:
        """Assign ONNX names; returns the outputs that need an Identity node."""
        for name, arg in zip(ins, self.fn.arguments):
            if name in self.used:
                raise VerifyError(f"function '@{self.fn.name}' has two inputs named '{name}'")
            self.used.add(name)
            self.names[arg] = name
        identities: list[tuple[Value, str]] = []
        seen: set[str] = set()
        inputs = set(ins)
        for name, v in zip(outs, self.fn.outputs):
            if name in seen:
                raise VerifyError(f"function '@{self.fn.name}' has two outputs named '{name}'")
            seen.add(name)
            if name in inputs:
                if self.names.get(v) == name:
                    continue   # an input passed straight through under its own name
                raise VerifyError(f"function '@{self.fn.name}' has an input and an output named '{name}'")
            self.used.add(name)
            if v not in self.names:
                self.names[v] = name
            else:
                identities.append((v, name))
        results = [r for op in self.fn.ops for r in op.results]
        for r in results:
            if r not in self.names and r.name_hint:
                self.names[r] = self.claim(r.name_hint)
        for r in results:
            if r not in self.names:
                self._counter += 1
                self.names[r] = self.claim(f"t{self._counter}")
        for v, name in self.names.items():
            try:
                self.tensor_types[name] = onnx_elem_type(v.type, f"value '{name}'")
            except UnsupportedOpError:
                pass  # reported where the value becomes an initializer, a node or an output
        return identities

    def add_initializer(self, array: np.ndarray, hint: str, *, share: bool = False) -> str:
        """A new initializer; with ``share``, an equal small array made before is reused
        (a qcast and its dcast share one scale and one zero point)."""
        array = np.asarray(array, order="C")
        key = (array.dtype.str, array.shape, array.tobytes()) if share and array.size <= 4096 else None
        if key is not None and key in self._shared:
            return self._shared[key]
        name = self.claim(hint)
        if key is not None:
            self._shared[key] = name
        self.initializers.append(numpy_helper.from_array(array, name))
        self.tensor_types[name] = int(onnx.helper.np_dtype_to_tensor_dtype(array.dtype))
        return name

    # -- schema checks --------------------------------------------------------------------------
    def check_types(self, op: Operation, node: onnx.NodeProto) -> None:
        """Every input/output element type must be allowed by the schema's type constraints."""
        try:
            s = onnx.defs.get_schema(node.op_type, self.opset, "")
        except onnx.defs.SchemaError:
            raise UnsupportedOpError(f"'{op.name}' becomes ONNX {node.op_type}, which opset {self.opset} does "
                                     f"not define") from None
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in s.type_constraints}
        for kind, formals, actual in (("input", s.inputs, node.input), ("output", s.outputs, node.output)):
            for i, name in enumerate(actual):
                if not name or not formals:
                    continue
                formal = formals[min(i, len(formals) - 1)]
                if i >= len(formals) and formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
                    raise UnsupportedOpError(f"{op.describe()}: ONNX {node.op_type} at opset {self.opset} "
                                             f"takes at most {len(formals)} {kind}s, got {len(actual)}")
                code = self.tensor_types.get(name)
                types = allowed.get(formal.type_str)
                if code is None or types is None:
                    continue
                spelled = f"tensor({onnx.helper.tensor_dtype_to_string(code).split('.')[-1].lower()})"
                if spelled not in types:
                    raise UnsupportedOpError(
                        f"{op.describe()}: ONNX {node.op_type} at opset {self.opset} does not accept "
                        f"{spelled} for {kind} '{formal.name}' (allowed: {', '.join(sorted(types))})")

    # -- the graph ------------------------------------------------------------------------------
    def run(self, extra: Sequence[Value] = ()) -> Exported:
        ins, outs = input_names(self.fn), output_names(self.fn)
        identities = self._name_values(ins, outs)
        keep = set(self.fn.outputs) | set(extra)   # unused constants are left out, these are not
        ctx = NodeContext(self)
        for op in self.fn.ops:
            if op.opdef is func.RETURN:
                continue
            if op.opdef is arith.CONSTANT:
                if op.results[0].uses or op.results[0] in keep:
                    self._constant(op)
                continue
            convert = op_table.CUSTOM.get(op.opdef) or quant_table.CUSTOM.get(op.opdef)
            if convert is None and op.opdef.dialect == "nn" and op.opdef.registered:
                convert = op_table.convert_generic
            if convert is None:
                raise UnsupportedOpError(f"{op.describe()} has no ONNX export (the ONNX backend exports "
                                         f"'nn' ops, arith.constant and quant.qcast/dcast/scast)")
            convert(ctx, op)
        for v, name in identities:
            self.nodes.append(onnx.helper.make_node("Identity", [self.names[v]], [name],
                                                    name=self.node_name(None, "Identity")))
        graph_inputs = [value_info(n, a.type, f"input '{n}'") for n, a in zip(ins, self.fn.arguments)]
        graph_outputs = [value_info(n, v.type, f"output '{n}'") for n, v in zip(outs, self.fn.outputs)]
        extra_names = []
        listed = set(outs)
        for v in extra:
            name = self.names.get(v)
            if name is None:
                raise ValueError(f"value {v!r} is not in function '@{self.fn.name}'")
            extra_names.append(name)
            if name not in listed:
                listed.add(name)
                graph_outputs.append(value_info(name, v.type, f"value '{name}'"))
        # Built in place: make_graph/make_model would copy every initializer twice more.
        model = onnx.ModelProto(producer_name="quantir", producer_version=__version__)
        graph = model.graph
        graph.name = self.graph_name
        graph.node.extend(self.nodes)
        graph.input.extend(graph_inputs)
        graph.output.extend(graph_outputs)
        graph.initializer.extend(self.initializers)
        model.opset_import.append(onnx.helper.make_opsetid("", self.opset))
        model.opset_import.extend(onnx.helper.make_opsetid(d, v) for d, v in sorted(self.domains.items()))
        return Exported(model, self.names, ins, outs, extra_names)

    def _constant(self, op: Operation) -> None:
        r = op.results[0]
        name = self.names[r]
        value = op.attributes.get("value")
        what = f"constant '{name}'"
        dtype = numpy_dtype(r.type, what)
        if isinstance(value, (DenseElementsAttr, DenseResourceAttr)):
            if value.array is None:
                raise UnsupportedOpError(f"{what} is an elided dense_resource blob; its data is not in the module "
                                         f"(print the IR with `quantir show --elide -1` to keep the data)")
            array = np.asarray(value.array)
            shape = value.type.shape
            if shape is not None and None not in shape and array.shape != tuple(shape) and array.size == 1:
                array = np.broadcast_to(array.reshape(()), shape)   # a splat
        elif isinstance(value, (IntegerAttr, FloatAttr)):
            array = np.asarray(value.value)
        else:
            raise UnsupportedOpError(f"{what}: arith.constant with a {type(value).__name__} has no ONNX form")
        if array.dtype != dtype:
            array = array.astype(dtype)
        # (not for int4 storage, dtype kind "V": ONNX Runtime has no ConstantOfShape kernel for it)
        if array.size >= SPLAT_MIN_ELEMENTS and array.dtype.kind != "V" and uniform_value(array) is not None:
            shape = self.add_initializer(np.asarray(array.shape, dtype=np.int64), f"{name}_shape")
            value = numpy_helper.from_array(np.array(array.reshape(-1)[:1]))
            node = onnx.helper.make_node("ConstantOfShape", [shape], [name],
                                         name=self.node_name(op.label, "ConstantOfShape"))
            node.attribute.append(onnx.helper.make_attribute("value", value))
            self.nodes.append(node)
            return
        self.initializers.append(numpy_helper.from_array(np.asarray(array, order="C"), name))


def export(module: Module | Function, *, opset: int, ir_version: int,
           extra_outputs: Sequence[Value] = ()) -> Exported:
    fn = module.main if isinstance(module, Module) else module
    name = (module.name if isinstance(module, Module) else None) or fn.name
    exported = GraphExporter(fn, opset, name).run(extra_outputs)
    exported.model.ir_version = ir_version
    return exported


def write_model(model: onnx.ModelProto, path) -> None:
    """Serialize ``model`` before touching ``path``, then write it atomically (temporary file +
    rename), so ``path`` is the old file or the complete new one. Over 2 GB (protobuf's limit)
    raises ``QuantirError``."""
    try:
        data = model.SerializeToString()
    except ValueError as e:  # protobuf refuses messages over 2 GB
        raise QuantirError(f"{path}: the model is too large for one ONNX file ({e})") from None
    atomic_write(path, data)
