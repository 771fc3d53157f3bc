"""Upstream MLIR's quant passes, producing the same IR as ``mlir-opt`` (op for op, in the same
order, so that the printed text matches up to nothing):

* ``--normalize-quant-types`` (:class:`NormalizeQuantTypes`): a tensor of a sub-channel type
  whose scales hold one element becomes per-tensor; one whose scales shape has exactly one
  dimension other than 1 becomes per-axis along it. Block sizes play no part, as upstream. A
  cast on such a type folds if it can (upstream's conversion folds the ops it converts).
* ``--strip-func-quant-types`` (:class:`StripFuncQuantTypes`): function signatures take and
  return the storage integers (``!quant.uniform<u8:...>`` -> ``i8``, signless). A quantized
  argument used by anything but ``return`` is ``quant.scast`` back at the top of the body (the
  last argument's cast first); a returned quantized result is ``scast`` to storage before the
  ``return``; a quantized argument that is only returned needs no cast. Like upstream's
  conversion, it also folds the quant casts in every function (``dcast(qcast(x)) -> x``).
* ``--lower-quant-ops`` (:class:`LowerQuantOps`): ``quant.qcast``/``quant.dcast`` into
  ``arith`` ops. Per-tensor, on scalars and tensors::

      qcast:  stored = clamp(fptosi(x / scale + sitofp(zp)))      (+ zp only when zp != 0)
      dcast:  real   = (sitofp(stored) - sitofp(zp)) * scale      (- zp only when zp != 0)

  ``fptosi`` truncates toward zero -- upstream's choice, not LiteRT's rounding (docs/numerics.md
  §5); ``round="nearest-even"`` rounds ``x / scale`` with ``math.roundeven`` before the zero
  point is added, which is ONNX's QuantizeLinear (quantir's option, not upstream's; rounding
  after an odd zero point would move ties to the other neighbour). Unsigned storage uses
  ``uitofp``/``fptoui``/``maxui``/``minui``; the clamp is emitted only when the type narrows its
  storage range. Tensors get their scalar constants
  through ``tensor.splat``, with a ``tensor.dim`` per dynamic dimension. An unranked tensor is
  flattened to 1-d first (``shape.shape_of``, ``shape.num_elements``, ``tensor.from_elements``,
  ``tensor.reshape``) and reshaped back to its extents after. Per-axis and sub-channel types on
  ranked tensors become a ``linalg.generic`` over the tensor with the scales and zero points as
  dense constants read through an affine map (``(d0, d1) -> (d1)``; ``d1 floordiv 4`` for a
  block, ``0`` for a dimension without blocks), the same formula in its body (the zero point
  always applied). A per-axis cast of an unranked tensor is reshaped to ``?xCx?`` around its
  axis first (``shape.split_at`` and ``shape.num_elements`` of the extents before and after it)
  and back after. Float storage types are refused with an
  :class:`~quantir.errors.UnsupportedOpError`.
  As upstream's dialect conversion, a cast that folds (``dcast(qcast(x)) -> x``) is folded
  instead of lowered.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedOpError
import numpy as np

from ..ir.attributes import DenseElementsAttr, FloatAttr, IntegerAttr
from ..ir.core import Block, Function, Module, Operation, Value
from ..ir.dialects import arith, arith_ops, func, linalg, quant, shape, tensor
from ..ir.dialects.arith_ops import ROUNDEVEN
from ..types import (FunctionType, IndexType, IntegerType, QuantizedType, TensorType, Type,
                     UniformQuantizedPerAxisType, UniformQuantizedSubChannelType, UniformQuantizedType)
from . import PassResult

__all__ = ["LowerQuantOps", "LowerQuantOptions", "NormalizeQuantTypes", "StripFuncQuantTypes",
           "lower_quant_ops", "normalize_quant_types", "strip_func_quant_types"]

ROUNDING = ("truncate", "nearest-even")


# -- shared type helpers ------------------------------------------------------------------------

def _element(t: Type) -> Type:
    return t.element_type if isinstance(t, TensorType) else t


def _with_element(t: Type, element: Type) -> Type:
    return t.clone(element_type=element) if isinstance(t, TensorType) else element


def _storage_int(q: QuantizedType) -> Type:
    """The signless integer (or the float) that holds ``q``'s stored values."""
    st = q.storage_type
    return IntegerType(st.width) if isinstance(st, IntegerType) else st


