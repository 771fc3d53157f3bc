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

from ..ir import Function, Operation, StringAttr, Value, verify_function
from ..ir.builder import OpBuilder, function_like
from ..ir.dialects import arith, func, qnn, quant
from ..ir.mapping import IRMapping
from ..numerics import (bias_qparams, quantize_bias, quantize_multipliers,
                        quantize_tflite)
from ..types import (FloatType, IntegerType, TensorType, Type, UniformQuantizedPerAxisType,
                     UniformQuantizedType)
from .config import Config
from .naming import integer_name, requantized_name
from .params import (ActParams, Params, WeightParams, act_type, at_width, quantized_weights, region_bits,
                     region_weights, weight_params)
from .regions import Annotation, Region, constant_array

I8, I32, F32 = IntegerType(8), IntegerType(32), FloatType("f32")
STORAGE = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


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
        # each source value's float version and its first integer version (``quantized``)
        self.floats: IRMapping[Value] = IRMapping()
        self.quants: IRMapping[Value] = IRMapping()
        self.requants: dict[tuple, Value] = {}
        self.bits = 8   # the activation width of the region being lowered (params.region_bits)
        if arguments is None:
            self.fn = function_like(fn)
            bound = [(old, old.type) for old in fn.arguments]
        else:
            types = [t for _, t in arguments]
            self.fn = Function.create(f"{fn.name}_segment", types, [],
                                      arg_attrs=[{"quantir.name": StringAttr(f"in{i}")} for i in range(len(types))])
            bound = list(arguments)
        self.builder = OpBuilder.at_end(self.fn)
        for (old, t), new in zip(bound, self.fn.arguments):
            new.name_hint = old.name_hint
            is_int = isinstance(t, TensorType) and isinstance(t.element_type, UniformQuantizedType)
            (self.quants if is_int else self.floats).map(old, new)

    def finish(self, outputs: Sequence[Value]) -> Function:
        """End a segment: return ``outputs`` (named ``out0``, ``out1``...), verified."""
        self.emit(func.RETURN.build(list(outputs), []))
        self.fn.res_attrs = [{"quantir.name": StringAttr(f"out{i}")} for i in range(len(outputs))]
        self.fn.update_type()
        verify_function(self.fn)
        return self.fn

    # -- building helpers ---------------------------------------------------------------------
    def emit(self, op: Operation, like: Operation | None = None) -> Operation:
        """Append ``op``, with ``like``'s location and label where it has none."""
        return self.builder.insert(op, like)

    def constant(self, array: np.ndarray, element_type: Type | None = None) -> Value:
        return self.builder.constant(array, element_type)

    def stored_constant(self, ints: np.ndarray, storage: IntegerType, qtype: Type) -> Value:
        """Storage integers as a constant, reinterpreted as the quantized type (quant.scast)."""
        c = self.constant(np.asarray(ints).astype(STORAGE[storage.width]), storage)
        return self.emit(quant.SCAST.build([c], [qtype])).result

    # -- value versions -----------------------------------------------------------------------
    def floating(self, v: Value) -> Value:
        have = self.floats.lookup_or_none(v)
        if have is not None:
            return have
        array = constant_array(v)
        if array is not None:
            out = self.constant(array, v.type.element_type)
        else:   # not yet defined in float: the integer version, dequantized (or the lookup's error)
            out = self.emit(quant.DCAST.build([self.quants.lookup(v)], [v.type])).result
        out.name_hint = v.name_hint
        return self.floats.map(v, out)

    def quantized(self, v: Value, params: ActParams) -> Value:
        want = act_type(params, v.type)
        have = self.quants.lookup_or_none(v)
        if have is not None and have.type == want:
            return have
        key = (id(v), params.scale, params.zero_point) + ((params.bits,) if params.bits != 8 else ())
        if key in self.requants:
            return self.requants[key]
        array = constant_array(v)
        if have is not None:
            real = qnn.requantize_real_multiplier(have.type, want)
            m, s = quantize_multipliers(real)
            out = self.emit(qnn.REQUANTIZE.build([have], [want], multiplier=m.tolist(), shift=s.tolist())).result
        elif array is not None:
            limit = 2 ** (params.bits - 1)
            ints = quantize_tflite(array, np.float32(params.scale), params.zero_point, -limit, limit - 1)
            out = self.stored_constant(ints, want.element_type.storage_type, want)
        else:
            out = self.emit(quant.QCAST.build([self.floating(v)], [want])).result
        # the first integer version of a value is "<name>__q"; requantized copies get their own names
        out.name_hint = integer_name(v.name_hint) if have is None and array is None else \
            requantized_name(v.name_hint, len(self.requants))
        if have is None and array is None:
            self.quants.map(v, out)
        self.requants[key] = out
        return out

    def input(self, v: Value) -> Value:
        """A region input, quantized with its solved parameters at the region's width (an op with
        no int16 kernel reads an int16 value through a requantize to int8)."""
        return self.quantized(v, at_width(self.params[v], self.bits))

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
        # int32 for 16x8 too (quantir's quant types stop at 32 bits): LiteRT's FC then needs the op's
        # quantized_bias_type INT32 and accumulates in int32 (the interpreter refuses an overflow)
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
        out_params = self.params.get(region.output) if region.pattern.op.output_quantized else None
        # the output's width (the solver's: 16 under activations="int16" or a promotion, Config.int16)
        self.bits = out_params.bits if isinstance(out_params, ActParams) else region_bits(region,
                                                                                          self.config.activations)
        try:
            out = region.pattern.lower(self, region)
        finally:
            self.bits = 8
        out.op.label = out.op.label or region.label
        if not region.pattern.op.output_quantized:   # a bool or index result: the float ops after it read it as is
            out.name_hint = region.output.name_hint
            self.floats.map(region.output, out)
            return out
        out.name_hint = integer_name(region.output.name_hint)
        self.quants.map(region.output, out)
        return out

    def copy_float(self, op: Operation) -> None:
        """``op`` unchanged, on the float versions of its operands."""
        self.builder.clone(op, self.floats, operands=[self.floating(v) for v in op.operands])


def fixed_point(real: np.ndarray) -> dict:
    """The ``multiplier``/``shift`` attributes of a conv, FC or requantize for its real multipliers."""
    m, s = quantize_multipliers(real)
    return {"multiplier": m.tolist(), "shift": s.tolist()}


def lower(fn: Function, annotation: Annotation, params: Params, config: Config) -> Function:
    return Lowerer(fn, annotation, params, config).run()


