"""The integer (``qnn``) module as an ONNX model for ONNX Runtime: QDQ or QOperator format.

>>> model = to_onnx_quantized(result.module, format="qdq")          # doctest: +SKIP
>>> save_quantized(result.module, "model.int8.onnx", format="qoperator")   # doctest: +SKIP

Design notes
- Export is a conversion, then the ordinary exporter. ``qnn`` ops have no ONNX twin, so
  ``convert`` first rewrites the integer function into an *ONNX-shaped* one, op by op from a
  table (``qdq.CONVERT`` or ``qoperator.CONVERT``), using only what the ``nn``/``quant``
  exporter already writes: float ``nn`` ops, ``quant.qcast``/``quant.dcast`` (→
  QuantizeLinear/DequantizeLinear, ``quant.py``), ``nn.qlinear_conv``, ``nn.clip`` on int8,
  ``nn.dequantize_linear`` (for int32 bias, which ``quant.dcast`` does not export), and
  ``nn.onnx_op`` for the ``com.microsoft`` contrib ops. ``exporter.export`` then names values,
  writes initializers, checks every node's types against the ONNX schema and emits the graph,
  so names and initializers behave exactly as in a float export.
- **QDQ** (what ``onnxruntime.quantization`` writes with ``QuantFormat.QDQ``): every qnn op
  becomes its float ONNX op between DequantizeLinear of its inputs and QuantizeLinear of its
  result, with int8 per-channel weights and int32 bias as initializers behind
  DequantizeLinear. Each quantized tensor has exactly one Q (where it is made) and one DQ
  (shared by all its consumers, and reused for the function's own ``quant.dcast``), so a CNN
  keeps one Q at its input and one DQ at its output plus one Q/DQ pair per op boundary; ONNX
  Runtime fuses DQ → op → Q into its integer kernels.
- **QOperator**: ops ONNX Runtime runs on int8 directly (QLinearConv, QGemm, QLinearAdd,
  QLinearMul, QLinearAveragePool, QLinearGlobalAveragePool, QLinearConcat, QLinearSigmoid,
  QLinearLeakyRelu, QLinearSoftmax, MaxPool, Pad, Clip, nearest Resize (or Gather), and the
  data-movement ops); any qnn op without one (Sub, Tanh, HardSwish, bilinear Resize, ReduceMean,
  requantize) takes its QDQ form:
  DequantizeLinear → float op → QuantizeLinear.
- Fused activations. LiteRT clamps the requantized result to ``CalculateActivationRangeQuantized``
  (``numerics.fused_activation_range``). When that range is the whole int8 range the clamp is
  a no-op and nothing is emitted (the usual case: a ReLU output has zero point -128). Otherwise
  QDQ emits Relu / Clip(0, 6) / Clip(-1, 1) before the output QuantizeLinear and QOperator an
  int8 Clip to the exact integer range after the QLinear op.
- Numerics (docs/numerics.md §4.5, §4.6). ONNX Runtime requantizes with a float32 multiplier
  and rounds half to even; LiteRT (the reference interpreter) uses 31-bit fixed point and
  rounds half away from zero. Each op alone is within ±1 step of the interpreter (a few tenths
  of a percent of the elements of a conv; ~10% for mean, leaky_relu and mul, whose LiteRT
  kernels truncate a folded 1/N or round many exact ties); through a network these differences
  grow wherever an op's output scale is finer than its input's. Max pool, pad, concat, clamps
  on equal parameters and data movement are exact.
- Weights. ``arith.constant`` + ``quant.scast`` becomes one ``arith.constant`` whose type is the
  quantized type itself (a form only this internal module uses; it is never printed), so the
  exporter writes a plain int8/int32 initializer that DequantizeLinear or QLinearConv reads
  directly, with no Identity in between. Names come from the consumer: ``conv1_w``,
  ``conv1_bias``, and ``<tensor>_scale`` / ``<tensor>_zero_point`` for parameters.
- ONNX Runtime on x86 runs int8-activation QDQ groups as integer kernels only after turning
  each Q → DQ pair into uint8 (``QDQS8ToU8Transformer``), which it cannot do for a Q whose
  tensor feeds several ops (a residual branch): those ops then run in float between their Q/DQ
  nodes — correct, slower. ONNX Runtime's own quantizer (``QuantType.QInt8`` activations) gives
  the same graph and the same result; the QOperator export is all integer kernels.
- ``activations="uint8"`` (both formats) avoids that: every int8 activation tensor is written as
  uint8 with the same scale and its zero point (and storage range) moved up by 128 — stored
  value ``q + 128`` for ``q``, so every DequantizeLinear gives the same real numbers and every
  QuantizeLinear the same steps (saturation included) as the int8 form: the same model,
  re-encoded. Weights stay int8 (per-channel, symmetric) and bias int32, which is ONNX
  Runtime's preferred x86 form (U8S8): it fuses every DQ → op → Q group, residual branches
  included, with no S8→U8 conversion, and its QOperator int8 kernels are U8S8 as well.
  On EfficientNet-Lite0 ONNX Runtime 1.32 makes all 49 convolutions and 9 adds QLinearConv /
  QLinearAdd, against 35 QLinearConv + 14 float Conv + 9 float Add for int8 activations; QDQ
  latency (batch 32, one thread) 0.48× fp32 against 0.87×, and the QOperator form 0.49×
  against 6× (bench/quantize_vs_ort.py). Same outputs as the int8 form within ONNX Runtime's
  one-step kernel differences (tests/backends/onnx/test_uint8_activations.py).
  Caveat from ONNX Runtime's docs: on x86 CPUs with AVX2 but without VNNI, U8S8 kernels use
  VPMADDUBSW, whose int16 pair sums can saturate for large weights times large activations
  (ORT's ``reduce_range`` exists for this); AVX512-VNNI/AVX-VNNI CPUs are exact. The int8 form
  takes the same U8S8 kernels wherever ORT fuses it, so this is not a new risk. The function's
  own inputs and outputs must be float (as ``quantir.quantize`` makes them); integer
  interfaces keep the int8 form.
"""
from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import onnx

