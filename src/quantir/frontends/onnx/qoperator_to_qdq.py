"""A QOperator ONNX model (``QLinearConv``, ``QLinearMatMul``, ``com.microsoft`` ``QGemm`` and
``QLinear*``: ONNX Runtime's ``quantize_static(quant_format=QuantFormat.QOperator)``) rewritten into
the QDQ form quantir converts (``quantize.from_qdq``). Each quantized node becomes
``DequantizeLinear`` of its quantized inputs (at the node's own scales and zero points), the float
op, and ``QuantizeLinear`` at the node's output parameters. Nothing is recalibrated: every integer,
scale and zero point of the file is carried as it is, so the QDQ model computes the same real
values as the QOperator one (up to each runtime's rounding of the requantization).

Why a rewrite and not a second converter: ``from_qdq`` already checks the parameters against
LiteRT's int8 spec, repairs what breaks it (listing each repair; ``strict`` refuses) and lowers.
A QOperator node states the same facts as a QDQ region, only packed into one node.

The rules, per op (``x`` quantized input, ``s``/``z`` scale and zero point):

- ``QLinearConv(x, sx, zx, w, sw, zw, sy, zy, B)``: ``Conv(DQ(x), DQ(w, axis=0), DQ(B, sx·sw, 0))``;
  the int32 bias is the accumulator's integer, so its scale is ``sx · sw`` (per output channel
  with ``sw``) in float32, which is the product ``from_qdq`` expects (``numerics.bias_qparams``).
- ``QLinearMatMul(a, sa, za, b, sb, zb, sy, zy)``: ``MatMul(DQ(a), DQ(b, axis=-1))``: a per-column
  ``b`` is quantized along its last dim.
- ``QGemm(a, sa, za, b, sb, zb, C, sy, zy)``: ONNX Runtime computes
  ``alpha · sa · sb · (a·b + C)`` (``C`` int32, added to the accumulator; QGemm has no ``beta``).
  ``alpha`` goes into ``b``'s scale (``sb' = f32(alpha · sb)``, ``Gemm`` with alpha 1, beta 1),
  so the file's integers stay the weights and ``C`` is at ``sa · sb'``. ``b`` is per column
  along dim 0 with ``transB`` (``(N, K)``), else dim 1.
- ``QLinearAdd``/``QLinearMul``, ``QLinearConcat`` (``sy, zy`` first, then triples),
  ``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearAveragePool``, ``QLinearGlobalAveragePool``
  (NCHW only), ``QLinearSoftmax``: the float op between DQ and Q. ``QLinearSoftmax`` carries the
  softmax semantics of its ``opset`` attribute (before 13: flattened to 2-D from ``axis``); the
  rewrite keeps a softmax only where both semantics agree (over the last axis).
- Ops that ONNX Runtime runs on the integers directly (``MaxPool``, ``Reshape``, ``Transpose``, ...):
  the same op between a DQ and a Q at its input's parameters, which such an op keeps. ``ArgMax``
  and ``ArgMin`` read the dequantized input (the order of the integers is that of the values).

Quantized ops with no QDQ form (dynamic quantization's ``MatMulInteger``/``ConvInteger``/
``DynamicQuantizeLinear``: no output scale) and unknown ``QLinear*`` ops raise
``UnsupportedOpError`` naming the node.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...errors import UnsupportedOpError, quote_name

MS = "com.microsoft"
_ONNX = ("", "ai.onnx")

# QOperator op -> its float op, for the ops written "inputs quantized, output quantized".
_UNARY = {"QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu", "QLinearAveragePool": "AveragePool",
          "QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearSoftmax": "Softmax"}
_BINARY = {"QLinearAdd": "Add", "QLinearMul": "Mul"}
# Ops that ONNX Runtime runs on the quantized integers and whose outputs keep the input's
# parameters (data input 0; the other inputs are shapes, indices, axes).
_PASS_THROUGH = frozenset({"MaxPool", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity",
                           "Slice", "Split", "Gather", "Resize", "DepthToSpace", "SpaceToDepth", "Pad", "Expand",
                           "Tile"})
# Ops reading a quantized tensor whose outputs are indices, not quantized values.
_INDEX_OUTPUT = frozenset({"ArgMax", "ArgMin"})
# Quantized ops of the default domain (the com.microsoft ones are recognized by name below).
_ONNX_QUANTIZED = frozenset({"QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger",
                             "DynamicQuantizeLinear"})
# Quantized com.microsoft ops that are not named QLinear*.
_MS_QUANTIZED = frozenset({"QGemm", "QAttention", "QEmbedLayerNormalization", "QOrderedMatMul",
                           "QOrderedAttention", "QOrderedGelu", "QOrderedLayerNormalization",
                           "QOrderedLongformerAttention", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
                           "DynamicQuantizeLSTM", "QuantizeBFP", "DequantizeBFP"})
# Integer ops with no output scale (dynamic quantization): no QDQ form to rewrite into.
_DYNAMIC = frozenset({"MatMulInteger", "ConvInteger", "DynamicQuantizeLinear", "MatMulIntegerToFloat",
                      "DynamicQuantizeMatMul", "DynamicQuantizeLSTM"})


def is_qoperator(model: onnx.ModelProto) -> bool:
    """True when the graph holds a QOperator node (``QLinear*``, ``QGemm``, an integer-accumulator op)."""
    return any(is_quantized_node(n) for n in model.graph.node)


def is_qoperator_file(path: str | os.PathLike) -> bool:
    """``is_qoperator`` of an ONNX file, read without its external data; False when it does not
    read as ONNX (the loader then reports why)."""
    try:
        return is_qoperator(onnx.load(str(path), load_external_data=False))
    except Exception:   # noqa: BLE001 - read_model gives the located error for a bad file
        return False


def is_quantized_node(n: onnx.NodeProto) -> bool:
    """A QOperator node: ``QLinear*``, ``QGemm`` and the other integer ops of ONNX Runtime's quantizers."""
    if n.domain in _ONNX:
        return n.op_type in _ONNX_QUANTIZED
    return n.domain == MS and (n.op_type.startswith("QLinear") or n.op_type in _MS_QUANTIZED)


