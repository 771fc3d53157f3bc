"""Integer lowering in one pass: calibrated float function -> ``qnn`` function.

Walk the float function once, in order. A region (see ``patterns``) becomes the integer op(s)
its pattern's lowering emits (``quantize.ops``), fed by the *quantized* versions of its inputs;
a float op keeps running in float on the *float* versions of its operands. The two maps below
create those versions on demand:

- ``quantized(v, params)``: reuse the integer value when its parameters match, else
  ``qnn.requantize`` it; a float value gets a ``quant.qcast``; a constant is quantized at
  compile time (``arith.constant`` of storage integers + ``quant.scast``).
- ``floating(v)``: reuse the float value, else ``quant.dcast`` the integer one.

So a fully quantized CNN keeps one ``qcast`` per input and one ``dcast`` per output, and a
float op in the middle costs exactly one dcast before it and one qcast after it. Weights are
symmetric int8 per output channel (narrow range) with the scales the solver chose
(``params.WeightParams``), bias int32 with scale input × weight (the solver's corrected bias),
and conv/FC/requantize carry their fixed-point (multiplier, shift) pairs as attributes.

The same ``Lowerer`` also lowers *segments* — one region or one float op, with its live
inputs as function arguments — which ``trace.IntegerTrace`` runs one after another on the kept
calibration samples: the integer graph evaluated region by region while the solver is still
deciding, so ``CalibrationInfo`` can show callbacks the quantized inputs and outputs.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import QuantirError
from ..ir import Block, Function, Operation, StringAttr, Value, elements_attr, verify_function
from ..ir.dialects import arith, func, qnn, quant
from ..numerics import (bias_qparams, quantize_bias, quantize_multipliers,
                        quantize_tflite)
from ..types import (FloatType, FunctionType, IntegerType, TensorType, Type, UniformQuantizedPerAxisType,
                     UniformQuantizedType)
from .config import Config
from .naming import integer_name, requantized_name
from .params import ActParams, Params, WeightParams, act_type, quantized_weights, region_weights, weight_params
from .regions import Annotation, Region, constant_array

I8, I32, F32 = IntegerType(8), IntegerType(32), FloatType("f32")


class Lowerer:
    """Builds the integer function. ``arguments`` (a segment): the source values that become the
    function's arguments, with their types (a quantized type binds the integer version of the
    value, a float type its float version); the caller then lowers ops and calls ``finish``."""

    def __init__(self, fn: Function, annotation: Annotation, params: Params, config: Config,
                 arguments: Sequence[tuple[Value, Type]] | None = None):
        self.src = fn
        self.annotation = annotation
        self.params = params
        self.config = config
        self.floats: dict[Value, Value] = {}
        self.quants: dict[Value, Value] = {}
        self.requants: dict[tuple[int, float, int], Value] = {}
        if arguments is None:
            self.fn = Function(fn.name, fn.type, body=Block([a.type for a in fn.arguments]),
                               arg_attrs=[dict(a) for a in fn.arg_attrs], res_attrs=[dict(r) for r in fn.res_attrs],
                               attributes=dict(fn.attributes), loc=fn.loc)
            bound = [(old, old.type) for old in fn.arguments]
        else:
            types = [t for _, t in arguments]
            self.fn = Function(f"{fn.name}_segment", FunctionType(tuple(types), ()), body=Block(types),
                               arg_attrs=[{"quantir.name": StringAttr(f"in{i}")} for i in range(len(types))])
            bound = list(arguments)
        for (old, t), new in zip(bound, self.fn.arguments):
            new.name_hint = old.name_hint
            if isinstance(t, TensorType) and isinstance(t.element_type, UniformQuantizedType):
                self.quants[old] = new
            else:
                self.floats[old] = new

    def finish(self, outputs: Sequence[Value]) -> Function:
        """End a segment: return ``outputs`` (named ``out0``, ``out1``...), verified."""
        self.emit(func.RETURN.build(list(outputs), []))
        self.fn.res_attrs = [{"quantir.name": StringAttr(f"out{i}")} for i in range(len(outputs))]
        self.fn.update_type()
        verify_function(self.fn)
        return self.fn

    # -- building helpers ---------------------------------------------------------------------
    def emit(self, op: Operation, like: Operation | None = None) -> Operation:
        if like is not None:
            op.loc = op.loc or like.loc
            op.label = op.label or like.label
        return self.fn.body.append(op)

    def constant(self, array: np.ndarray, element_type: Type | None = None) -> Value:
        attr = elements_attr(array, element_type)
        return self.emit(arith.CONSTANT.build([], [attr.type], value=attr)).result

    def stored_constant(self, ints: np.ndarray, storage: IntegerType, qtype: Type) -> Value:
        """Storage integers as a constant, reinterpreted as the quantized type (quant.scast)."""
        c = self.constant(np.asarray(ints).astype({8: np.int8, 32: np.int32}[storage.width]), storage)
        return self.emit(quant.SCAST.build([c], [qtype])).result

    # -- value versions -----------------------------------------------------------------------
    def floating(self, v: Value) -> Value:
        if v in self.floats:
            return self.floats[v]
        array = constant_array(v)
        if array is not None:
            out = self.constant(array, v.type.element_type)
        elif v in self.quants:
            q = self.quants[v]
            out = self.emit(quant.DCAST.build([q], [v.type])).result
        else:
            raise QuantirError(f"value '{v.name_hint}' is used before it is defined")
        out.name_hint = v.name_hint
        self.floats[v] = out
        return out

    def quantized(self, v: Value, params: ActParams) -> Value:
        want = act_type(params, v.type)
        have = self.quants.get(v)
        if have is not None and have.type == want:
            return have
        key = (id(v), params.scale, params.zero_point)
        if key in self.requants:
            return self.requants[key]
        array = constant_array(v)
        if have is not None:
            real = qnn.requantize_real_multiplier(have.type, want)
            m, s = quantize_multipliers(real)
            out = self.emit(qnn.REQUANTIZE.build([have], [want], multiplier=m.tolist(), shift=s.tolist())).result
        elif array is not None:
            ints = quantize_tflite(array, np.float32(params.scale), params.zero_point)
            out = self.stored_constant(ints, I8, want)
        else:
            out = self.emit(quant.QCAST.build([self.floating(v)], [want])).result
        # the first integer version of a value is "<name>__q"; requantized copies get their own names
        out.name_hint = integer_name(v.name_hint) if have is None and array is None else \
            requantized_name(v.name_hint, len(self.requants))
        if have is None and array is None:
            self.quants[v] = out
        self.requants[key] = out
        return out

    def input(self, v: Value) -> Value:
        """A region input, quantized with its solved parameters."""
        return self.quantized(v, self.params[v])

    def out_type(self, region: Region) -> TensorType:
        return act_type(self.params[region.output], region.output.type)

    # -- weights ------------------------------------------------------------------------------
    def weight_params(self, r: Region, x: Value) -> tuple[np.ndarray, WeightParams]:
        """The region's weights (output channel first) and their parameters: the solver's when it
        decided them, else computed here without bias correction (e.g. hand-made params)."""
        w, b = region_weights(r)
        wp = self.params.get(r.match.values["w"])
        if not isinstance(wp, WeightParams):
            wp = weight_params(w, b, float(qnn.scales_of(x.type)), self.config.per_channel)
        return w, wp

    def weights(self, w: np.ndarray, wp: WeightParams) -> Value:
        """Symmetric narrow-range int8 weights: per output channel (dim 0) when the scale is an
        array, per tensor when it is a scalar."""
        w = np.asarray(w, np.float32)
        scale = wp.scale
        axis = 0 if np.ndim(scale) else None
        ints = quantized_weights(w, wp)
        if axis is None:
            qt: Type = UniformQuantizedType(storage_type=I8, expressed_type=F32, scale=float(scale), zero_point=0,
                                            storage_min=-127, storage_max=127)
        else:
            qt = UniformQuantizedPerAxisType(storage_type=I8, expressed_type=F32,
                                             scales=tuple(float(s) for s in np.atleast_1d(scale)),
                                             zero_points=(0,) * w.shape[0], quantized_dimension=0,
                                             storage_min=-127, storage_max=127)
        return self.stored_constant(ints, I8, TensorType(w.shape, qt))

    def bias(self, b: np.ndarray | None, x: Value, w: Value, channels: int) -> Value | None:
        if b is None:
            return None
        b = np.broadcast_to(np.asarray(b, np.float32).reshape(-1), (channels,))
        s_in = np.float32(qnn.scales_of(x.type))
        s_w = np.broadcast_to(np.float32(qnn.scales_of(w.type)), (channels,))
        scale, _ = bias_qparams(s_in, s_w)
        ints = quantize_bias(b, scale, on_overflow="saturate")
        qt = UniformQuantizedPerAxisType(storage_type=I32, expressed_type=F32,
                                         scales=tuple(float(s) for s in np.atleast_1d(scale)),
                                         zero_points=(0,) * channels, quantized_dimension=0)
        return self.stored_constant(ints, I32, TensorType((channels,), qt))

    # -- the pass -----------------------------------------------------------------------------
    def run(self) -> Function:
        for op in self.src.ops:
            region = self.annotation.region_of(op)
            if op.opdef is arith.CONSTANT:
                continue
            if op.opdef is func.RETURN:
                self.emit(func.RETURN.build([self.floating(v) for v in op.operands], []))
            elif region is None:
                self.copy_float(op)
            elif op is region.root:
                self.lower_region(region)
        verify_function(self.fn)
        return self.fn

    def lower_region(self, region: Region) -> Value:
        out = region.pattern.lower(self, region)
        out.name_hint = integer_name(region.output.name_hint)
        out.op.label = out.op.label or region.label
        self.quants[region.output] = out
        return out

    def copy_float(self, op: Operation) -> None:
        new = Operation(op.opdef, [self.floating(v) for v in op.operands], [r.type for r in op.results],
                        dict(op.attributes), op.loc, op.label)
        self.emit(new)
        for old, r in zip(op.results, new.results):
            r.name_hint = old.name_hint
            self.floats[old] = r


def fixed_point(real: np.ndarray) -> dict:
    """The ``multiplier``/``shift`` attributes of a conv, FC or requantize for its real multipliers."""
    m, s = quantize_multipliers(real)
    return {"multiplier": m.tolist(), "shift": s.tolist()}


def lower(fn: Function, annotation: Annotation, params: Params, config: Config) -> Function:
    return Lowerer(fn, annotation, params, config).run()


