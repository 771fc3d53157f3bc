"""The ONNX op table: how each supported ONNX op type becomes ``nn`` ops.

Most ops need no code: ``GENERIC`` lists them, their ``nn`` op is ``nn.<snake_case>``,
attributes are renamed to snake_case and checked against the ``OpDef``, and the inputs
named in ``CONSTANT_INPUTS`` become attributes (they must be constants once the producers
are folded). Ops that need more — optional inputs in the middle, outputs to synthesize,
attributes that pick a type — have a converter function in ``CUSTOM``.

A converter takes a :class:`~quantir.frontends.onnx.importer.NodeContext` and returns the
node's output values (``None`` for an output it does not produce).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
from onnx import TensorProto

from ...errors import ShapeError, UnsupportedOpError, VerifyError, quote_name
from ...ir import BlockArgument, lookup
from ...ir.dialects import nn
from ...ir.dialects.nn_base import element_dtype
from ...ir.dialects.nn_encoder import parse_einsum
from ...ir.dialects.nn_index import slice_bounds
from ...ir.opdef import OpDef
from ...passes.fold_constants import constant_value
from . import einsum, symbolic
from .dtypes import element_type


def snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


# -- ops converted by the generic rule ----------------------------------------------------------

_NAMES = """
Relu Sigmoid Tanh Erf Exp Log Sqrt Neg Abs Reciprocal Floor Ceil Round Sign Sin Cos Tan Asin Acos Atan Sinh
Cosh Asinh Acosh Atanh Softplus Softsign HardSwish Mish Identity Not LeakyRelu Elu Celu Selu ThresholdedRelu
HardSigmoid Shrink Gelu Clip IsInf Cast
Add Sub Mul Div Pow Mod PRelu Equal Less LessOrEqual Greater GreaterOrEqual And Or Xor Sum Max Min Mean Where
Conv ConvTranspose QLinearConv MaxPool AveragePool GlobalAveragePool GlobalMaxPool
Gemm
BatchNormalization LayerNormalization InstanceNormalization LRN Softmax LogSoftmax Hardmax LpNormalization
ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSum ReduceLogSumExp
ArgMax ArgMin
Reshape Flatten Transpose Squeeze Unsqueeze Expand Tile DepthToSpace SpaceToDepth Shape Size ConstantOfShape Range
Concat Slice Gather Pad Resize
GatherElements GatherND CumSum Trilu
DynamicQuantizeLinear
""".split()
_OVERRIDES = {"MatMul": "matmul", "QLinearMatMul": "qlinear_matmul", "IsNaN": "is_nan"}

GENERIC: dict[str, OpDef] = {name: lookup(f"nn.{snake_case(name)}") for name in _NAMES}
GENERIC.update({name: lookup(f"nn.{op}") for name, op in _OVERRIDES.items()})
_missing = [k for k, v in GENERIC.items() if v is None]
if _missing:
    raise RuntimeError(f"ONNX op table names ops the nn dialect does not define: {_missing}")


# -- inputs that become attributes --------------------------------------------------------------

def _ints(a: np.ndarray) -> tuple[int, ...]:
    a = np.asarray(a)
    if a.dtype.kind not in "iub":   # ONNX types these inputs int64; a float one may hold NaN or 1e300
        raise VerifyError(f"expected an integer tensor, got {a.dtype}")
    return tuple(int(v) for v in a.reshape(-1))


def _floats(a: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(a, dtype=np.float64).reshape(-1))


def _scalar(a: np.ndarray) -> float:
    a = np.asarray(a)
    if a.size != 1:
        raise UnsupportedOpError(f"expected a single value, got a tensor of shape {a.shape}")
    return float(a.reshape(()))


@dataclass(frozen=True)
class ConstInput:
    """ONNX input ``index`` becomes attribute ``attr`` converted by ``convert``; with
    ``empty_is_absent`` a zero-size tensor means the input was not given."""

    index: int
    attr: str
    convert: Callable[[np.ndarray], object]
    empty_is_absent: bool = True


def _axes(i: int) -> ConstInput:
    return ConstInput(i, "axes", _ints)


CONSTANT_INPUTS: dict[str, tuple[ConstInput, ...]] = {
    "Reshape": (ConstInput(1, "shape", _ints, empty_is_absent=False),),
    "Expand": (ConstInput(1, "shape", _ints, empty_is_absent=False),),
    "ConstantOfShape": (ConstInput(0, "shape", _ints, empty_is_absent=False),),
    "Tile": (ConstInput(1, "repeats", _ints, empty_is_absent=False),),
    "Squeeze": (_axes(1),),
    "Unsqueeze": (_axes(1),),
    **{f"Reduce{k}": (_axes(1),) for k in ("Mean", "Sum", "Max", "Min", "Prod", "L1", "L2", "SumSquare",
                                           "LogSum", "LogSumExp")},
    "Slice": (ConstInput(1, "starts", _ints, False), ConstInput(2, "ends", _ints, False), _axes(3),
              ConstInput(4, "steps", _ints)),
    "Pad": (ConstInput(1, "pads", _ints, False), ConstInput(2, "constant_value", _scalar), _axes(3)),
    "Resize": (ConstInput(1, "roi", _floats), ConstInput(2, "scales", _floats), ConstInput(3, "sizes", _ints)),
    "Clip": (ConstInput(1, "min", _scalar), ConstInput(2, "max", _scalar)),
    "Split": (ConstInput(1, "split", _ints),),
    "Dropout": (ConstInput(1, "ratio", _scalar), ConstInput(2, "training_mode", _scalar)),
}


def constant_input_slots(op_type: str) -> set[int]:
    """Indices of the inputs of ``op_type`` that quantir needs as compile-time constants."""
    return {c.index for c in CONSTANT_INPUTS.get(op_type, ())}


# -- custom converters ----------------------------------------------------------------------------

def _constant(ctx):
    attrs = ctx.raw_attributes()
    if len(attrs) != 1:
        raise UnsupportedOpError(f"Constant needs exactly one value attribute, got {sorted(attrs)}")
    (name, value), = attrs.items()
    if name == "value":
        array = value
    elif name in ("value_float", "value_floats"):
        array = np.asarray(value, dtype=np.float32)
    elif name in ("value_int", "value_ints"):
        array = np.asarray(value, dtype=np.int64)
    else:
        raise UnsupportedOpError(f"Constant with attribute {quote_name(name)} is not supported")
    return [ctx.constant(array, name_of_output=0)]


def _dropout(ctx):
    consts = ctx.const_inputs()
    if consts.get("training_mode"):
        raise UnsupportedOpError("Dropout with training_mode = true is not supported (inference graphs only)")
    attrs = ctx.attributes()
    if "ratio" in consts:
        attrs["ratio"] = consts["ratio"]
    return ctx.emit(nn.DROPOUT, [ctx.input(0)], **attrs)


def _split(ctx):
    attrs = {**ctx.attributes(), **ctx.const_inputs()}
    if not attrs.get("split") and not attrs.get("num_outputs"):
        attrs["num_outputs"] = len(ctx.node.output)
    return ctx.emit(nn.SPLIT, [ctx.input(0)], **attrs)


def _cast_like(ctx):
    attrs = ctx.attributes()
    to = ctx.input(1).type.element_type
    return ctx.emit(nn.CAST, [ctx.input(0)], to=to, **attrs)


def _zero_point(ctx, index: int, dtype: np.dtype, shape=()) -> object:
    """The zero-point input ``index``, or a zero constant of ``dtype`` when the node omits it."""
    v = ctx.input(index)
    return v if v is not None else ctx.constant(np.zeros(shape, dtype=dtype))


def _scale_shape(scale, op_type: str) -> tuple[int, ...]:
    """The shape of the zero point quantir makes when a node omits it: the scale's, which must be known."""
    shape = getattr(scale.type, "shape", None) or ()
    if any(d is None for d in shape):
        raise UnsupportedOpError(f"{op_type} without a zero point needs a scale of known shape, got "
                                 f"{scale.type}; give the zero point or a constant scale")
    return shape


