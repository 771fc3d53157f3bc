"""What the QDQ and QOperator converters build with: quantized-type helpers and ``Builder``.

``Builder`` rewrites one integer (``qnn``) function into an *ONNX-shaped* twin, op by op from a
table of converters (``qdq.CONVERT``, ``qoperator.CONVERT``): a converter reads the qnn op and
emits float ``nn`` ops, ``quant.qcast``/``quant.dcast``, QLinear ops or ``com.microsoft``
contrib nodes through the builder, which keeps the value map (``value``), one shared
DequantizeLinear per quantized value (``dequantized``) and the initializers' names. The
tables build on this module and the entry points (``quantized.py``) on the tables, so nothing
here imports either.

Design notes
- Weights. ``arith.constant`` + ``quant.scast`` becomes one ``arith.constant`` whose type is the
  quantized type itself (a form only this internal module uses; it is never printed), so the
  exporter writes a plain int8/int32 initializer that DequantizeLinear or QLinearConv reads
  directly, with no Identity in between. Names come from the consumer: ``conv1_w``,
  ``conv1_bias``, and ``<tensor>_scale`` / ``<tensor>_zero_point`` for parameters.
"""
from __future__ import annotations

import base64
from typing import Callable, Mapping, Sequence

import numpy as np
import onnx

from ...errors import UnsupportedOpError
from ...ir import Function, Operation, Value, verify_function
from ...ir.attributes import DenseElementsAttr, DenseResourceAttr
from ...ir.builder import OpBuilder, function_like
from ...ir.dialects import arith, nn, quant
from ...ir.mapping import IRMapping
from ...ir.opdef import OpDef
from ...numerics import fused_activation_range
from ...types import QuantizedType, TensorType, Type, UniformQuantizedPerAxisType, UniformQuantizedType
from ...quantize.naming import float_name
from .dtypes import numpy_dtype

__all__ = ["Builder", "Converter", "CONTRIB_DOMAIN", "CONTRIB_OPSET", "qtype", "is_quantized", "float_type",
           "scale_array", "zero_point_array", "same_params", "activation_of", "activation_range", "pool_attributes",
           "base_name",
           "constant_array"]

CONTRIB_DOMAIN = "com.microsoft"
CONTRIB_OPSET = 1

Converter = Callable[["Builder", Operation], None]


# -- types ----------------------------------------------------------------------------------------

def qtype(t: Type) -> QuantizedType | None:
    """The quantized element type of a tensor type, else None."""
    et = t.element_type if isinstance(t, TensorType) else t
    return et if isinstance(et, (UniformQuantizedType, UniformQuantizedPerAxisType)) else None


def _sixteen_bit(v: Value | None) -> bool:
    q = qtype(v.type) if v is not None else None
    return q is not None and q.storage_width == 16


def touches_16_bit(op: Operation) -> bool:
    """Does ``op`` read or write a 16-bit quantized value (which 8-bit QLinear kernels cannot take)?"""
    return any(_sixteen_bit(v) for v in [*op.operands, *op.results])


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


def pool_attributes(op: Operation) -> dict:
    """ONNX's pool attributes of a qnn pool op: kernel_shape, strides, and pads or auto_pad."""
    kernel = tuple(op.attr("kernel_shape"))
    pads = ({"auto_pad": op.attr("auto_pad")} if op.attr("auto_pad") else
            {"pads": tuple(op.attr("pads") or (0,) * (2 * len(kernel)))})
    return {"kernel_shape": kernel, "strides": tuple(op.attr("strides") or (1,) * len(kernel)), **pads}