from ...errors import QuantirError, UnsupportedOpError
from ...fileio import check_output
from ...ir import Block, Function, Module, Operation, Value, elements_attr, verify_function
from ...ir.attributes import DenseElementsAttr, DenseResourceAttr, IntegerAttr
from ...ir.dialects import arith, nn, qnn, quant
from ...ir.opdef import OpDef
from ...numerics import fused_activation_range
from ...types import IntegerType, QuantizedType, TensorType, Type, UniformQuantizedPerAxisType, UniformQuantizedType
from .dtypes import numpy_dtype
from .exporter import write_model

__all__ = ["to_onnx_quantized", "save_quantized", "convert", "uint8_activations", "FORMATS", "ACTIVATIONS",
           "Builder"]

FORMATS = ("qdq", "qoperator")
ACTIVATIONS = ("int8", "uint8")   # storage of activation tensors in the export (weights are always int8)
CONTRIB_DOMAIN = "com.microsoft"
CONTRIB_OPSET = 1

Converter = Callable[["Builder", Operation], None]


# -- types ----------------------------------------------------------------------------------------

def qtype(t: Type) -> QuantizedType | None:
    """The quantized element type of a tensor type, else None."""
    et = t.element_type if isinstance(t, TensorType) else t
    return et if isinstance(et, (UniformQuantizedType, UniformQuantizedPerAxisType)) else None


def is_quantized(v: Value) -> bool:
    return qtype(v.type) is not None


def float_type(t: TensorType) -> TensorType:
    """The dequantized view of a quantized tensor type (its expressed type, f32)."""
    return t.clone(element_type=qtype(t).expressed_type)


def scale_array(t: Type) -> np.ndarray:
    """Scales as ONNX takes them: float32, a scalar per tensor, 1-D per axis."""
    q = qtype(t)
    return np.asarray(q.scales if isinstance(q, UniformQuantizedPerAxisType) else q.scale, np.float32)


def zero_point_array(t: Type, what: str) -> np.ndarray:
    """Zero points in the storage type (int8), shaped like ``scale_array``."""
    q = qtype(t)
    zps = q.zero_points if isinstance(q, UniformQuantizedPerAxisType) else q.zero_point
    if zps is None:
        zps = (0,) * len(q.scales)
    return np.asarray(zps).astype(numpy_dtype(t, what))


def same_params(a: Type, b: Type) -> bool:
    """Equal scales (as float32, what both runtimes use) and zero points."""
    qa, qb = qtype(a), qtype(b)
    return (type(qa) is type(qb) and np.array_equal(scale_array(a), scale_array(b))
            and np.array_equal(zero_point_array(a, "a"), zero_point_array(b, "b")))


def activation_of(op: Operation) -> str:
    """The fused activation of a qnn op, lower case as ``numerics`` spells it."""
    return (op.attr("activation") or "NONE").lower() if "activation" in op.opdef.attributes else "none"