def _require_integer(v, op_type: str, what: str) -> None:
    """Quantized values are integers (ONNX's T1/T2 constraints); a float or bool one is a malformed model."""
    if np.dtype(element_dtype(v.type)).kind not in "iu":
        raise VerifyError(f"the {what} of {op_type} must be an integer tensor, got {v.type}")


def _require_positive_scale(scale, op_type: str) -> None:
    """A constant scale of 0, a negative one or NaN makes every value inf or NaN: refuse it at import
    (a scale computed at run time is checked by the kernel)."""
    array = constant_value(scale) if scale is not None else None
    if array is None or array.dtype.kind != "f" or not array.size:
        return
    bad = ~(np.isfinite(array) & (array > 0))
    if bad.any():
        raise VerifyError(f"the scale (input 1) of {op_type} must be finite and positive, found "
                          f"{array[bad].ravel()[0]}; the model's quantization parameters are corrupt")


def _quantize_linear(ctx):
    attrs = ctx.attributes()
    out_code = attrs.pop("output_dtype", 0)
    scale = ctx.input(1)
    zp = ctx.input(2)
    if zp is None:
        et = element_type(out_code or TensorProto.UINT8, "QuantizeLinear output_dtype")   # ONNX: uint8
        zp = ctx.constant(np.zeros(_scale_shape(scale, "QuantizeLinear"), dtype=element_dtype(et)))
    elif out_code and element_type(out_code, "QuantizeLinear output_dtype") != zp.type.element_type:
        raise UnsupportedOpError("QuantizeLinear output_dtype differs from the zero point's type")
    _require_integer(zp, "QuantizeLinear", "zero point (input 2)")
    _require_positive_scale(scale, "QuantizeLinear")
    return ctx.emit(nn.QUANTIZE_LINEAR, [ctx.input(0), scale, zp], **attrs)


