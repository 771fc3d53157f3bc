"""Integer lowering in one pass: calibrated float function -> ``qnn`` function.

Walk the float function once, in order. A region (see ``patterns``) becomes one ``qnn`` op
fed by the *quantized* versions of its inputs; a float op keeps running in float on the
*float* versions of its operands. The two maps below create those versions on demand:

- ``quantized(v, params)``: reuse the integer value when its parameters match, else
  ``qnn.requantize`` it; a float value gets a ``quant.qcast``; a constant is quantized at
  compile time (``arith.constant`` of storage integers + ``quant.scast``).
- ``floating(v)``: reuse the float value, else ``quant.dcast`` the integer one.

So a fully quantized CNN keeps one ``qcast`` per input and one ``dcast`` per output, and a
float op in the middle costs exactly one dcast before it and one qcast after it. Weights are
symmetric int8 per output channel (narrow range), bias int32 with scale input × weight, and
conv/FC/requantize carry their fixed-point (multiplier, shift) pairs as attributes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import QuantirError
from ..ir import Block, Function, Operation, Value, elements_attr, verify_function
from ..ir.dialects import arith, func, nn, qnn, quant
from ..ir.dialects.nn_conv import window_geometry
from ..numerics import (bias_qparams, quantize_bias, quantize_multipliers, quantize_tflite, quantize_weights,
                        symmetric_weight_qparams)
from ..types import FloatType, IntegerType, TensorType, Type, UniformQuantizedPerAxisType, UniformQuantizedType
from .calibrate import constant_array
from .config import Config
from .patterns import Annotation, Region
from .solver import ActParams

I8, I32, F32 = IntegerType(8), IntegerType(32), FloatType("f32")


def act_type(params: ActParams, like: Type) -> TensorType:
    q = UniformQuantizedType(storage_type=I8, expressed_type=F32, scale=params.scale, zero_point=params.zero_point)
    return TensorType(like.shape, q)


class Lowerer:
    def __init__(self, fn: Function, annotation: Annotation, params: dict[Value, ActParams], config: Config):
        self.src = fn
        self.annotation = annotation
        self.params = params
        self.config = config
        self.fn = Function(fn.name, fn.type, body=Block([a.type for a in fn.arguments]),
                           arg_attrs=[dict(a) for a in fn.arg_attrs], res_attrs=[dict(r) for r in fn.res_attrs],
                           attributes=dict(fn.attributes), loc=fn.loc)
        self.floats: dict[Value, Value] = {}
        self.quants: dict[Value, Value] = {}
        self.requants: dict[tuple[int, float, int], Value] = {}
        for old, new in zip(fn.arguments, self.fn.arguments):
            new.name_hint = old.name_hint
            self.floats[old] = new

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
        out.name_hint = f"{v.name_hint}__q" if have is None and array is None else \
            f"{v.name_hint}__q{len(self.requants)}"
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
    def weights(self, w: np.ndarray, bias: np.ndarray | None = None, input_scale: float | None = None) -> Value:
        """Symmetric narrow-range int8 weights, per output channel (dim 0) unless per_channel=False.

        With a bias, a channel's weight scale is raised where needed so its int32 bias stays
        within ±2^30 (LiteRT's converter does the same): a near-zero weight channel would
        otherwise get a tiny scale (the 1e-6 floor), a bias of billions of steps, and an
        accumulator that overflows int32.
        """
        w = np.asarray(w, np.float32)
        axis = 0 if self.config.per_channel else None
        scale, _ = symmetric_weight_qparams(w, axis=axis)
        if bias is not None and input_scale is not None:
            need = np.abs(np.asarray(bias, np.float64).reshape(-1)) / (np.float64(input_scale) * 2.0 ** 30)
            need = need if axis == 0 else need.max(initial=0.0)
            scale = np.maximum(np.asarray(scale, np.float64), need).astype(np.float32)
        ints = quantize_weights(w, scale, axis=axis)
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
                out = LOWERINGS[region.pattern.name](self, region)
                out.name_hint = f"{region.output.name_hint}__q"
                out.op.label = out.op.label or region.label
                self.quants[region.output] = out
        verify_function(self.fn)
        return self.fn

    def copy_float(self, op: Operation) -> None:
        new = Operation(op.opdef, [self.floating(v) for v in op.operands], [r.type for r in op.results],
                        dict(op.attributes), op.loc, op.label)
        self.emit(new)
        for old, r in zip(op.results, new.results):
            r.name_hint = old.name_hint
            self.floats[old] = r


# -- lowerings, one per pattern -------------------------------------------------------------------

def _window(op: Operation, kernel) -> dict:
    spatial = op.operands[0].type.shape[2:]
    g = window_geometry(spatial, kernel, {k: op.attr(k) for k in ("strides", "pads", "dilations", "auto_pad")},
                        ceil_mode=bool(op.attr("ceil_mode")) if "ceil_mode" in op.opdef.attributes else False)
    if any(p is None for p in g.pads_begin + g.pads_end):
        raise QuantirError(f"'{op.label or op.name}': padding depends on a dynamic spatial size")
    return {"strides": g.strides, "pads": tuple(g.pads_begin) + tuple(g.pads_end), "dilations": g.dilations}


def _fixed_point(real: np.ndarray) -> dict:
    m, s = quantize_multipliers(real)
    return {"multiplier": m.tolist(), "shift": s.tolist()}


def lower_conv(lw: Lowerer, r: Region) -> Value:
    conv = r.match.ops["op"]
    w_arr = r.match.consts["w"]
    x = lw.input(r.match["x"])
    b_arr = r.match.consts.get("b")
    w = lw.weights(w_arr, b_arr, qnn.scales_of(x.type))
    b = lw.bias(b_arr, x, w, w_arr.shape[0])
    y_t = lw.out_type(r)
    attrs = _window(conv, w_arr.shape[2:])
    op = qnn.CONV.build([x, w] + ([b] if b is not None else []), [y_t], group=conv.attr("group") or 1,
                        activation=r.activation, **attrs, **_fixed_point(qnn.conv_real_multipliers(x.type, w.type, y_t)))
    return lw.emit(op, conv).result


def lower_fc(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    w_arr = np.asarray(r.match.consts["w"], np.float32)
    b_arr = r.match.consts.get("b")
    if op.opdef is nn.GEMM:
        w_arr = w_arr if op.attr("trans_b") else w_arr.T
        w_arr = w_arr * np.float32(op.attr("alpha"))
        if b_arr is not None:
            b_arr = np.asarray(b_arr, np.float32) * np.float32(op.attr("beta"))
    else:
        w_arr = w_arr.T
    x = lw.input(r.match["x"])
    w = lw.weights(np.ascontiguousarray(w_arr), b_arr, qnn.scales_of(x.type))
    b = lw.bias(b_arr, x, w, w_arr.shape[0])
    y_t = lw.out_type(r)
    new = qnn.FULLY_CONNECTED.build([x, w] + ([b] if b is not None else []), [y_t], activation=r.activation,
                                    **_fixed_point(qnn.fc_real_multipliers(x.type, w.type, y_t)))
    return lw.emit(new, op).result


def _binary(opdef) -> Callable[[Lowerer, Region], Value]:
    def lower(lw: Lowerer, r: Region) -> Value:
        a, b = lw.input(r.match["a"]), lw.input(r.match["b"])
        return lw.emit(opdef.build([a, b], [lw.out_type(r)], activation=r.activation), r.match.ops["op"]).result
    return lower


def lower_concat(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    out = lw.params[r.output]
    xs = [lw.quantized(v, out) for v in op.operands]
    return lw.emit(qnn.CONCAT.build(xs, [lw.out_type(r)], axis=op.attr("axis")), op).result


def _pool(opdef) -> Callable[[Lowerer, Region], Value]:
    def lower(lw: Lowerer, r: Region) -> Value:
        op = r.match.ops["op"]
        kernel = op.attr("kernel_shape")
        attrs = _window(op, kernel)
        x = lw.input(r.match["x"])
        return lw.emit(opdef.build([x], [lw.out_type(r)], kernel_shape=kernel, strides=attrs["strides"],
                                   pads=attrs["pads"]), op).result
    return lower


def lower_mean(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    axes, keep = ((2, 3), 1) if op.opdef is nn.GLOBAL_AVERAGE_POOL else (op.attr("axes"), op.attr("keepdims"))
    rank = len(op.operands[0].type.shape)
    axes = tuple(a + rank if a < 0 else a for a in axes)
    return lw.emit(qnn.MEAN.build([lw.input(r.match["x"])], [lw.out_type(r)], axes=axes, keepdims=keep), op).result


def lower_pad(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    return lw.emit(qnn.PAD.build([lw.input(r.match["x"])], [lw.out_type(r)], pads=op.attr("pads")), op).result


def lower_resize(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    mode = op.attr("coordinate_transformation_mode")
    y_t = lw.out_type(r)
    return lw.emit(qnn.RESIZE_BILINEAR.build([lw.input(r.match["x"])], [y_t], sizes=y_t.shape[2:],
                                             half_pixel_centers=mode == "half_pixel",
                                             align_corners=mode == "align_corners"), op).result


def _unary(opdef, **fixed_attrs) -> Callable[[Lowerer, Region], Value]:
    def lower(lw: Lowerer, r: Region) -> Value:
        op = r.match.ops.get("op") or r.match.ops["act"]
        attrs = {k: op.attr(k) for k in opdef.attributes if k in op.opdef.attributes}
        attrs.update(fixed_attrs)
        if opdef is qnn.CLAMP:
            attrs["activation"] = r.activation
        return lw.emit(opdef.build([lw.input(r.match["x"])], [lw.out_type(r)], **attrs), op).result
    return lower


def lower_data_movement(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    x = lw.input(r.match["x"])
    new = Operation(op.opdef, [x], [lw.out_type(r)], dict(op.attributes), op.loc, op.label)
    return lw.emit(new).result


LOWERINGS: dict[str, Callable[[Lowerer, Region], Value]] = {
    "conv": lower_conv, "gemm": lower_fc, "matmul_bias": lower_fc,
    "add": _binary(qnn.ADD), "sub": _binary(qnn.SUB), "mul": _binary(qnn.MUL),
    "concat": lower_concat, "max_pool": _pool(qnn.MAX_POOL), "average_pool": _pool(qnn.AVERAGE_POOL),
    "mean": lower_mean, "pad": lower_pad, "resize": lower_resize,
    "softmax": _unary(qnn.SOFTMAX), "sigmoid": _unary(qnn.LOGISTIC), "tanh": _unary(qnn.TANH),
    "hard_swish": _unary(qnn.HARD_SWISH), "leaky_relu": _unary(qnn.LEAKY_RELU), "relu": _unary(qnn.CLAMP),
    "reshape": lower_data_movement, "transpose": lower_data_movement, "squeeze": lower_data_movement,
}


def lower(fn: Function, annotation: Annotation, params: dict[Value, ActParams], config: Config) -> Function:
    return Lowerer(fn, annotation, params, config).run()