def _retype_all(fn: Function, convert) -> bool:
    """Apply ``convert`` to the signature, block arguments and op results of ``fn``."""
    changed = False
    new_type = FunctionType(tuple(convert(t) for t in fn.type.inputs), tuple(convert(t) for t in fn.type.results))
    if new_type != fn.type:
        fn.type, changed = new_type, True
    if fn.body is not None:
        values = list(fn.body.arguments) + [r for op in fn.body.ops for r in op.results]
        for v in values:
            t = convert(v.type)
            if t != v.type:
                v.type, changed = t, True
    return changed


# -- upstream's dialect conversion, as far as these passes see it -------------------------------

_CASTS = (quant.QCAST, quant.DCAST, quant.SCAST)


def _convert(block: Block, stats: dict[str, int], illegal, lower=None) -> None:
    """Visit ops first to last; fold each quant cast the pass treats as ``illegal(op)`` if it
    folds (``dcast(qcast(x)) -> x``...), else ``lower(op)`` it (new ops before it, its
    replacement returned, or None to keep it), and make every replacement at the end. This is
    what upstream's dialect conversion does to these ops: only illegal ops are touched, a fold
    sees the original producers, and an op left without users stays, dead (the conversion erases
    nothing it did not replace)."""
    replaced: list[tuple[Operation, Value]] = []
    for op in list(block.ops):
        if op.opdef not in _CASTS or not illegal(op):
            continue
        folded = op.opdef.fold(op)
        if folded is not None:
            replaced.append((op, folded[0]))
            _count(stats, "fold:" + op.name)
            continue
        new = lower(op) if lower is not None else None
        if new is not None:
            replaced.append((op, new))
            _count(stats, "lower:" + op.name)
    final = {id(op.results[0]): v for op, v in replaced}

    def resolve(v: Value) -> Value:
        while id(v) in final:
            v = final[id(v)]
        return v
    for op, v in replaced:
        op.results[0].replace_all_uses_with(resolve(v))
    for op, _ in reversed(replaced):
        block.detach(op)
    if replaced:
        block.ops[:] = [op for op in block.ops if op.block is block]


# -- normalize-quant-types ----------------------------------------------------------------------

def normalized_type(t: Type) -> Type:
    """A tensor of a sub-channel type as per-tensor or per-axis when its scales allow it."""
    q = _element(t)
    if not isinstance(t, TensorType) or not isinstance(q, UniformQuantizedSubChannelType):
        return t
    common = dict(storage_type=q.storage_type, expressed_type=q.expressed_type, is_signed=q.is_signed,
                  storage_min=q.storage_min, storage_max=q.storage_max)
    if len(q.scales) == 1:
        return t.clone(element_type=UniformQuantizedType(scale=q.scales[0], zero_point=q.zero_points[0], **common))
    wide = [i for i, n in enumerate(q.shape) if n != 1]
    if len(wide) == 1:
        return t.clone(element_type=UniformQuantizedPerAxisType(
            scales=q.scales, zero_points=q.zero_points, quantized_dimension=wide[0], **common))
    return t


def _has_sub_channel(op: Operation) -> bool:
    return any(normalized_type(v.type) != v.type for v in (*op.operands, *op.results))


class NormalizeQuantTypes:
    name = "normalize-quant-types"
    options = None

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        for fn in module.functions:   # casts touching a sub-channel type are illegal: they fold
            if fn.body is not None:
                _convert(fn.body, stats, _has_sub_channel)
        retyped = sum(_retype_all(fn, normalized_type) for fn in module.functions)
        if retyped:
            stats["retyped:functions"] = retyped
        return PassResult(bool(stats), stats)


def normalize_quant_types(module: Module) -> bool:
    return NormalizeQuantTypes().run(module).modified


# -- strip-func-quant-types ---------------------------------------------------------------------

def stripped_type(t: Type) -> Type:
    q = _element(t)
    return _with_element(t, _storage_int(q)) if isinstance(q, QuantizedType) else t