def _dequantize_linear(ctx):
    attrs = ctx.attributes()
    out_code = attrs.pop("output_dtype", 0)
    x, scale = ctx.input(0), ctx.input(1)
    _require_integer(x, "DequantizeLinear", "input 0")
    _require_positive_scale(scale, "DequantizeLinear")
    if out_code and element_type(out_code, "DequantizeLinear output_dtype") != scale.type.element_type:
        raise UnsupportedOpError("DequantizeLinear with an output_dtype other than the scale's type is not supported")
    if ctx.input(2) is not None:
        _require_integer(ctx.input(2), "DequantizeLinear", "zero point (input 2)")
    zp = _zero_point(ctx, 2, element_dtype(x.type), _scale_shape(scale, "DequantizeLinear"))
    return ctx.emit(nn.DEQUANTIZE_LINEAR, [x, scale, zp], **attrs)


def _integer_product(opdef):
    def convert(ctx):
        a, b = ctx.input(0), ctx.input(1)
        a_zp = _zero_point(ctx, 2, element_dtype(a.type))
        b_zp = _zero_point(ctx, 3, element_dtype(b.type))
        return ctx.emit(opdef, [a, b, a_zp, b_zp], **ctx.attributes())
    return convert


def _reshape(ctx):
    """A constant target, or one the symbolic evaluator proves equal to a constant (``0`` copies
    a dim of the data, one ``-1`` is fixed by the element count): ``nn.reshape``. Otherwise the
    target is computed at run time: ``nn.dynamic_reshape`` reads it as an operand."""
    data, target = ctx.input(0), ctx.input(1)
    attrs = ctx.attributes()
    allowzero = attrs.get("allowzero", 0)
    array = constant_value(target)
    if array is not None:
        return ctx.emit(nn.RESHAPE, [data], shape=_ints(array), **attrs)
    sym = symbolic.lookup(target, ctx.importer.symbolic)
    resolved = (symbolic.resolve_reshape(data, sym, allowzero, ctx.importer.dim_classes) if sym is not None
                else None)
    if resolved is not None:
        return ctx.emit(nn.RESHAPE, [data], shape=resolved, **attrs)
    if isinstance(target, BlockArgument):
        # fed by the caller rather than computed from the data's shape: a value to bind, not to follow
        raise UnsupportedOpError(
            f"input 1 ({quote_name(ctx.node.input[1])}, the shape) of Reshape must be a constant for quantir to know "
            f"the result's shape, but it is computed at run time and does not fold to a constant; it is a graph "
            f"input: bind it with load_onnx(..., constant_inputs=...)")
    length = symbolic.static_length(target, sym)
    if length is None:
        raise UnsupportedOpError(
            f"the target shape (input 1, {quote_name(ctx.node.input[1])}) is computed at run time as "
            f"'{target.type}'; quantir expected a 1-D integer tensor whose length (the result's rank) is known "
            f"before running")
    dims = symbolic.reshape_dims(data, sym, length, allowzero)
    return ctx.emit(nn.DYNAMIC_RESHAPE, [data, target], dims=dims, **attrs)