def activation_range(op: Operation) -> tuple[int, int] | None:
    """The integer clamp LiteRT applies to ``op``'s result, or None when it is the whole storage
    range (the clamp then changes nothing and is not exported)."""
    t = op.results[0].type
    q = qtype(t)
    act = activation_of(op)
    if act == "none":
        return None
    lo, hi = fused_activation_range(act, np.float32(q.scale), int(q.zero_point), q.storage_min, q.storage_max)
    return None if (lo, hi) == (q.storage_min, q.storage_max) else (lo, hi)


def base_name(v: Value) -> str:
    """A value's name without the lowering's ``__q``/``__q<k>`` suffix (``c1__q`` -> ``c1``)."""
    return re.sub(r"__q\d*$", "", v.name_hint or "t") or "t"


def constant_array(v: Value) -> np.ndarray | None:
    """The full array of a value made by ``arith.constant`` (splats expanded), else None."""
    op = getattr(v, "op", None)
    if op is None or op.opdef is not arith.CONSTANT:
        return None
    value = op.attributes.get("value")
    array = getattr(value, "array", None)
    if isinstance(value, DenseResourceAttr) and array is None:
        raise UnsupportedOpError(f"constant '{v.name_hint}' is an elided dense_resource blob; its data is not in "
                                 f"the module (print the IR with `quantir show --elide -1` to keep the data)")
    if array is None:
        return None
    array = np.asarray(array)
    shape = getattr(v.type, "shape", None)
    if shape is not None and None not in shape and array.shape != tuple(shape) and array.size == 1:
        array = np.broadcast_to(array.reshape(()), shape)
    return array


# -- the conversion context -------------------------------------------------------------------------