def as_qdq(model):
    """``model`` (a path or ``ModelProto``) rewritten to QDQ when it is a QOperator model (a new
    ``ModelProto``; the file and the given proto are not modified); anything else is returned
    unchanged, and so is a file that does not read as ONNX (the loader reports why)."""
    proto, source = model, "<ModelProto>"
    if not isinstance(model, onnx.ModelProto):
        if not isinstance(model, (str, os.PathLike, bytes, bytearray)):
            return model
        source = "<bytes>" if isinstance(model, (bytes, bytearray)) else str(model)
        try:   # weights (external data) only once the graph says it is QOperator
            proto = (onnx.load_from_string(bytes(model)) if source == "<bytes>" else
                     onnx.load(source, load_external_data=False))
            if is_qoperator(proto) and source != "<bytes>":
                onnx.external_data_helper.load_external_data_for_model(proto, os.path.dirname(source) or ".")
        except Exception:   # noqa: BLE001 - read_model gives the located error for a bad file
            return model
    return to_qdq(proto, source) if is_qoperator(proto) else model


@dataclass
class _Rewriter:
    consts: dict[str, np.ndarray]
    names: set[str]
    source: str
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[onnx.TensorProto] = field(default_factory=list)
    dequantized: dict[tuple, str] = field(default_factory=dict)
    qparams: dict[str, tuple[str, str]] = field(default_factory=dict)   # integer tensor -> (scale, zp) names
    softmaxes: list[tuple[onnx.NodeProto, str, int, int]] = field(default_factory=list)   # node, y, opset, axis

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def const(self, base: str, array: np.ndarray) -> str:
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(array, name))
        self.consts[name] = array
        return name

    def error(self, node: onnx.NodeProto, what: str) -> UnsupportedOpError:
        op = node.op_type if node.domain in _ONNX else f"{node.domain}.{node.op_type}"
        return UnsupportedOpError(f"{self.source}: node {quote_name(node.name or node.output[0])} ({op}): {what}")

    def constant(self, name: str, node: onnx.NodeProto, what: str) -> np.ndarray:
        if name not in self.consts:
            raise self.error(node, f"its {what} {quote_name(name)} is computed in the graph; a QOperator model "
                                   f"converts when its scales are initializers (re-quantize it with ONNX Runtime)")
        return self.consts[name]

    def dq(self, x: str, scale: str, zp: str, axis: int | None = None) -> str:
        """The float value of ``x``: one DequantizeLinear per (tensor, parameters), shared by its readers.
        A constant keeps its float name (``w_quantized`` -> ``w``), an activation gets ONNX Runtime's
        QDQ name (``x_DequantizeLinear_Output``)."""
        key = (x, scale, zp, axis)
        if key not in self.dequantized:
            base = _float_name(x)
            out = self.fresh(base if x in self.consts else f"{base}_DequantizeLinear_Output")
            attrs = {"axis": axis} if axis is not None else {}
            self.nodes.append(helper.make_node("DequantizeLinear", [x, scale, zp] if zp else [x, scale], [out],
                                               name=self.fresh(f"{base}_DequantizeLinear"), **attrs))
            self.dequantized[key] = out
        return self.dequantized[key]

    def q(self, y_float: str, scale: str, zp: str, y: str) -> None:
        self.nodes.append(helper.make_node("QuantizeLinear", [y_float, scale, zp], [y],
                                           name=self.fresh(f"{y_float}_QuantizeLinear")))
        self.qparams[y] = (scale, zp)

    def float_op(self, node: onnx.NodeProto, op_type: str, inputs: list[str], y_scale: str, y_zp: str,
                 attrs: dict) -> str:
        """``op_type`` on the dequantized ``inputs``, quantized to ``(y_scale, y_zp)`` into the node's
        output (or writing the node's output in float when ``y_scale`` is empty); returns the float name."""
        y = node.output[0]
        y_float = self.fresh(_float_name(y)) if y_scale else y
        self.nodes.append(helper.make_node(op_type, inputs, [y_float], name=self.node_name(node), **attrs))
        if y_scale:
            self.q(y_float, y_scale, self.zero_point(y_zp, node), y)
        return y_float

    def node_name(self, node: onnx.NodeProto) -> str:
        """The name of the op that replaces ``node``: its own (ONNX Runtime's ``<name>_quant`` without the
        suffix), so repairs and errors name the node the user knows."""
        base = _node_base(node)
        return base if base == node.name else self.fresh(base)

    def zero_point(self, zp: str, node: onnx.NodeProto) -> str:
        """``zp``, or when the node omits it (zero point 0 of the input's type), an explicit 0 of the
        type of the node's first given zero point (QuantizeLinear would otherwise write uint8)."""
        if zp:
            return zp
        given = [self.consts[i] for i in node.input if i.endswith("zero_point") and i in self.consts]
        if not given:
            raise self.error(node, "its output zero point is omitted and no input zero point gives its type; "
                                   "give the zero point explicitly")
        return self.const(f"{node.output[0]}_zero_point", np.zeros((), given[0].dtype))