def _expand(ctx):
    """A constant shape, or one whose run-time entries are each the data's own (aligned) dim, as
    far as the symbolic evaluator proves it: those entries become ``1``, which keeps that dim.
    ``F.normalize`` exports ``norm.expand_as(x)`` with the batch dim read from another input."""
    data, target = ctx.input(0), ctx.input(1)
    if constant_value(target) is not None:
        return ctx.generic(nn.EXPAND)
    sym = symbolic.lookup(target, ctx.importer.symbolic)
    src = getattr(data.type, "shape", None)
    if sym is None or sym.scalar or src is None:
        return _dynamic_expand(ctx, data, target, sym, src)
    shape: list[int] = []
    for pos, item in enumerate(sym.items):
        j = pos - (len(sym.items) - len(src))   # the data dim this entry broadcasts against
        own = isinstance(item, symbolic.Dim) and 0 <= j < len(src) and src[j] is None and (
            (item.value is data and item.index == j) or ctx.importer.dim_classes.same(item, symbolic.Dim(data, j)))
        if not (symbolic.known(item) or own):
            return _dynamic_expand(ctx, data, target, sym, src)
        shape.append(item if symbolic.known(item) else 1)
    return ctx.emit(nn.EXPAND, [data], shape=tuple(shape))


def _dynamic_expand(ctx, data, target, sym, src):
    """A target that is really known only at run time where the data has a static 1 (a size-1 dim
    broadcast to a dynamic size, as HF's 4-D mask ``mask[:, None, None, :].expand(b, 1, s, s)``),
    its other entries known or the data's own dims: ``nn.dynamic_expand`` reads it as an operand;
    ``dims`` keeps what is known before running. Anything else must fold."""
    if sym is None or sym.scalar or src is None:
        return ctx.generic(nn.EXPAND)   # raises the "must be a constant" error
    items, length = sym.items, len(sym.items)
    rank = max(length, len(src))
    classes = ctx.importer.dim_classes
    dims: list[int] = []
    for i in range(rank):
        d = src[i - rank + len(src)] if i >= rank - len(src) else 1
        item = items[i - rank + length] if i >= rank - length else 1
        j = i - rank + len(src)
        own = isinstance(item, symbolic.Dim) and j >= 0 and d is None and classes.same(item, symbolic.Dim(data, j))
        if not (symbolic.known(item) or own or d == 1):
            return ctx.generic(nn.EXPAND)
        if symbolic.known(item) and d is not None and item not in (1, d) and d != 1:
            raise ShapeError(f"Expand cannot broadcast a dim of {d} to {item}")
        if d is not None and d != 1:
            dims.append(d)                       # the entry must be 1 or d
        elif symbolic.known(item):
            dims.append(item if item != 1 else (1 if d == 1 else -1))
        else:
            dims.append(-1)
    return ctx.emit(nn.DYNAMIC_EXPAND, [data, target], dims=tuple(dims))


