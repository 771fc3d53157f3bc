"""One validation pass over a ``ModelProto`` before any conversion.

The importer, the version converter and ``numpy_helper`` assume a well-formed model; fed a
hostile or damaged one they fail deep inside with ``ValueError: cannot reshape``, a
``TypeError`` on a ``bytes`` name or an ``IndexError`` on a missing input. This pass checks
what they assume, in graph order, and raises the first problem as a typed one-line error
that names the file, the node (index, name, op type) and what was expected:

- every name, op type, domain and string attribute is valid UTF-8 (protobuf parses a proto2
  string field holding invalid UTF-8 and hands it back as ``bytes``);
- tensor data matches its dims: no negative dim, and ``raw_data`` (or the typed ``*_data``
  field) holds exactly ``product(dims)`` elements of the element type;
- a node of the default domain has the inputs, outputs and required attributes its ONNX
  schema (``onnx.defs.get_schema`` at the model's opset) asks for, and each attribute it
  sets has the schema's kind (``strides`` is INTS, not INT);
- a Constant holds a numeric tensor (not a string or a sparse tensor);
- an Einsum's equation parses (the version converter hangs on some that do not).

What quantir does not implement (an op type, an element type) is left to the importer,
which names it as ``UnsupportedOpError`` and can keep it opaque.
"""
from __future__ import annotations

import math

import onnx
from onnx import AttributeProto, TensorProto
from onnx.defs import OpSchema

from ...errors import ModelFormatError, ShapeError, UnsupportedOpError, quote_name
from ...ir.dialects.nn_encoder import parse_einsum
from .dtypes import INITIALIZER_ONLY, element_type

_ATTR = AttributeProto.AttributeType
_SINGLE = OpSchema.FormalParameterOption.Single
# A Constant's value attributes quantir cannot hold as a numpy array of numbers.
_CONSTANT_UNSUPPORTED = {"value_string": "a string", "value_strings": "strings", "sparse_value": "a sparse tensor"}


def validate_model(model: onnx.ModelProto, source: str, opset: int) -> None:
    """Raise ``ModelFormatError``/``UnsupportedOpError`` for the first malformed part of ``model``."""
    graph = model.graph
    for o in model.opset_import:
        _check_text(o.domain, source, "an opset_import domain")
    _check_text(graph.name, source, "the graph name")
    for kind, infos in (("graph input", graph.input), ("graph output", graph.output),
                        ("value_info", graph.value_info)):
        for i, info in enumerate(infos):
            _check_value_info(info, f"{kind} {i}", source)
    for i, t in enumerate(graph.initializer):
        _check_text(t.name, source, f"the name of initializer {i}")
        check_tensor(t, f"{source}: initializer {i} ({quote_name(t.name)})")
    for index, node in enumerate(graph.node):
        _check_node(node, index, source, opset)


def node_label(node: onnx.NodeProto, index: int | None = None) -> str:
    """``node 3 'conv1' (Conv)``: how errors name a node, with every name escaped."""
    at = f" {index}" if index is not None else ""
    name = f" {quote_name(node.name)}" if node.name else " (unnamed)"
    op = node.op_type if isinstance(node.op_type, str) else quote_name(node.op_type)
    return f"node{at}{name} ({op})"


# -- text ---------------------------------------------------------------------------------------

def _check_text(value: "str | bytes", source: str, what: str) -> None:
    if not isinstance(value, str):
        raise ModelFormatError(f"{source}: {what} is not valid UTF-8 ({quote_name(value)}); the file is corrupt")