def _float_name(x: str) -> str:
    return x[: -len("_quantized")] if x.endswith("_quantized") else f"{x}_float"


def _node_base(node: onnx.NodeProto) -> str:
    return node.name[: -len("_quant")] if node.name.endswith("_quant") else (node.name or node.output[0])


def _attrs(node: onnx.NodeProto, drop: tuple[str, ...] = ()) -> dict:
    """The node's attributes for its float op; ``channels_last`` (0 here: ``to_qdq`` refuses 1) dropped."""
    return {a.name: helper.get_attribute_value(a) for a in node.attribute
            if a.name not in drop and a.name != "channels_last"}


def _inputs(node: onnx.NodeProto, n: int) -> list[str]:
    """The node's first ``n`` inputs, omitted trailing optional ones as ''."""
    return (list(node.input) + [""] * n)[:n]


def _axis(scale: np.ndarray, axis: int) -> int | None:
    return axis if scale.size > 1 else None


def _bias(r: _Rewriter, n: onnx.NodeProto, b: str, x_scale: np.ndarray, w_scale: np.ndarray, axis: int) -> str:
    """The int32 bias dequantized at the accumulator's scale ``f32(s_x · s_w)``, zero point 0."""
    s_x = np.float32(np.asarray(x_scale, np.float32).reshape(-1)[0])
    scale = (s_x * np.asarray(w_scale, np.float32)).astype(np.float32)
    if scale.size == 1:
        scale = scale.reshape(())
    s = r.const(f"{_float_name(b)}_scale", scale)
    z = r.const(f"{_float_name(b)}_zero_point", np.zeros(scale.shape, np.int32))
    return r.dq(b, s, z, _axis(scale, axis))