def _is_quant(t: Type) -> bool:
    return isinstance(_element(t), QuantizedType)


class StripFuncQuantTypes:
    name = "strip-func-quant-types"
    options = None

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        for fn in module.functions:
            if fn.body is not None:   # every quant cast is illegal here: all of them fold
                _convert(fn.body, stats, lambda op: True)
            if not any(_is_quant(t) for t in (*fn.type.inputs, *fn.type.results)):
                continue
            _count(stats, "functions")
            if fn.body is not None:
                self._body(fn, stats)
            fn.type = FunctionType(tuple(stripped_type(t) for t in fn.type.inputs),
                                   tuple(stripped_type(t) for t in fn.type.results))
        return PassResult(bool(stats), stats)

    @staticmethod
    def _body(fn: Function, stats: dict[str, int]) -> None:
        body = fn.body
        ret = fn.return_op()
        ret = ret if ret is not None and ret.opdef is func.RETURN else None
        for arg in body.arguments:
            if not _is_quant(arg.type):
                continue
            quant_type = arg.type
            arg.type = stripped_type(quant_type)
            users = [(op, i) for op, i in list(arg.uses) if op is not ret]
            if not users:
                continue
            cast = Operation(quant.SCAST, [arg], [quant_type])
            cast.block = body
            body.ops.insert(0, cast)
            for op, i in users:
                op.set_operand(i, cast.results[0])
            _count(stats, "scast:argument")
        if ret is None:
            return
        casts: dict[int, Value] = {}
        for i, v in enumerate(list(ret.operands)):
            if not _is_quant(v.type):
                continue
            if id(v) not in casts:   # the cast goes right after the value's producer, as upstream's
                cast = Operation(quant.SCAST, [v], [stripped_type(v.type)])
                cast.block = body
                body.ops.insert(body.ops.index(v.op) + 1, cast)
                casts[id(v)] = cast.results[0]
                _count(stats, "scast:result")
            ret.set_operand(i, casts[id(v)])


def strip_func_quant_types(module: Module) -> bool:
    return StripFuncQuantTypes().run(module).modified


# -- lower-quant-ops ----------------------------------------------------------------------------

@dataclass(frozen=True)
class LowerQuantOptions:
    round: str = "truncate"   # or "nearest-even": math.roundeven of x / scale, before + zp

    def __post_init__(self):
        if self.round not in ROUNDING:
            raise ValueError(f"lower-quant-ops: round must be one of {', '.join(ROUNDING)}, got {self.round!r}")