class Builder:
    """Rewrites one integer function into its ONNX-shaped twin; what converters build with.

    Every source value has a *new* version of the same type (``value``); a quantized source
    value also has one *dequantized* version (``dequantized``), made on first use and shared.
    Converters map a qnn op's result with ``define`` (an integer value) or ``quantize`` (a
    float value, through QuantizeLinear).
    """

    def __init__(self, src: Function, table: Mapping[OpDef, Converter], format: str, opset: int):
        self.src = src
        self.table = table
        self.format = format
        self.opset = opset
        self.fn = Function(src.name, src.type, body=Block([a.type for a in src.arguments]),
                           arg_attrs=[dict(a) for a in src.arg_attrs], res_attrs=[dict(r) for r in src.res_attrs],
                           attributes=dict(src.attributes), loc=src.loc)
        self._new: dict[Value, Value] = {}
        self._floats: dict[Value, Value] = {}
        self._consts: dict[tuple, Value] = {}
        self._done: set[Operation] = set()
        # the function's own dcast of a value is its one DequantizeLinear, emitted where first needed
        self._dcasts: dict[Value, Operation] = {}
        for op in src.ops:
            if op.opdef is quant.DCAST:
                self._dcasts.setdefault(op.operands[0], op)
        for old, new in zip(src.arguments, self.fn.arguments):
            new.name_hint = old.name_hint
            self._new[old] = new

    # -- the pass -------------------------------------------------------------------------------
    def run(self) -> Function:
        for op in self.src.ops:
            if op in self._done:
                continue
            convert = self.table.get(op.opdef)
            if convert is not None:
                convert(self, op)
            elif op.opdef.dialect == "qnn":
                known = ", ".join(sorted(d.name for d in self.table if d.dialect == "qnn"))
                raise UnsupportedOpError(f"{op.describe()} has no {self.format.upper()} ONNX export "
                                         f"(exported qnn ops: {known})")
            elif op.opdef is quant.SCAST and constant_array(op.operands[0]) is not None:
                r = op.results[0]
                self.define(r, self.stored_constant(constant_array(op.operands[0]), r.type, self.name_of(r)))
            elif op.opdef is quant.DCAST and op.operands[0] not in self._floats:
                x = op.operands[0]
                self._floats[x] = self.clone(op, label=f"{self.name_of(x)}/dequantize")[0]
            elif op.opdef is quant.QCAST:
                self.clone(op, label=f"{base_name(op.results[0])}/quantize")
            else:
                self.clone(op)
            self._done.add(op)
        verify_function(self.fn)
        return self.fn

    # -- values ---------------------------------------------------------------------------------
    def value(self, v: Value) -> Value:
        """The new version of source value ``v`` (same type)."""
        try:
            return self._new[v]
        except KeyError:
            raise QuantirError(f"value '{v.name_hint}' is used before it is defined") from None

    def define(self, src: Value, new: Value) -> None:
        new.name_hint = src.name_hint or new.name_hint
        self._new[src] = new

    def dequantized(self, v: Value) -> Value:
        """The float version of source value ``v``: one DequantizeLinear per quantized value."""
        if not is_quantized(v):
            return self.value(v)
        if v in self._floats:
            return self._floats[v]
        own = self._dcasts.get(v)
        if own is not None and own not in self._done:
            # the function's own dcast (an output) is moved up to here
            out = self.clone(own, label=f"{self.name_of(v)}/dequantize")[0]
            self._done.add(own)
        elif qtype(v.type).storage_type.width == 32:
            # int32 bias: quant.py exports 8/16-bit storage only; DequantizeLinear takes int32 (zp 0)
            q = qtype(v.type)
            axis = {"axis": q.quantized_dimension} if isinstance(q, UniformQuantizedPerAxisType) else {}
            out = self.emit(nn.DEQUANTIZE_LINEAR, [self.value(v), self.scale(v), self.zero_point(v)],
                            float_type(v.type), name=f"{self.name_of(v)}__dq", label=f"{self.name_of(v)}/dequantize",
                            **axis)
        else:
            out = self.emit(quant.DCAST, [self.value(v)], float_type(v.type), name=f"{self.name_of(v)}__dq",
                            label=f"{self.name_of(v)}/dequantize")
        self._floats[v] = out
        return out

    def quantize(self, src: Value, x: Value) -> Value:
        """QuantizeLinear of the float ``x`` to ``src``'s type; the result becomes ``src``."""
        out = self.emit(quant.QCAST, [x], src.type, name=src.name_hint, label=f"{base_name(src)}/quantize")
        self.define(src, out)
        return out

    # -- constants ------------------------------------------------------------------------------
    def const(self, array: np.ndarray, name: str) -> Value:
        """An ``arith.constant`` named ``name`` (reused when asked again for the same name and array)."""
        array = np.asarray(array, order="C")   # (np.ascontiguousarray would make a scalar 1-D)
        key = (name, array.dtype.str, array.shape, array.tobytes()) if array.size <= 4096 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        attr = elements_attr(array)
        out = self.append(arith.CONSTANT.build([], [attr.type], value=attr)).results[0]
        out.name_hint = name
        if key is not None:
            self._consts[key] = out
        return out

    def stored_constant(self, ints: np.ndarray, t: TensorType, name: str | None) -> Value:
        """Storage integers typed directly with their quantized type (what ``arith.constant`` +
        ``quant.scast`` express): the exporter writes it as one int8/int32 initializer, with no
        Identity between the initializer and its DequantizeLinear."""
        attr = DenseElementsAttr(np.asarray(ints, order="C").astype(numpy_dtype(t, f"constant '{name}'")), t)
        out = self.append(arith.CONSTANT.build([], [t], value=attr)).results[0]
        out.name_hint = name
        return out

    def scale(self, v: Value) -> Value:
        """The scale of quantized source value ``v``, an initializer named after ``v`` (as ONNX
        Runtime's quantizer names them)."""
        return self.const(scale_array(v.type), f"{self.name_of(v)}_scale")

    def zero_point(self, v: Value) -> Value:
        name = self.name_of(v)
        return self.const(zero_point_array(v.type, f"value '{name}'"), f"{name}_zero_point")

    def qparams(self, v: Value) -> list[Value]:
        """``[x, x_scale, x_zero_point]`` of a quantized source value, as QLinear ops take them."""
        return [self.value(v), self.scale(v), self.zero_point(v)]

    def name_of(self, v: Value) -> str:
        """A readable base name: the value's own, else its first user's label and operand role
        (``conv1_w`` for the weights of the conv labelled ``conv1``)."""
        if v.name_hint:
            return base_name(v)
        for user, index in v.uses:
            if user.opdef is quant.SCAST and user.results[0].uses:
                return self.name_of(user.results[0])
            if user.label and index < len(user.opdef.operands):
                return f"{user.label}_{user.opdef.operands[index].name}"
        return "t"

    # -- ops ------------------------------------------------------------------------------------
    def emit(self, opdef: OpDef, operands: Sequence[Value], result_type: Type, *, name: str | None,
             label: str | None, like: Operation | None = None, **attrs) -> Value:
        op = opdef.build(list(operands), [result_type], loc=like.loc if like is not None else None, label=label,
                         **attrs)
        out = self.append(op).results[0]
        out.name_hint = name
        return out

    def float_op(self, opdef: OpDef, operands: Sequence[Value], op: Operation, *, suffix: str = "", **attrs) -> Value:
        """A float ONNX op standing for qnn ``op``: result shaped like ``op``'s, float32."""
        r = op.results[0]
        label = (op.label or base_name(r)) + suffix
        return self.emit(opdef, operands, float_type(r.type), name=base_name(r) + suffix.replace("/", "_"),
                         label=label, like=op, **attrs)

    def contrib(self, op_type: str, inputs: Sequence[Value | None], op: Operation, *, name: str | None = None,
                result_type: Type | None = None, **attrs) -> Value:
        """A ``com.microsoft`` node standing for qnn ``op`` (an ``nn.onnx_op`` carrying its NodeProto),
        of ``op``'s result type unless given; a None input is an absent optional input."""
        node = onnx.helper.make_node(op_type, [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)],
                                     ["y"], domain=CONTRIB_DOMAIN, **attrs)
        r = op.results[0]
        return self.emit(nn.ONNX_OP, [v for v in inputs if v is not None], result_type or r.type,
                         name=name or r.name_hint,
                         label=op.label, like=op, op_type=op_type, domain=CONTRIB_DOMAIN, opset=CONTRIB_OPSET,
                         node=base64.b64encode(node.SerializeToString()).decode("ascii"))

    def clone(self, op: Operation, label: str | None = None) -> list[Value]:
        """``op`` unchanged (labelled ``label`` when it has none), on the new versions of its operands."""
        new = Operation(op.opdef, [self.value(v) for v in op.operands], [r.type for r in op.results],
                        dict(op.attributes), op.loc, op.label or label)
        self.append(new)
        for old, r in zip(op.results, new.results):
            self.define(old, r)
        return list(new.results)

    def append(self, op: Operation) -> Operation:
        return self.fn.body.append(op)


