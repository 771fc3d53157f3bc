"""The export table: how each ``nn`` op becomes an ONNX node.

The ``nn`` dialect mirrors ONNX (``nn.global_average_pool`` is ``GlobalAveragePool``,
``trans_b`` is ``transB``), so most ops need no code: the ONNX op type is the CamelCase of
the op name (``OP_TYPE_OVERRIDES`` lists the few irregular ones), attribute names come
back from the ONNX schema of the target opset, and the attributes that ONNX takes as
constant *inputs* (Reshape's shape, Slice's bounds, Clip's min/max, ...) are listed in
``CONST_INPUTS`` with the input slot they go back to and how to encode them. Only what
does not fit that rule has a converter in ``CUSTOM``.

Attributes are emitted when the op carries them explicitly; an absent one keeps the ONNX
default, which is also the ``nn`` default (the ``nn`` dialect takes ONNX's defaults). An
attribute the target opset does not know is dropped when it holds its default value and
refused otherwise, so a model is never silently changed to fit an older opset.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from ...errors import UnsupportedOpError
from ...ir import Operation
from ...ir.dialects import nn
from ...ir.opdef import AttrKind, OpDef
from .dtypes import numpy_dtype, onnx_elem_type

if TYPE_CHECKING:
    from .exporter import NodeContext

OP_TYPE_OVERRIDES = {
    "matmul": "MatMul", "matmul_integer": "MatMulInteger", "qlinear_matmul": "QLinearMatMul",
    "qlinear_conv": "QLinearConv", "is_nan": "IsNaN", "is_inf": "IsInf", "prelu": "PRelu", "lrn": "LRN",
    "reduce_l1": "ReduceL1", "reduce_l2": "ReduceL2", "gather_nd": "GatherND",
}


def onnx_op_type(opdef: OpDef) -> str:
    """``nn.global_average_pool`` -> ``GlobalAveragePool``."""
    short = opdef.name.split(".", 1)[1]
    return OP_TYPE_OVERRIDES.get(short) or "".join(p.capitalize() for p in short.split("_"))


def snake_case(name: str) -> str:
    """The ``nn`` spelling of an ONNX attribute name (the importer's rule)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def schema(op_type: str, opset: int, what: str) -> onnx.defs.OpSchema:
    """The ONNX schema of ``op_type`` in effect at ``opset``, or ``UnsupportedOpError``."""
    try:
        s = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        s = None
    if s is None or s.deprecated:
        since = _first_version(op_type)
        hint = f"; it exists from opset {since}: export with opset={since} or newer" if since else ""
        raise UnsupportedOpError(f"{what} becomes ONNX {op_type}, which opset {opset} does not define{hint}")
    return s


@lru_cache(maxsize=None)
def _first_version(op_type: str) -> int | None:
    versions = [d.since_version for d in onnx.defs.get_all_schemas_with_history()
                if d.name == op_type and d.domain == ""]
    return min(versions) if versions else None


# -- attributes that go back to being constant inputs -------------------------------------------

Encoder = Callable[[Any, Operation], "np.ndarray | None"]


def _i64(value, op) -> np.ndarray:
    return np.asarray(value, dtype=np.int64).reshape(-1)


def _f32(value, op) -> np.ndarray:
    return np.asarray(value, dtype=np.float32).reshape(-1)


def _f32_scalar(value, op) -> np.ndarray:
    return np.asarray(value, dtype=np.float32).reshape(())


def _like_data(value, op) -> np.ndarray:
    """A scalar of the first operand's element type (Pad's constant_value)."""
    return np.asarray(value).astype(numpy_dtype(op.operands[0].type, "the data operand")).reshape(())


def _clip_bound(value, op) -> np.ndarray | None:
    """Clip's min/max in x's element type; an infinite bound is the absent input."""
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return None
    return _like_data(value, op)


@dataclass(frozen=True)
class ConstInput:
    """The ``nn`` attribute ``attr`` becomes ONNX input ``index`` (a constant tensor).

    ``since``: the first opset where ONNX takes it as an input; before it the value is the
    ONNX attribute of the same name when ``attribute_before``, else it cannot be exported.
    """

    index: int
    attr: str
    encode: Encoder = _i64
    since: int = 1
    attribute_before: bool = False


def _reduce_axes(since: int) -> tuple[ConstInput, ...]:
    return (ConstInput(1, "axes", since=since, attribute_before=True),)


CONST_INPUTS: dict[str, tuple[ConstInput, ...]] = {
    "reshape": (ConstInput(1, "shape"),),
    "expand": (ConstInput(1, "shape"),),
    "constant_of_shape": (ConstInput(0, "shape"),),
    "tile": (ConstInput(1, "repeats"),),
    "squeeze": (ConstInput(1, "axes"),),
    "unsqueeze": (ConstInput(1, "axes"),),
    "slice": (ConstInput(1, "starts"), ConstInput(2, "ends"), ConstInput(3, "axes"), ConstInput(4, "steps")),
    "pad": (ConstInput(1, "pads"), ConstInput(2, "constant_value", _like_data), ConstInput(3, "axes", since=18)),
    "resize": (ConstInput(1, "roi", _f32), ConstInput(2, "scales", _f32), ConstInput(3, "sizes")),
    "clip": (ConstInput(1, "min", _clip_bound), ConstInput(2, "max", _clip_bound)),
    "split": (ConstInput(1, "split"),),
    "dropout": (ConstInput(1, "ratio", _f32_scalar),),
    "reduce_sum": _reduce_axes(13),
    **{f"reduce_{k}": _reduce_axes(18) for k in ("mean", "max", "min", "prod", "l1", "l2", "sum_square",
                                                  "log_sum", "log_sum_exp")},
}


# -- attribute values -------------------------------------------------------------------------

_ATTR_TYPES = {
    AttrKind.INT: AttributeProto.INT, AttrKind.BOOL: AttributeProto.INT, AttrKind.FLOAT: AttributeProto.FLOAT,
    AttrKind.STRING: AttributeProto.STRING, AttrKind.INTS: AttributeProto.INTS,
    AttrKind.FLOATS: AttributeProto.FLOATS, AttrKind.FLOAT_LIST: AttributeProto.FLOATS,
    AttrKind.STRINGS: AttributeProto.STRINGS, AttrKind.TYPE: AttributeProto.INT,
    AttrKind.ELEMENTS: AttributeProto.TENSOR,
}


def attribute(onnx_name: str, kind: AttrKind, value: Any, what: str) -> AttributeProto:
    """An ONNX attribute from the Python value of an ``nn`` attribute of ``kind``."""
    if kind not in _ATTR_TYPES:
        raise UnsupportedOpError(f"{what}: attribute '{onnx_name}' of kind {kind.name} has no ONNX form")
    if kind is AttrKind.BOOL:
        value = int(value)
    elif kind is AttrKind.TYPE:
        value = onnx_elem_type(value, f"{what} attribute '{onnx_name}'")
    elif kind is AttrKind.ELEMENTS:
        value = numpy_helper.from_array(np.asarray(value))
    elif kind in (AttrKind.INTS, AttrKind.FLOATS, AttrKind.FLOAT_LIST, AttrKind.STRINGS):
        value = list(value)
    return onnx.helper.make_attribute(onnx_name, value, attr_type=_ATTR_TYPES[kind])


def _is_default(op: Operation, name: str) -> bool:
    spec = op.opdef.attributes.get(name)
    value = op.attr(name)
    default = spec.default if spec is not None else None
    if spec is not None and spec.kind is AttrKind.UNIT:
        return value is False
    if default is None:
        return value is None or value == () or value == 0
    return value == default


# -- the generic conversion ---------------------------------------------------------------------

def convert_generic(ctx: "NodeContext", op: Operation) -> None:
    """One ONNX node from one ``nn`` op by the table rules."""
    short = op.name.split(".", 1)[1]
    op_type = onnx_op_type(op.opdef)
    s = schema(op_type, ctx.opset, ctx.describe(op))
    onnx_names = {snake_case(a): a for a in s.attributes}
    consts = {c.attr: c for c in CONST_INPUTS.get(short, ())}

    inputs: dict[int, str] = {}
    attrs: list[AttributeProto] = []
    for name in op.attributes:
        spec = op.opdef.attributes.get(name)
        value = op.attr(name)
        c = consts.get(name)
        if c is not None and ctx.opset >= c.since:
            array = c.encode(value, op)
            if array is not None:
                inputs[c.index] = ctx.constant(array, f"{ctx.node_name_hint(op)}_{name}")
            continue
        if c is not None and not c.attribute_before:
            raise UnsupportedOpError(f"{ctx.describe(op)}: attribute '{name}' becomes an input of ONNX {op_type} "
                                     f"from opset {c.since}; export with opset={c.since} or newer")
        onnx_name = onnx_names.get(name)
        if onnx_name is None:
            if _is_default(op, name):
                continue
            raise UnsupportedOpError(f"{ctx.describe(op)}: ONNX {op_type} at opset {ctx.opset} has no attribute "
                                     f"'{name}' (value {value!r}); export with a newer opset")
        kind = spec.kind if spec is not None else AttrKind.ANY
        attrs.append(attribute(onnx_name, kind, value, ctx.describe(op)))

    taken = {c.index for c in consts.values()}   # operands fill the other slots, in order
    slot = 0
    for v in op.operands:
        while slot in taken:
            slot += 1
        inputs[slot] = ctx.name(v)
        slot += 1
    ctx.node(op, op_type, _input_list(inputs), ctx.result_names(op), attrs)


def _input_list(inputs: dict[int, str]) -> list[str]:
    """Inputs by slot; a gap is ONNX's empty name for an absent optional input."""
    if not inputs:
        return []
    return [inputs.get(i, "") for i in range(max(inputs) + 1)]


# -- custom converters --------------------------------------------------------------------------

def _lstm(ctx: "NodeContext", op: Operation) -> None:
    """LSTM: the operands named by ``optional_inputs`` go back to their ONNX slots (3..7), gaps empty."""
    s = schema("LSTM", ctx.opset, ctx.describe(op))
    inputs = {i: ctx.name(v) for i, v in enumerate(op.operands[:3])}
    for name, v in zip(op.attr("optional_inputs") or (), op.operands[3:]):
        inputs[3 + nn.LSTM_OPTIONAL_INPUTS.index(name)] = ctx.name(v)
    attrs = []
    for name in op.attributes:
        if name == "optional_inputs" or _is_default(op, name):
            continue
        if name not in s.attributes:
            raise UnsupportedOpError(f"{ctx.describe(op)}: ONNX LSTM at opset {ctx.opset} has no attribute '{name}'")
        attrs.append(attribute(name, op.opdef.attributes[name].kind, op.attr(name), ctx.describe(op)))
    ctx.node(op, "LSTM", _input_list(inputs), ctx.result_names(op), attrs)

def _split(ctx: "NodeContext", op: Operation) -> None:
    """Split: before opset 18 there is no ``num_outputs``; equal chunks become explicit sizes."""
    if ctx.opset >= 18 or "num_outputs" not in op.attributes or "split" in op.attributes:
        return convert_generic(ctx, op)
    axis = op.attr("axis")
    shapes = [getattr(r.type, "shape", None) for r in op.results]
    try:
        sizes = [s[axis] for s in shapes]
    except (TypeError, IndexError):
        sizes = [None]
    if None in sizes:
        raise UnsupportedOpError(f"{ctx.describe(op)}: Split with num_outputs on a dynamic dim needs opset 18")
    schema("Split", ctx.opset, ctx.describe(op))
    attrs = [attribute("axis", AttrKind.INT, axis, ctx.describe(op))] if "axis" in op.attributes else []
    split = ctx.constant(np.asarray(sizes, dtype=np.int64), f"{ctx.node_name_hint(op)}_split")
    ctx.node(op, "Split", [ctx.name(op.operands[0]), split], ctx.result_names(op), attrs)


def _onnx_op(ctx: "NodeContext", op: Operation) -> None:
    """An opaque ONNX node kept by the importer: its NodeProto, with quantir's value names."""
    import base64
    node = onnx.NodeProto()
    node.ParseFromString(base64.b64decode(op.attr("node")))
    domain = op.attr("domain") or ""
    opset = op.attr("opset")
    if domain in ("", "ai.onnx"):
        try:
            then = onnx.defs.get_schema(node.op_type, opset, "").since_version
            now = onnx.defs.get_schema(node.op_type, ctx.opset, "").since_version
        except onnx.defs.SchemaError:
            then = now = None
        if then != now:
            raise UnsupportedOpError(f"{ctx.describe(op)}: the opaque ONNX {node.op_type} was imported at opset "
                                     f"{opset} ({node.op_type}-{then}) and changes meaning at opset {ctx.opset} "
                                     f"({node.op_type}-{now}); export with opset={opset}")
    else:
        ctx.require_domain(domain, opset)
    inputs = list(node.input)
    operands = iter(op.operands)
    inputs = [ctx.name(next(operands)) if n else "" for n in inputs]
    ctx.node(op, node.op_type, inputs, ctx.result_names(op), list(node.attribute), domain=domain)


def _dynamic_reshape(ctx: "NodeContext", op: Operation) -> None:
    """Reshape with the target as the node's input 1, the run-time shape operand (``dims`` is
    quantir's knowledge of the result, not an ONNX attribute)."""
    schema("Reshape", ctx.opset, ctx.describe(op))
    attrs = ([attribute("allowzero", AttrKind.INT, op.attr("allowzero"), ctx.describe(op))]
             if op.attr("allowzero") else [])
    ctx.node(op, "Reshape", [ctx.name(v) for v in op.operands], ctx.result_names(op), attrs)


def _run_time_bounds(op_type: str):
    """Expand/Slice whose shape or bounds are operands (``dims`` is quantir's knowledge of the result)."""
    def convert(ctx: "NodeContext", op: Operation) -> None:
        schema(op_type, ctx.opset, ctx.describe(op))
        ctx.node(op, op_type, [ctx.name(v) for v in op.operands], ctx.result_names(op), [])
    return convert


CUSTOM: dict[OpDef, Callable[["NodeContext", Operation], None]] = {
    nn.SPLIT: _split,
    nn.DYNAMIC_RESHAPE: _dynamic_reshape,
    nn.DYNAMIC_EXPAND: _run_time_bounds("Expand"),
    nn.DYNAMIC_SLICE: _run_time_bounds("Slice"),
    nn.ONNX_OP: _onnx_op,
    nn.LSTM: _lstm,
}