class _Emitter:
    """Builds ops in front of ``anchor``, in the order mlir-opt creates them."""

    def __init__(self, block: Block, anchor: Operation):
        self.block, self.anchor = block, anchor
        self.dims: list[Value] = []

    def op(self, opdef, operands, result_type: Type) -> Value:
        return self.block.insert_before(self.anchor, Operation(opdef, operands, [result_type],
                                                               loc=self.anchor.loc)).results[0]

    def constant(self, attr, t: Type) -> Value:
        return self.block.insert_before(self.anchor, Operation(arith.CONSTANT, [], [t], {"value": attr},
                                                               loc=self.anchor.loc)).results[0]

    def int_constant(self, value: int, t: IntegerType) -> Value:
        bits = t.width
        wrapped = (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1)) if bits > 1 else value & 1
        return self.constant(IntegerAttr(wrapped, t), t)

    def take_dims(self, shaped: Value) -> None:
        """``arith.constant i : index`` and ``tensor.dim`` for each dynamic dimension."""
        t = shaped.type
        if not isinstance(t, TensorType):
            return
        for i, d in enumerate(t.shape):
            if d is None:
                index = self.constant(IntegerAttr(i, IndexType()), IndexType())
                self.dims.append(self.op(tensor.DIM, [shaped, index], IndexType()))

    def flatten(self, x: Value) -> tuple[Value, Value | None]:
        """An unranked ``x`` as 1-d (``shape_of``, ``num_elements``, ``from_elements``,
        ``reshape``) and its extents to restore it; anything else as it is, and None."""
        t = x.type
        if not isinstance(t, TensorType) or t.is_ranked:
            return x, None
        extents_t = TensorType((None,), IndexType())
        extents = self.op(shape.SHAPE_OF, [x], extents_t)
        count = self.op(shape.NUM_ELEMENTS, [extents], IndexType())
        flat_shape = self.op(tensor.FROM_ELEMENTS, [count], TensorType((1,), IndexType()))
        return self.op(tensor.RESHAPE, [x, flat_shape], TensorType((None,), t.element_type)), extents

    def flatten_around(self, x: Value, axis: int, channels: int) -> tuple[Value, Value]:
        """An unranked ``x`` as ``?xCx?`` with its quantized axis in the middle (the products of
        the extents before and after it, from ``shape.split_at``), and its extents."""
        index = IndexType()
        extents_t = TensorType((None,), index)
        extents = self.op(shape.SHAPE_OF, [x], extents_t)
        at_axis = self.constant(IntegerAttr(axis, index), index)
        after_axis = self.constant(IntegerAttr(axis + 1, index), index)
        sizes = []
        for cut, part in ((at_axis, 0), (after_axis, 1)):
            split = self.block.insert_before(self.anchor, Operation(shape.SPLIT_AT, [extents, cut],
                                                                    [extents_t, extents_t], loc=self.anchor.loc))
            sizes.append(self.op(shape.NUM_ELEMENTS, [split.results[part]], index))
        middle = self.constant(IntegerAttr(channels, index), index)
        shape3 = self.op(tensor.FROM_ELEMENTS, [sizes[0], middle, sizes[1]], TensorType((3,), index))
        return self.op(tensor.RESHAPE, [x, shape3], TensorType((None, channels, None), x.type.element_type)), extents

    def unflatten(self, x: Value, extents: Value | None) -> Value:
        if extents is None:
            return x
        return self.op(tensor.RESHAPE, [x, extents], TensorType(None, x.type.element_type))

    def broadcast(self, scalar: Value, like: Type) -> Value:
        """``scalar`` as-is for a scalar, else ``tensor.splat`` to ``like``'s shape."""
        if not isinstance(like, TensorType):
            return scalar
        return self.op(tensor.SPLAT, [scalar, *self.dims], like.clone(element_type=scalar.type))


def _check_lowerable(op: Operation, q: Type, shaped: Type) -> UniformQuantizedType:
    where = f"'{op.name}'"
    if isinstance(q, UniformQuantizedSubChannelType):
        if not isinstance(shaped, TensorType) or not shaped.is_ranked:
            raise UnsupportedOpError(
                f"{where}: --lower-quant-ops lowers {q} on ranked tensors only: a sub-channel type needs "
                f"the tensor's rank", op.loc)
    elif isinstance(q, UniformQuantizedPerAxisType):
        pass
    elif not isinstance(q, UniformQuantizedType):
        raise UnsupportedOpError(f"{where}: --lower-quant-ops needs a !quant.uniform type, got {q}", op.loc)
    if not isinstance(q.storage_type, IntegerType):
        raise UnsupportedOpError(f"{where}: --lower-quant-ops needs integer storage, got {q.storage_type}", op.loc)
    return q


def _narrowed(q: UniformQuantizedType) -> bool:
    return q.storage_min != q.default_storage_min or q.storage_max != q.default_storage_max


# -- per-axis and sub-channel: a linalg.generic over the tensor ---------------------------------

def _int_dtype(width: int):
    return np.int8 if width <= 8 else np.int16 if width <= 16 else np.int32 if width <= 32 else np.int64