# -- the public API -----------------------------------------------------------------------------------

def _table(format: str) -> Mapping[OpDef, Converter]:
    from . import qdq, qoperator   # they build on this module
    return {"qdq": qdq.CONVERT, "qoperator": qoperator.CONVERT}[format]


def _check_format(format: str) -> str:
    f = str(format).lower()
    if f not in FORMATS:
        raise QuantirError(f"unknown quantized ONNX format '{format}': use 'qdq' or 'qoperator'")
    return f


def _check_activations(activations: str) -> str:
    a = str(activations).lower()
    if a not in ACTIVATIONS:
        raise QuantirError(f"unknown activation storage '{activations}': use 'int8' or 'uint8'")
    return a


def _uint8_type(t: Type) -> Type | None:
    """``t`` with int8 per-tensor storage moved to uint8 (zero point and storage range + 128), else None."""
    q = qtype(t)
    if not isinstance(q, UniformQuantizedType) or not q.is_signed or not isinstance(q.storage_type, IntegerType) \
            or q.storage_type.width != 8:
        return None
    u = UniformQuantizedType(storage_type=IntegerType(8), is_signed=False, expressed_type=q.expressed_type,
                             scale=q.scale, zero_point=int(q.zero_point) + 128, storage_min=q.storage_min + 128,
                             storage_max=q.storage_max + 128)
    return t.clone(element_type=u) if isinstance(t, TensorType) else u