def _conv(r: _Rewriter, n: onnx.NodeProto) -> None:
    # QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B)
    x, xs, xz, w, ws, wz, ys, yz, b = _inputs(n, 9)
    w_scale = r.constant(ws, n, "weight scale")
    inputs = [r.dq(x, xs, xz), r.dq(w, ws, wz, _axis(w_scale, 0))]
    if b:
        inputs.append(_bias(r, n, b, r.constant(xs, n, "input scale"), w_scale, 0))
    r.float_op(n, "Conv", inputs, ys, yz, _attrs(n))


def _matmul(r: _Rewriter, n: onnx.NodeProto) -> None:
    # QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)
    a, as_, az, b, bs, bz, ys, yz = _inputs(n, 8)
    if r.constant(as_, n, "A scale").size > 1:
        raise r.error(n, "A is quantized per row; quantir converts per-tensor activations only")
    b_scale = r.constant(bs, n, "B scale")
    rank = r.consts[b].ndim if b in r.consts else 2
    r.float_op(n, "MatMul", [r.dq(a, as_, az), r.dq(b, bs, bz, _axis(b_scale, rank - 1))], ys, yz, {})


def _gemm(r: _Rewriter, n: onnx.NodeProto) -> None:
    # QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp); y = alpha·sa·sb·(A·B + C)
    a, as_, az, b, bs, bz, c, ys, yz = _inputs(n, 9)
    attrs = _attrs(n, drop=("alpha", "beta"))
    alpha = np.float32(_attrs(n).get("alpha", 1.0))
    b_scale = np.asarray(r.constant(bs, n, "B scale"), np.float32)
    if alpha != 1:   # alpha into B's scale, so the file's integers stay the weights
        b_scale = (alpha * b_scale).astype(np.float32)
        bs = r.const(f"{bs}_times_alpha", b_scale)
    inputs = [r.dq(a, as_, az), r.dq(b, bs, bz, _axis(b_scale, 0 if attrs.get("transB", 0) else 1))]
    if c:
        c_rank = r.consts[c].ndim if c in r.consts else 1
        inputs.append(_bias(r, n, c, r.constant(as_, n, "A scale"), b_scale, max(c_rank - 1, 0)))
    r.float_op(n, "Gemm", inputs, ys, yz, attrs)


def _concat(r: _Rewriter, n: onnx.NodeProto) -> None:
    # QLinearConcat(y_scale, y_zp, x0, x0_scale, x0_zp, x1, ...)
    ys, yz, *rest = n.input
    if len(rest) % 3:
        raise r.error(n, f"{len(rest)} inputs after y_scale and y_zero_point; expected (tensor, scale, zero point) "
                         f"triples")
    inputs = [r.dq(rest[i], rest[i + 1], rest[i + 2]) for i in range(0, len(rest), 3)]
    r.float_op(n, "Concat", inputs, ys, yz, _attrs(n))