def base_name(v: Value) -> str:
    """A value's name without the lowering's ``__q``/``__q<k>`` suffix (``c1__q`` -> ``c1``)."""
    return float_name(v.name_hint)


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

    def __init__(self, src: Function, table: Mapping[OpDef, Converter], format: str, opset: int,
                 wide: Mapping[OpDef, Converter] | None = None):
        self.src = src
        self.table = table
        # the converters of ops that read or write 16-bit values, where ``table``'s are 8-bit only
        # (ONNX Runtime's QLinear* ops): the QDQ form, which int16 Q/DQ carries
        self.wide = wide
        self.format = format
        self.opset = opset
        self.fn = function_like(src)
        self.builder = OpBuilder.at_end(self.fn)
        self._new: IRMapping[Value] = IRMapping()
        self._new.map_all(src.arguments, self.fn.arguments)
        self._floats: IRMapping[Value] = IRMapping()
        self._consts: dict[tuple, Value] = {}
        self._done: set[Operation] = set()
        # the function's own dcast of a value is its one DequantizeLinear, emitted where first needed
        self._dcasts: dict[Value, Operation] = {}
        # the qnn ops whose conversion computes in float and quantizes again (their QDQ form): what
        # an export to 8-bit QLinear kernels could not express
        self.requantized: list[Operation] = []
        for op in src.ops:
            if op.opdef is quant.DCAST:
                self._dcasts.setdefault(op.operands[0], op)

    # -- the pass -------------------------------------------------------------------------------
    def run(self) -> Function:
        for op in self.src.ops:
            if op in self._done:
                continue
            convert = self.table.get(op.opdef)
            if self.wide is not None and touches_16_bit(op):
                convert = self.wide.get(op.opdef, convert)
            if convert is not None:
                before = len(self.fn.body.ops)
                convert(self, op)
                if op.opdef.dialect == "qnn" and any(o.opdef is quant.QCAST for o in self.fn.body.ops[before:]):
                    self.requantized.append(op)
            elif op.opdef.dialect == "qnn":
                known = ", ".join(sorted(d.name for d in self.table if d.dialect == "qnn"))
                raise UnsupportedOpError(f"{op.describe()} has no {self.format.upper()} ONNX export "
                                         f"(exported qnn ops: {known})")
            elif op.opdef is quant.SCAST and constant_array(op.operands[0]) is not None:
                r = op.results[0]
                self.define(r, self.stored_constant(constant_array(op.operands[0]), r.type, self.name_of(r)))
            elif op.opdef is quant.DCAST and op.operands[0] not in self._floats:
                x = op.operands[0]
                self._floats.map(x, self.clone(op, label=f"{self.name_of(x)}/dequantize")[0])
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
        return self._new.lookup(v)

    def define(self, src: Value, new: Value) -> None:
        new.name_hint = src.name_hint or new.name_hint
        self._new.map(src, new)

    def dequantized(self, v: Value) -> Value:
        """The float version of source value ``v``: one DequantizeLinear per quantized value."""
        if not is_quantized(v):
            return self.value(v)
        have = self._floats.lookup_or_none(v)
        if have is not None:
            return have
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
        return self._floats.map(v, out)

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
        out = self.builder.constant(array, name=name)
        if key is not None:
            self._consts[key] = out
        return out

    def stored_constant(self, ints: np.ndarray, t: TensorType, name: str | None) -> Value:
        """Storage integers typed directly with their quantized type (what ``arith.constant`` +
        ``quant.scast`` express): the exporter writes it as one int8/int32 initializer, with no
        Identity between the initializer and its DequantizeLinear."""
        attr = DenseElementsAttr(np.asarray(ints, order="C").astype(numpy_dtype(t, f"constant '{name}'")), t)
        return self.builder.constant(attr, name=name)

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

    def clone(self, op: Operation, label: str | None = None, *, operands: Sequence[Value] | None = None,
              result_types: Sequence[Type] | None = None) -> list[Value]:
        """``op`` (labelled ``label`` when it has none) on the new versions of its operands, or on
        ``operands`` with ``result_types`` when given; its results become their sources' versions."""
        new = self.builder.clone(op, self._new, label=label, operands=operands, result_types=result_types)
        return list(new.results)

    def append(self, op: Operation) -> Operation:
        return self.builder.insert(op)