def uint8_activations(fn: Function) -> Function:
    """A copy of the integer function with every int8 per-tensor activation stored as uint8.

    Same scales; zero points, storage ranges and stored integers move up by 128, so each
    tensor holds the same real values and every clamp, pad value and rounding is the same
    step. Weights (operand ``w`` of conv / fully_connected, kept int8 even if per-tensor),
    per-axis types and int32 bias are unchanged. Raises ``UnsupportedOpError`` when an input
    or output of the function is an int8 tensor (its type would change).
    """
    weights = {op.operands[1] for op in fn.ops if op.opdef in (qnn.CONV, qnn.FULLY_CONNECTED)
               and len(op.operands) > 1}
    interface = [v for v in list(fn.arguments) + list(fn.outputs) if v not in weights and _uint8_type(v.type)]
    if interface:
        raise UnsupportedOpError(f"uint8 activations need float inputs and outputs; '{interface[0].name_hint}' is "
                                 f"{interface[0].type} (export with activations='int8')")
    out = Function(fn.name, fn.type, body=Block([a.type for a in fn.arguments]),
                   arg_attrs=[dict(a) for a in fn.arg_attrs], res_attrs=[dict(r) for r in fn.res_attrs],
                   attributes=dict(fn.attributes), loc=fn.loc)
    new: dict[Value, Value] = {}
    for old, a in zip(fn.arguments, out.arguments):
        a.name_hint = old.name_hint
        new[old] = a
    for op in fn.ops:
        types = [r.type if r in weights else (_uint8_type(r.type) or r.type) for r in op.results]
        operands = [new[v] for v in op.operands]
        attributes = dict(op.attributes)
        changed = any(t is not r.type for t, r in zip(types, op.results))
        if changed and op.opdef is quant.SCAST:
            # a stored constant: its integers move with the zero point
            ints = constant_array(op.operands[0])
            if ints is None:
                raise UnsupportedOpError(f"{op.describe()}: reinterpreting a computed int8 tensor as "
                                         f"quantized has no uint8 form")
            shifted = (np.asarray(ints).astype(np.int16) + 128).astype(np.uint8)
            attr = elements_attr(shifted, IntegerType(8))
            c = out.body.append(arith.CONSTANT.build([], [attr.type], value=attr)).results[0]
            c.name_hint = op.operands[0].name_hint
            operands = [c]
        elif changed and op.opdef is arith.CONSTANT:
            raise UnsupportedOpError(f"{op.describe()}: a constant typed int8-quantized has no uint8 form")
        elif changed and op.opdef is qnn.PAD and op.attr("value") is not None:
            attributes["value"] = IntegerAttr(int(op.attr("value")) + 128, attributes["value"].type)
        copy = Operation(op.opdef, operands, types, attributes, op.loc, op.label)
        out.body.append(copy)
        for o, r in zip(op.results, copy.results):
            r.name_hint = o.name_hint
            new[o] = r
    return out


def convert(module: Module | Function, *, format: str = "qdq", opset: int | None = None,
            activations: str = "int8") -> Module:
    """The ONNX-shaped twin of ``module``'s main function (what ``to_onnx_quantized`` exports);
    useful to inspect as text. Raises ``UnsupportedOpError`` naming a qnn op without an export."""
    from . import DEFAULT_OPSET
    f = _check_format(format)
    fn = module.main if isinstance(module, Module) else module
    if _check_activations(activations) == "uint8":
        fn = uint8_activations(fn)
    out = Builder(fn, _table(f), f, DEFAULT_OPSET if opset is None else int(opset)).run()
    return Module([out], name=module.name if isinstance(module, Module) else None)


def to_onnx_quantized(module: Module | Function, *, format: str = "qdq", opset: int | None = None,
                      activations: str = "int8") -> onnx.ModelProto:
    """The integer module as an ONNX model that ONNX Runtime runs with its int8 kernels.

    ``format``: ``"qdq"`` (float ops between QuantizeLinear/DequantizeLinear, int8 per-channel
    weights and int32 bias behind DequantizeLinear) or ``"qoperator"`` (QLinearConv, QGemm and
    the ``com.microsoft`` QLinear* ops). ``opset`` defaults to 21. ``activations``: ``"int8"``
    (the integer module's own storage) or ``"uint8"`` (the same values re-encoded with zero
    points + 128, which ONNX Runtime on x86 fuses completely; see the module notes). Raises
    ``UnsupportedOpError`` for an op with no export in that format.
    """
    from . import DEFAULT_OPSET, to_onnx
    f = _check_format(format)
    a = _check_activations(activations)
    opset = DEFAULT_OPSET if opset is None else int(opset)
    model = to_onnx(convert(module, format=f, opset=opset, activations=a), opset=opset)
    model.doc_string = f"quantir int8 export, {f.upper()} format" + (", uint8 activations" if a == "uint8" else "")
    return model


def save_quantized(module: Module | Function, path: "str | os.PathLike", *, format: str = "qdq",
                   opset: int | None = None, activations: str = "int8") -> Path:
    """Export (see ``to_onnx_quantized``) and write ``path`` atomically: the model is built and
    serialized before the file is touched, then written to a temporary file and renamed, so
    ``path`` is the old file or the complete new one, never a partial one."""
    path = Path(path)
    check_output(path)  # a missing directory or a read-only one fails before the export, not after
    write_model(to_onnx_quantized(module, format=format, opset=opset, activations=activations), path)
    return path