def _binary(r: _Rewriter, n: onnx.NodeProto) -> None:
    # QLinearAdd / QLinearMul(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp)
    a, as_, az, b, bs, bz, ys, yz = _inputs(n, 8)
    r.float_op(n, _BINARY[n.op_type], [r.dq(a, as_, az), r.dq(b, bs, bz)], ys, yz, _attrs(n))


def _unary(r: _Rewriter, n: onnx.NodeProto) -> None:
    # QLinearSigmoid / LeakyRelu / AveragePool / GlobalAveragePool / Softmax(x, x_scale, x_zp, y_scale, y_zp)
    x, xs, xz, ys, yz = _inputs(n, 5)
    attrs = _attrs(n, drop=("opset",))
    opset = _attrs(n).get("opset")
    if n.op_type == "QLinearSoftmax":
        if opset is None:
            raise r.error(n, "no 'opset' attribute (required: it says which Softmax semantics the node has)")
        attrs["axis"] = attrs.get("axis", 1 if opset < 13 else -1)   # explicit: the defaults differ by opset
    y_float = r.float_op(n, _UNARY[n.op_type], [r.dq(x, xs, xz)], ys, yz, attrs)
    if n.op_type == "QLinearSoftmax":
        r.softmaxes.append((n, y_float, opset, attrs["axis"]))


def _pass_through(r: _Rewriter, n: onnx.NodeProto) -> None:
    """An op on the quantized integers (data input 0): the same op between a DQ and a Q at its
    input's parameters. Pad's constant value, an integer on that grid, becomes its real value."""
    scale, zp = r.qparams[n.input[0]]
    rest = list(n.input[1:])
    if n.op_type == "Pad" and len(rest) > 1 and rest[1]:
        q = r.constant(rest[1], n, "constant value").astype(np.int64)
        s = r.constant(scale, n, "input scale")
        z = r.constant(zp, n, "input zero point").astype(np.int64) if zp else np.int64(0)
        rest[1] = r.const(f"{rest[1]}_float", ((q - z) * np.asarray(s, np.float32)).astype(np.float32).reshape(()))
    outs = [r.fresh(_float_name(y)) for y in n.output]
    r.nodes.append(helper.make_node(n.op_type, [r.dq(n.input[0], scale, zp), *rest], outs,
                                    name=r.node_name(n), domain=n.domain, **_attrs(n)))
    for y_float, y in zip(outs, n.output):
        r.q(y_float, scale, zp, y)


def _index_output(r: _Rewriter, n: onnx.NodeProto) -> None:
    """ArgMax/ArgMin of the integers: the same indices as of the dequantized values (the map is increasing)."""
    scale, zp = r.qparams[n.input[0]]
    copy = onnx.NodeProto()
    copy.CopyFrom(n)
    copy.input[0] = r.dq(n.input[0], scale, zp)
    r.nodes.append(copy)


_REWRITE: dict[str, Callable[[_Rewriter, onnx.NodeProto], None]] = {
    "QLinearConv": _conv, "QLinearMatMul": _matmul, "QGemm": _gemm, "QLinearConcat": _concat,
    **{k: _binary for k in _BINARY}, **{k: _unary for k in _UNARY}}