def _check_value_info(info: onnx.ValueInfoProto, what: str, source: str) -> None:
    _check_text(info.name, source, f"the name of {what}")
    where = f"{source}: {what} ({quote_name(info.name)})"
    if info.type.WhichOneof("value") != "tensor_type" or not info.type.tensor_type.HasField("shape"):
        return
    for d, dim in enumerate(info.type.tensor_type.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value < 0:
            raise ModelFormatError(f"{where}: dim {d} is {dim.dim_value}; a dim is a size >= 0 "
                                   f"(or a symbolic name for a dynamic one)")
        if dim.HasField("dim_param"):
            _check_text(dim.dim_param, source, f"a dim name of {what}")


# -- tensors ------------------------------------------------------------------------------------

def check_tensor(t: onnx.TensorProto, where: str) -> None:
    """Dims >= 0, a supported element type, and as much data as the dims say.

    ``where`` starts the message (``FILE: initializer 3 ('w')``). External data must have
    been read (the loader does it for a file; an in-memory model must carry its data).
    """
    for d, n in enumerate(t.dims):
        if n < 0:
            raise ModelFormatError(f"{where}: dim {d} is {n} in dims {list(t.dims)}; dims of a tensor are >= 0")
    try:
        if t.data_type not in INITIALIZER_ONLY:
            element_type(t.data_type, "it")
    except UnsupportedOpError as e:
        raise UnsupportedOpError(f"{where}: {e.message}") from None
    if t.data_location == TensorProto.EXTERNAL:
        raise ModelFormatError(f"{where}: the data is in an external file that was not read; load the model "
                               f"from its path (the external file next to it) or with its data in the proto")
    count = math.prod(t.dims)
    itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    packed = t.data_type in (TensorProto.INT4, TensorProto.UINT4)   # two values per byte
    if t.HasField("raw_data"):
        found, wanted, unit = len(t.raw_data), (count + 1) // 2 if packed else count * itemsize, "bytes of raw_data"
    else:
        field = onnx.helper.tensor_dtype_to_field(t.data_type)
        found, wanted, unit = len(getattr(t, field)), (count + 1) // 2 if packed else count, f"values in {field}"
    if found != wanted:
        raise ModelFormatError(f"{where}: dims {list(t.dims)} of {TensorProto.DataType.Name(t.data_type)} "
                               f"need {wanted} {unit}, the file has {found}; the tensor is truncated or its "
                               f"dims are wrong")


# -- nodes --------------------------------------------------------------------------------------

def _schema(node: onnx.NodeProto, opset: int) -> OpSchema | None:
    """The node's ONNX schema at ``opset`` (or the op's first version when it is newer)."""
    if node.domain not in ("", "ai.onnx") or not onnx.defs.has(node.op_type, ""):
        return None
    version = max(1, min(opset, onnx.defs.onnx_opset_version()))
    try:
        return onnx.defs.get_schema(node.op_type, version, "")
    except onnx.defs.SchemaError:
        return onnx.defs.get_schema(node.op_type, "")   # an op newer than the model's opset


def _check_node(node: onnx.NodeProto, index: int, source: str, opset: int) -> None:
    _check_text(node.op_type, source, f"the op type of node {index}")
    _check_text(node.name, source, f"the name of node {index} ({node.op_type})")
    label = node_label(node, index)
    _check_text(node.domain, source, f"the domain of {label}")
    where = f"{source}: {label}"
    for kind, names in (("input", node.input), ("output", node.output)):
        for i, name in enumerate(names):
            _check_text(name, source, f"{kind} {i} of {label}")
    if not node.op_type:
        raise ModelFormatError(f"{where}: the node has no op type")
    seen = set()
    for a in node.attribute:
        _check_text(a.name, source, f"an attribute name of {label}")
        if a.name in seen:
            raise ModelFormatError(f"{where}: attribute {quote_name(a.name)} is given twice")
        seen.add(a.name)
        _check_attribute(a, source, label)
    schema = _schema(node, opset)
    if schema is not None:
        _check_against_schema(node, schema, where)
    if node.op_type == "Einsum" and node.domain in ("", "ai.onnx"):
        # ONNX's version converter loops forever on some malformed equations ("i..j->i")
        equation = next((a.s for a in node.attribute if a.name == "equation"), b"")
        try:
            parse_einsum(equation.decode("utf-8", "replace"), len(node.input))
        except ShapeError as e:
            raise ModelFormatError(f"{where}: {e.message}") from None
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        for a in node.attribute:
            if a.name in _CONSTANT_UNSUPPORTED:
                raise UnsupportedOpError(f"{where}: a Constant holding {_CONSTANT_UNSUPPORTED[a.name]} "
                                         f"({a.name}) is not supported; quantir holds numeric tensors only")


def _check_attribute(a: onnx.AttributeProto, source: str, label: str) -> None:
    what = f"{source}: {label}: attribute {quote_name(a.name)}"
    if a.type == _ATTR.STRING and not _utf8(a.s):
        raise ModelFormatError(f"{what}: the string {quote_name(a.s)} is not valid UTF-8")
    if a.type == _ATTR.STRINGS and not all(_utf8(s) for s in a.strings):
        bad = next(s for s in a.strings if not _utf8(s))
        raise ModelFormatError(f"{what}: the string {quote_name(bad)} is not valid UTF-8")
    if a.type == _ATTR.TENSOR:
        _check_text(a.t.name, source, f"the tensor name in attribute {quote_name(a.name)} of {label}")
        check_tensor(a.t, what)
    if a.type == _ATTR.TENSORS:
        for i, t in enumerate(a.tensors):
            check_tensor(t, f"{what} tensor {i}")


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _kind(code: int) -> str:
    return _ATTR.Name(code) if code in _ATTR.values() else f"kind {code}"


def _check_against_schema(node: onnx.NodeProto, schema: OpSchema, where: str) -> None:
    n_in, n_out = len(node.input), len(node.output)
    version = f"{node.op_type} (opset {schema.since_version})"
    if n_in < schema.min_input or n_in > schema.max_input:
        wanted = _arity(schema.min_input, schema.max_input)
        raise ModelFormatError(f"{where}: {version} takes {_count(wanted, 'input')}, the node has {n_in}")
    for i, formal in enumerate(schema.inputs[:n_in]):
        if formal.option == _SINGLE and not node.input[i]:
            raise ModelFormatError(f"{where}: input {i} ({formal.name}) of {node.op_type} is required, but the "
                                   f"node leaves it empty")
    if n_out < schema.min_output or n_out > schema.max_output:
        wanted = _arity(schema.min_output, schema.max_output)
        raise ModelFormatError(f"{where}: {version} has {_count(wanted, 'output')}, the node names {n_out}")
    given = {a.name: a for a in node.attribute}
    unknown = sorted(set(given) - set(schema.attributes))
    if unknown:   # ONNX's checker and ONNX Runtime refuse these too ("Unrecognized attribute")
        raise UnsupportedOpError(f"{where}: attribute {quote_name(unknown[0])} of {node.op_type} is not supported: "
                                 f"{version} has no such attribute (it has "
                                 f"{', '.join(sorted(schema.attributes)) or 'none'})")
    for name, spec in schema.attributes.items():
        a = given.get(name)
        if a is None:
            if spec.required:
                raise ModelFormatError(f"{where}: {version} requires attribute {quote_name(name)} "
                                       f"({_kind(int(spec.type.value))}), the node does not set it")
            continue
        if a.type != int(spec.type.value):
            raise ModelFormatError(f"{where}: attribute {quote_name(name)} of {node.op_type} is "
                                   f"{_kind(int(spec.type.value))}, the node gives {_kind(a.type)}")


def _count(wanted: str, noun: str) -> str:
    return f"{wanted} {noun}" + ("" if wanted == "1" else "s")


def _arity(low: int, high: int) -> str:
    if low == high:
        return str(low)
    return f"at least {low}" if high >= 2**31 - 1 else f"{low} to {high}"