def _channel_params(q, rank: int, axis: int | None = None) -> tuple[np.ndarray, np.ndarray, linalg.AffineMapAttr]:
    """Scales and zero points as arrays (zero points wrapped to the storage width, as MLIR's
    dense attributes hold them), and the map from a tensor index to their index."""
    width = q.storage_width
    wrap = 1 << width
    zps = [(z + wrap // 2) % wrap - wrap // 2 for z in q.zero_points]
    if isinstance(q, UniformQuantizedPerAxisType):
        shape: tuple[int, ...] = (len(q.scales),)
        results: tuple[str, ...] = (f"d{q.quantized_dimension if axis is None else axis}",)
    else:
        shape = tuple(q.shape)
        blocks = dict(q.block_sizes)
        results = tuple("0" if i not in blocks else f"d{i}" if blocks[i] == 1 else f"d{i} floordiv {blocks[i]}"
                        for i in range(rank))
    scales = np.array(q.scales, dtype=q.expressed_type.numpy_dtype).reshape(shape)
    return scales, np.array(zps, dtype=_int_dtype(width)).reshape(shape), linalg.AffineMapAttr(rank, results)


def _lower_per_channel(op: Operation, block: Block, options: LowerQuantOptions, quantize: bool) -> Value:
    """``linalg.generic`` ins(tensor, scales, zero points) outs(tensor.empty): the per-tensor
    scalar formula in its body with the channel's scale and zero point read as block arguments
    (the zero point always applied, the clamp's constants made in the body)."""
    q = _element(op.results[0].type if quantize else op.operands[0].type)
    int_t, float_t, signed = _storage_int(q), q.expressed_type, q.is_signed
    e = _Emitter(block, op)
    x = op.operands[0]
    if not quantize:
        x = e.op(quant.SCAST, [x], _with_element(x.type, int_t))
    extents, axis = None, None
    if not x.type.is_ranked:   # per-axis only (checked): reshaped to ?xCx?, the axis in the middle
        x, extents = e.flatten_around(x, q.quantized_dimension, len(q.scales))
        axis = 1
    rank = x.type.rank
    scales, zps, param_map = _channel_params(q, rank, axis)
    scale_c = e.constant(DenseElementsAttr(scales, TensorType(scales.shape, float_t)),
                         TensorType(scales.shape, float_t))
    zp_c = e.constant(DenseElementsAttr(zps, TensorType(zps.shape, int_t)), TensorType(zps.shape, int_t))
    e.take_dims(x)
    out_t = x.type.clone(element_type=int_t if quantize else float_t)
    init = e.op(tensor.EMPTY, list(e.dims), out_t)
    body = Block([x.type.element_type, float_t, int_t, out_t.element_type])
    value, scale, zp, _ = body.arguments
    yield_op = body.append(Operation(linalg.YIELD, [], []))
    b = _Emitter(body, yield_op)
    to_float = arith_ops.SITOFP if signed else arith_ops.UITOFP
    if quantize:
        y = b.op(arith_ops.DIVF, [value, scale], float_t)
        if options.round == "nearest-even":
            y = b.op(ROUNDEVEN, [y], float_t)
        y = b.op(arith_ops.ADDF, [y, b.op(to_float, [zp], float_t)], float_t)
        y = b.op(arith_ops.FPTOSI if signed else arith_ops.FPTOUI, [y], int_t)
        if _narrowed(q):
            lo, hi = b.int_constant(q.storage_min, int_t), b.int_constant(q.storage_max, int_t)
            y = b.op(arith_ops.MAXSI if signed else arith_ops.MAXUI, [y, lo], int_t)
            y = b.op(arith_ops.MINSI if signed else arith_ops.MINUI, [y, hi], int_t)
    else:
        y = b.op(to_float, [value], float_t)
        y = b.op(arith_ops.SUBF, [y, b.op(to_float, [zp], float_t)], float_t)
        y = b.op(arith_ops.MULF, [y, scale], float_t)
    yield_op.operands.append(y)
    y.uses.append((yield_op, 0))
    identity = linalg.AffineMapAttr(rank, tuple(f"d{i}" for i in range(rank)))
    loop = block.insert_before(op, linalg.generic([x, scale_c, zp_c], [init], (identity, param_map, param_map,
                                                                             identity), body, op.loc))
    result = e.unflatten(loop.results[0], extents)
    return e.op(quant.SCAST, [result], op.results[0].type) if quantize else result


def _lower_qcast(op: Operation, block: Block, options: LowerQuantOptions) -> Value:
    if isinstance(_element(op.results[0].type), (UniformQuantizedPerAxisType, UniformQuantizedSubChannelType)):
        _check_lowerable(op, _element(op.results[0].type), op.operands[0].type)
        return _lower_per_channel(op, block, options, quantize=True)
    qt = _check_lowerable(op, _element(op.results[0].type), op.operands[0].type)
    e = _Emitter(block, op)
    x, extents = e.flatten(op.operands[0])
    int_t = _storage_int(qt)
    float_t = qt.expressed_type
    signed = qt.is_signed
    scale = e.constant(FloatAttr(qt.scale, float_t), float_t)
    zp = e.int_constant(qt.zero_point, int_t)
    e.take_dims(x)
    y = e.op(arith_ops.DIVF, [x, e.broadcast(scale, x.type)], x.type)
    if options.round == "nearest-even":   # x / scale is rounded, then the zero point added (ONNX)
        y = e.op(ROUNDEVEN, [y], x.type)
    if qt.zero_point != 0:
        zp_t = e.broadcast(zp, _with_element(x.type, int_t))
        zp_f = e.op(arith_ops.SITOFP if signed else arith_ops.UITOFP, [zp_t], x.type)
        y = e.op(arith_ops.ADDF, [y, zp_f], x.type)
    stored_t = _with_element(x.type, int_t)
    stored = e.op(arith_ops.FPTOSI if signed else arith_ops.FPTOUI, [y], stored_t)
    if _narrowed(qt):
        lo = e.int_constant(qt.storage_min, int_t)
        hi = e.int_constant(qt.storage_max, int_t)
        lo, hi = e.broadcast(lo, stored_t), e.broadcast(hi, stored_t)
        stored = e.op(arith_ops.MAXSI if signed else arith_ops.MAXUI, [stored, lo], stored_t)
        stored = e.op(arith_ops.MINSI if signed else arith_ops.MINUI, [stored, hi], stored_t)
    return e.op(quant.SCAST, [e.unflatten(stored, extents)], op.results[0].type)


def _lower_dcast(op: Operation, block: Block, options: LowerQuantOptions) -> Value:
    if isinstance(_element(op.operands[0].type), (UniformQuantizedPerAxisType, UniformQuantizedSubChannelType)):
        _check_lowerable(op, _element(op.operands[0].type), op.operands[0].type)
        return _lower_per_channel(op, block, options, quantize=False)
    x = op.operands[0]
    qt = _check_lowerable(op, _element(x.type), x.type)
    e = _Emitter(block, op)
    int_t = _storage_int(qt)
    float_t = qt.expressed_type
    signed = qt.is_signed
    stored, extents = e.flatten(e.op(quant.SCAST, [x], _with_element(x.type, int_t)))
    out_t = _with_element(stored.type, float_t)
    scale = e.constant(FloatAttr(qt.scale, float_t), float_t)
    zp = e.int_constant(qt.zero_point, int_t)
    e.take_dims(stored)
    scale = e.broadcast(scale, out_t)
    to_float = arith_ops.SITOFP if signed else arith_ops.UITOFP
    y = e.op(to_float, [stored], out_t)
    if qt.zero_point != 0:
        zp_f = e.op(to_float, [e.broadcast(zp, stored.type)], out_t)
        y = e.op(arith_ops.SUBF, [y, zp_f], out_t)
    return e.unflatten(e.op(arith_ops.MULF, [y, scale], out_t), extents)


class LowerQuantOps:
    name = "lower-quant-ops"

    def __init__(self, options: LowerQuantOptions | None = None):
        self.options = options or LowerQuantOptions()

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        for fn in module.functions:
            if fn.body is None:
                continue
            self._function(fn.body, stats)
        return PassResult(bool(stats), stats)

    def _function(self, block: Block, stats: dict[str, int]) -> None:
        def lower(op: Operation) -> Value | None:
            if op.opdef is quant.QCAST:
                return _lower_qcast(op, block, self.options)
            if op.opdef is quant.DCAST:
                return _lower_dcast(op, block, self.options)
            return None
        _convert(block, stats, lambda op: op.opdef is not quant.SCAST, lower)


def lower_quant_ops(module: Module, options: LowerQuantOptions | None = None) -> bool:
    return LowerQuantOps(options).run(module).modified


def _count(stats: dict[str, int], key: str) -> None:
    stats[key] = stats.get(key, 0) + 1