def to_qdq(model: onnx.ModelProto, source: str = "<ModelProto>") -> onnx.ModelProto:
    """A copy of ``model`` with every QOperator node in QDQ form (``model`` is not modified).
    Raises ``UnsupportedOpError`` naming the node (and ``source``) for a quantized op with no QDQ
    form here, or one whose semantics the rewrite cannot keep."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.domain in _ONNX and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    names = {v for n in g.node for v in [*n.input, *n.output, n.name]} | set(consts)
    names |= {v.name for v in [*g.input, *g.output]}
    # value_info describes the float model ONNX Runtime quantized (stale names and types here)
    del g.value_info[:]
    r = _Rewriter(consts, names, source)
    for n in g.node:
        if n.op_type == "QuantizeLinear" and n.domain in (*_ONNX, MS):
            r.nodes.append(n)
            r.qparams[n.output[0]] = (n.input[1], n.input[2] if len(n.input) > 2 else "")
        elif n.op_type in _REWRITE and (n.domain == MS or (n.domain in _ONNX and n.op_type in _ONNX_QUANTIZED)):
            if any(a.name == "channels_last" and a.i for a in n.attribute):
                raise r.error(n, "channels_last=1 (NHWC); quantir converts the NCHW form only")
            _REWRITE[n.op_type](r, n)
        elif is_quantized_node(n):
            hint = ("dynamic quantization (no output scale) has no QDQ form; quantize the float model with "
                    "`quantir quantize` or ONNX Runtime's quantize_static" if n.op_type in _DYNAMIC else
                    f"quantir rewrites {', '.join(sorted(_REWRITE))}")
            raise r.error(n, f"a quantized op with no QDQ rewrite: {hint}")
        elif n.input and n.input[0] in r.qparams and n.domain in _ONNX and n.op_type in _PASS_THROUGH:
            _pass_through(r, n)
        elif n.input and n.input[0] in r.qparams and n.domain in _ONNX and n.op_type in _INDEX_OUTPUT:
            _index_output(r, n)
        elif n.op_type != "DequantizeLinear" and any(i in r.qparams for i in n.input):
            raise r.error(n, f"reads the quantized tensor {quote_name(next(i for i in n.input if i in r.qparams))} "
                             f"directly; quantir rewrites {', '.join(sorted(_PASS_THROUGH | _INDEX_OUTPUT))} "
                             f"on quantized data")
        else:
            r.nodes.append(n)
    del g.node[:]
    g.node.extend(r.nodes)
    g.initializer.extend(r.inits)
    if not any(n.domain == MS for n in g.node):
        keep = [o for o in out.opset_import if o.domain != MS]
        del out.opset_import[:]
        out.opset_import.extend(keep)
    if r.softmaxes:
        _check_softmaxes(r, out)
    return out


def _check_softmaxes(r: _Rewriter, model: onnx.ModelProto) -> None:
    """Each rewritten softmax means what its QLinearSoftmax meant. Before opset 13 Softmax flattens
    the input to 2-D at ``axis`` (default 1) and normalizes over all dims from it; from 13 it
    normalizes over ``axis`` alone (default -1). The two agree when the axis is the last one. The
    emitted Softmax has the semantics of the model's opset; ranks come from ONNX shape inference
    on the rewritten (float-op) model."""
    model_opset = next((o.version for o in model.opset_import if o.domain in _ONNX), 13)
    ranks = _ranks(model)
    for n, y_float, opset, axis in r.softmaxes:
        rank = ranks.get(y_float)
        last = axis == -1 or (rank is not None and axis == rank - 1)
        if (opset < 13 or model_opset < 13) and not last:
            reason = (f"(opset {opset}) normalizes over all dimensions from axis {axis} together"
                      if opset < 13 else f"normalizes over axis {axis} of a model at opset {model_opset}, whose "
                                         f"Softmax would flatten from that axis")
            where = "" if rank is not None else " (rank unknown)"
            raise r.error(n, f"QLinearSoftmax {reason}{where}; quantir converts a quantized softmax over the last "
                             f"axis only")


def _ranks(model: onnx.ModelProto) -> dict[str, int]:
    """Ranks of the graph's tensors by ONNX shape inference (best effort: {} when it fails)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:   # noqa: BLE001 - ranks only sharpen one check, which refuses without them
        return {}
    return {v.name: len(v.type.tensor_type.shape.dim) for v in [*inferred.graph.value_info, *inferred.graph.input,
                                                                  *inferred.graph.output]
            if v.type.tensor_type.HasField("shape")}


__all__ = ["as_qdq", "is_qoperator", "is_qoperator_file", "is_quantized_node", "to_qdq"]