def _slice(ctx):
    """Constant bounds: ``nn.slice``. Bounds computed at run time (``buffer[:, :x.size(1)]``):
    ``nn.dynamic_slice`` with the result dims the symbolic evaluator proves."""
    bounds = [ctx.input(i) for i in range(1, 5)]
    if all(v is None or constant_value(v) is not None for v in bounds):
        return ctx.generic(nn.SLICE)
    data = ctx.input(0)
    src = getattr(data.type, "shape", None)
    items = [_shape_items(ctx, v) for v in bounds]
    n = len(items[0]) if items[0] is not None else None
    if src is None or n is None:
        return ctx.generic(nn.SLICE)   # raises the "must be a constant" error
    starts, ends, axes, steps = (x if x is not None and len(x) == n else [None] * n for x in items)
    if bounds[2] is None:
        axes = list(range(n))
    if bounds[3] is None:
        steps = [1] * n
    dims = [-1 if d is None else d for d in src]
    if axes is not None and all(symbolic.known(a) for a in axes):
        for k, a in enumerate(axes):
            a %= len(src)
            one = [starts[k], ends[k], steps[k]]
            if src[a] is None or not all(symbolic.known(v) for v in one):
                dims[a] = -1
                continue
            (start, stop, step), = slice_bounds(src, {"starts": (one[0],), "ends": (one[1],), "axes": (a,),
                                                      "steps": (one[2],)}).values()
            dims[a] = max(0, -(-(stop - start) // step))
    else:
        dims = [-1] * len(src)
    operands = [data, bounds[0], bounds[1]]
    if bounds[2] is not None or bounds[3] is not None:
        operands.append(bounds[2] if bounds[2] is not None else ctx.constant(np.arange(n, dtype=np.int64)))
    if bounds[3] is not None:
        operands.append(bounds[3])
    return ctx.emit(nn.DYNAMIC_SLICE, operands, dims=tuple(dims))


def _shape_items(ctx, v) -> list | None:
    """A 1-D int operand's elements (ints, or symbolic dims known only at run time), or None."""
    if v is None:
        return None
    array = constant_value(v)
    if array is not None:
        return [int(x) for x in np.asarray(array).reshape(-1)]
    sym = symbolic.lookup(v, ctx.importer.symbolic)
    if sym is not None and not sym.scalar:
        return list(sym.items)
    length = symbolic.static_length(v, None)
    return [None] * length if length is not None else None


def _batch_norm(ctx):
    if len([o for o in ctx.node.output if o]) > 1:
        raise UnsupportedOpError("BatchNormalization with running mean/var outputs (training) is not supported")
    return ctx.generic(nn.BATCH_NORMALIZATION)


def _lstm(ctx):
    """LSTM's optional inputs (3..7) may be left out in the middle: the present ones are named."""
    present = [(name, ctx.input(i)) for i, name in enumerate(nn.LSTM_OPTIONAL_INPUTS, start=3)]
    present = [(name, v) for name, v in present if v is not None]
    return ctx.emit(nn.LSTM, [ctx.input(0), ctx.input(1), ctx.input(2), *(v for _, v in present)],
                    optional_inputs=tuple(name for name, _ in present), **ctx.attributes())


def _interior(ctx, opdef, operands, suffix: str, **attrs):
    """One op of several that a node becomes; its result is named after the node's output."""
    (v,) = ctx.emit(opdef, operands, **attrs)
    v.name_hint = f"{ctx.node.output[0]}_{suffix}"
    return v


def _einsum(ctx):
    """Matmul-like equations become transposes around ``nn.matmul`` (``einsum.matmul_plan``), so the
    quantizer sees a matmul; any other well-formed equation stays ``nn.einsum``."""
    equation = ctx.attributes().get("equation")
    if equation is None:
        raise VerifyError("Einsum needs its 'equation' attribute")
    operands = ctx.operands()
    spec = parse_einsum(equation, len(operands))
    shapes = [getattr(v.type, "shape", None) for v in operands]
    plan = einsum.matmul_plan(spec, *map(len, shapes)) if len(operands) == 2 and None not in shapes else None
    if plan is None:
        return ctx.emit(nn.EINSUM, operands, equation=equation)
    a, b = operands
    if plan.perm_a is not None:
        a = _interior(ctx, nn.TRANSPOSE, [a], "einsum_a", perm=plan.perm_a)
    if plan.perm_b is not None:
        b = _interior(ctx, nn.TRANSPOSE, [b], "einsum_b", perm=plan.perm_b)
    if plan.perm_out is None:
        return ctx.emit(nn.MATMUL, [a, b])
    y = _interior(ctx, nn.MATMUL, [a, b], "einsum_matmul")
    return ctx.emit(nn.TRANSPOSE, [y], perm=plan.perm_out)


CUSTOM: dict[str, Callable] = {
    "Constant": _constant,
    "Dropout": _dropout,
    "Split": _split,
    "CastLike": _cast_like,
    "QuantizeLinear": _quantize_linear,
    "DequantizeLinear": _dequantize_linear,
    "ConvInteger": _integer_product(nn.CONV_INTEGER),
    "MatMulInteger": _integer_product(nn.MATMUL_INTEGER),
    "BatchNormalization": _batch_norm,
    "Reshape": _reshape,
    "Expand": _expand,
    "Slice": _slice,
    "LSTM": _lstm,
    "Einsum": _einsum,
}

# Attributes whose ONNX value is a type code.
TYPE_ATTRIBUTES = {("Cast", "to")}

SUPPORTED_OPS: frozenset[str] = frozenset(GENERIC) | frozenset(CUSTOM)
