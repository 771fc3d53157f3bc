"""quantir's integer module -> a .tflite model that LiteRT runs with the very same integers.

The IR keeps ONNX's NCHW layout; TFLite's builtin ops want NHWC activations. Every IR value
may exist in TFLite in two *forms*: ``ASIS`` (the IR array itself) and ``NHWC`` (a 4-D value
transposed by ``(0, 2, 3, 1)``). Each op asks for the form it needs and the exporter makes it
on demand — once per value — with a TRANSPOSE, or with a free RESHAPE when the move does not
change the order of elements (one channel, or 1x1 spatial). So the graph's interface keeps the
model's own layout (the same feeds work for the ONNX model, the IR and the .tflite), a
conv -> conv chain has no transposes in between, and the only transposes sit where the data
really changes layout (the input, a flatten of a feature map).

Op by op (quantized per LiteRT's int8 spec; ``qnn`` ops already carry its parameters):

=======================  ======================================================================
IR                       TFLite
=======================  ======================================================================
quant.qcast / dcast      QUANTIZE (float32 -> int8) / DEQUANTIZE
qnn.requantize           QUANTIZE (int8 -> int8)
qnn.conv                 CONV_2D (OHWI filter, axis 0) or DEPTHWISE_CONV_2D ([1, KH, KW, C],
                         axis 3) when group == C_in; explicit pads that are neither SAME nor
                         VALID become a PAD (with the input's zero point, i.e. real 0) + VALID
qnn.fully_connected      FULLY_CONNECTED (keep_num_dims for rank > 2)
qnn.add / sub / mul      ADD / SUB / MUL with the fused activation
qnn.*_pool, mean, ...    AVERAGE_POOL_2D (SAME/VALID only), MAX_POOL_2D (other pads: a PADV2 with
                         the storage minimum + VALID), MEAN, CONCATENATION, PAD (PADV2 for a
                         pad ``value``), RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, SOFTMAX,
                         LOGISTIC, TANH, HARD_SWISH, GELU (approximate in its options),
                         LEAKY_RELU
qnn.clamp                RELU / RELU6 / RELU_N1_TO_1 (QUANTIZE when it only rescales)
nn.reshape & co.         RESHAPE (with several dynamic dims: its int32 target gathered at run time,
                         SHAPE -> CONCATENATION -> GATHER; squeeze/unsqueeze -> SQUEEZE /
                         EXPAND_DIMS); nn.transpose -> TRANSPOSE; nn.slice -> STRIDED_SLICE
                         (positive steps, static sliced dims); nn.identity -> nothing
qnn.unidirectional_lstm  UNIDIRECTIONAL_SEQUENCE_LSTM (8x8_16, time major, LiteRT's 24 inputs,
                         variable state tensors, 5 intermediates); reverse: REVERSE_V2 on the
                         time axis before and after; a dynamic batch is refused
=======================  ======================================================================

A dynamic dim (``?``: the batch, or H and W) is written as 1 with a shape signature of -1; LiteRT
resizes at run time, and sizes that follow the input (a resize's ``factors``) are computed from
its SHAPE. Float32 ``nn`` ops (a dynamic-range model's, or ops the quantizer left float) are
LiteRT's float32 builtins (:mod:`.export_float`; a GELU written out as erf arithmetic is one GELU).
Anything else — a float op with no float32 builtin, a grouped (non-depthwise) convolution, a pool
whose padding TFLite cannot express — raises :class:`~quantir.errors.UnsupportedOpError` naming the op.

``io="int8"`` drops the input QUANTIZE and output DEQUANTIZE: the model then takes and
returns the int8 tensors (with their quantization parameters).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable

import numpy as np

from quantir.backends.tflite.model import Model, Operator, Quantization
from quantir.backends.tflite.schema import (
    ActivationFunctionType,
    AddOptions,
    ArgMaxOptions,
    EqualOptions,
    GreaterEqualOptions,
    GreaterOptions,
    LessEqualOptions,
    LessOptions,
    MaximumMinimumOptions,
    NotEqualOptions,
    ShapeOptions,
    BuiltinOperator,
    ConcatenationOptions,
    Conv2DOptions,
    DepthwiseConv2DOptions,
    FullyConnectedOptions,
    GatherOptions,
    GeluOptions,
    BatchMatMulOptions,
    L2NormOptions,
    LogSoftmaxOptions,
    LeakyReluOptions,
    MulOptions,
    Padding,
    Pool2DOptions,
    ReducerOptions,
    ReshapeOptions,
    ResizeBilinearOptions,
    ResizeNearestNeighborOptions,
    SoftmaxOptions,
    SpaceToBatchNDOptions,
    BatchToSpaceNDOptions,
    SpaceToDepthOptions,
    SplitVOptions,
    SqueezeOptions,
    StridedSliceOptions,
    SubOptions,
    SquaredDifferenceOptions,
    TransposeConvOptions,
    UnidirectionalSequenceLSTMOptions,
)
from quantir.backends.tflite.schema import TensorType as TFLiteTensorType
from quantir.backends.naming import unique_name
from quantir.backends.tflite.writer import ModelBuilder
from quantir.errors import QuantirError, ResourceError, UnsupportedOpError
from quantir.ir import Function, Module, Operation, Value
from quantir.ir.dialects import func, nn, qnn, quant
from quantir.ir.mapping import IRMapping
from quantir.ir.dialects.nn_conv import window_geometry
from quantir.ir.dialects.nn_index import slice_bounds
from quantir.ir.dialects.nn_shape import shape_slice
from quantir.types import FloatType, IntegerType, QuantizedType, TensorType, UniformQuantizedPerAxisType

__all__ = ["Form", "TFLiteExport", "export_tflite", "save_tflite", "NHWC_PERM", "NCHW_PERM"]

NHWC_PERM = (0, 2, 3, 1)   # NCHW array -> NHWC array
NCHW_PERM = (0, 3, 1, 2)   # NHWC array -> NCHW array
OP = BuiltinOperator


class Form(Enum):
    ASIS = "asis"
    NHWC = "nhwc"


@dataclass
class TFLiteExport:
    """The model, plus where each IR value lives in it.

    ``bindings[name] = (tensor_index, perm)``: the TFLite tensor holding the IR value
    ``name``, and the permutation with ``np.transpose(ir_array, perm) == tflite_array``
    (None when equal) — what a bit-exactness check compares, intermediate by intermediate.
    """

    model: Model
    bindings: dict[str, tuple[int, tuple[int, ...] | None]] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        from quantir.backends.tflite.writer import write_model
        return write_model(self.model)


_ACTIVATIONS = {"NONE": ActivationFunctionType.NONE, "RELU": ActivationFunctionType.RELU,
                "RELU6": ActivationFunctionType.RELU6, "RELU_N1_TO_1": ActivationFunctionType.RELU_N1_TO_1}


def _act(op: Operation) -> ActivationFunctionType:
    return _ACTIVATIONS[op.attr("activation") or "NONE"]


def _what(op: Operation) -> str:
    return f"'{op.name}'" + (f" ({op.label})" if op.label else "")


def _qtype(v: Value) -> QuantizedType | None:
    t = v.type
    e = t.element_type if isinstance(t, TensorType) else t
    return e if isinstance(e, QuantizedType) else None


def _quantization(v: Value, axis_map: dict[int, int] | None = None) -> Quantization | None:
    q = _qtype(v)
    if q is None:
        return None
    if isinstance(q, UniformQuantizedPerAxisType):
        axis = q.quantized_dimension
        return Quantization(q.scales, q.zero_points, (axis_map or {}).get(axis, axis))
    return Quantization([q.scale], [q.zero_point])


def _dtype(v: Value) -> np.dtype:
    q = _qtype(v)
    if q is not None:
        return np.dtype(q.storage_numpy_dtype)
    e = v.type.element_type
    if e == FloatType("f32"):
        return np.dtype(np.float32)
    if e == IntegerType(32):   # plain int32: GATHER indices a .tflite model takes at run time
        return np.dtype(np.int32)
    if e in (IntegerType(64), IntegerType(1)):   # what ARG_MAX, SHAPE and the comparisons write
        return np.dtype(np.int64 if e.width == 64 else np.bool_)
    raise UnsupportedOpError(f"value '{v.name_hint}' of type {v.type} has no TFLite tensor type "
                             "(only int8/int32 quantized, int32 and float32 tensors are written)")


class _Exporter:
    def __init__(self, fn: Function, io: str):
        if io not in ("float", "int8"):
            raise QuantirError(f"io must be 'float' or 'int8', not {io!r}")
        self.fn = fn
        self.io = io
        self.b = ModelBuilder(description="quantir int8")
        # each IR value -> its tensors by form; a mapped value has at least one
        self.forms: IRMapping[dict[Form, int]] = IRMapping()
        self.bindings: dict[str, tuple[int, tuple[int, ...] | None]] = {}
        self.names: set[str] = set()
        self.next_suffix: dict[str, int] = {}   # base -> the first suffix not yet tried for it

    # -- tensors ------------------------------------------------------------------------------
    def _name(self, base: str) -> str:
        """``base`` (``t`` when empty) if free, else the first free ``base_<k>``, k = 1, 2, ..."""
        return unique_name(base or "t", "_", self.names, self.next_suffix)

    def _shape(self, v: Value, form: Form) -> tuple[tuple[int, ...], tuple[int, ...]]:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None:
            raise UnsupportedOpError(f"value '{v.name_hint}' has an unranked type {t}; TFLite needs ranked tensors")
        shape = tuple(t.shape)
        if form is Form.NHWC:
            shape = tuple(shape[i] for i in NHWC_PERM)
        static = tuple(1 if d is None else d for d in shape)
        signature = tuple(-1 if d is None else d for d in shape) if None in shape else ()
        return static, signature

    def new_tensor(self, v: Value, form: Form, *, dtype=None, quantization: Quantization | None = None,
                   suffix: str = "", bind: bool = True) -> int:
        shape, signature = self._shape(v, form)
        q = quantization if quantization is not None else _quantization(v)
        idx = self.b.add_tensor(self._name((v.name_hint or "t") + suffix), shape, dtype or _dtype(v), q,
                                shape_signature=signature)
        self.bind(v, form, idx)
        if bind and v.name_hint and v.name_hint not in self.bindings:
            self.bindings[v.name_hint] = (idx, NHWC_PERM if form is Form.NHWC else None)
        return idx

    def constant(self, data: np.ndarray, name: str, quantization: Quantization | None = None) -> int:
        if data.nbytes >= 1 << 31:   # e.g. a lazy splat of a file-chosen shape: flatbuffers hold < 2 GiB
            raise ResourceError(f"constant '{name}' of shape {list(data.shape)} needs {data.nbytes} bytes; "
                                f"a .tflite file holds less than 2 GiB")
        # (np.ascontiguousarray makes a 0-d array 1-D: keep the scalar's shape)
        return self.b.add_constant(self._name(name), np.ascontiguousarray(data).reshape(np.shape(data)), quantization)

    def int32(self, values, name: str) -> int:
        return self.constant(np.asarray(values, np.int32), name)

    def bind(self, v: Value, form: Form, idx: int) -> None:
        """Tensor ``idx`` holds ``v`` in ``form``."""
        have = self.forms.lookup_or_none(v)
        if have is None:
            have = self.forms.map(v, {})
        have[form] = idx

    def has(self, v: Value, form: Form) -> bool:
        return form in (self.forms.lookup_or_none(v) or {})

    def get(self, v: Value, form: Form) -> int:
        """The tensor of ``v`` in ``form``: constants are written in it, others converted once."""
        have = self.forms.lookup_or_none(v) or {}
        if form in have:
            return have[form]
        data = quant.stored_constant(v)
        if data is not None:
            arr = np.asarray(data)
            arr = arr.transpose(NHWC_PERM) if form is Form.NHWC else arr
            idx = self.constant(arr, (v.name_hint or "const") + ("/nhwc" if form is Form.NHWC else ""),
                                _quantization(v))
            self.bind(v, form, idx)
            return idx
        have = self.forms.lookup(v)   # (a value no op defined yet: the lookup's error names it)
        (src_form, src), = list(have.items())[:1]
        dst = self.new_tensor(v, form, suffix="/" + form.value, bind=False)
        if self.same_order(v) and sum(d is None for d in v.type.shape) <= 1:   # RESHAPE takes one -1
            self.reshape(src, dst, v, form)
        else:
            perm = NHWC_PERM if form is Form.NHWC else NCHW_PERM
            self.b.add_operator(OP.TRANSPOSE, [src, self.int32(perm, f"{v.name_hint}/perm")], [dst])
        return dst

    @staticmethod
    def same_order(v: Value) -> bool:
        """NCHW and NHWC hold the elements in the same order when C == 1 or H == W == 1."""
        shape = v.type.shape
        return shape[1] == 1 or (shape[2] == 1 and shape[3] == 1)

    def is4d(self, v: Value) -> bool:
        return isinstance(v.type, TensorType) and v.type.shape is not None and len(v.type.shape) == 4

    def prefer(self, *values: Value) -> Form:
        """NHWC when every operand is 4-D and one of them already lives in NHWC, else ASIS."""
        if all(self.is4d(v) for v in values) and any(self.has(v, Form.NHWC) for v in values):
            return Form.NHWC
        return Form.ASIS

    def reshape(self, src: int, dst: int, like: Value, form: Form) -> None:
        _, signature = self._shape(like, form)
        shape = self.b.tensors[dst].shape
        target = tuple(signature) if signature else tuple(shape)
        if sum(d == -1 for d in target) > 1:
            raise UnsupportedOpError(f"reshape to '{like.name_hint}': more than one dynamic dim")
        self.b.add_operator(OP.RESHAPE, [src, self.int32(target, f"{like.name_hint}/shape")], [dst],
                            ReshapeOptions(new_shape=tuple(int(d) for d in target)))

    # -- the walk -----------------------------------------------------------------------------
    def run(self) -> TFLiteExport:
        int8_args = self._int8_boundary_args()
        inputs = []
        for arg in self.fn.arguments:
            if arg in int8_args:
                qcast = int8_args[arg]
                inputs.append(self.new_tensor(qcast.results[0], Form.ASIS))   # the argument itself is never read
            else:
                inputs.append(self.new_tensor(arg, Form.ASIS))
        ret = None
        absorbed, fused = _float_fusions(self.fn)
        for op in self.fn.ops:
            if op.opdef is func.RETURN:
                ret = op
            elif op in absorbed:
                continue   # inside a chain one builtin computes (a float GELU written out)
            elif quant.stored_constant(op.results[0]) is not None:
                continue   # constants are written where used, in the form the user needs
            elif op.opdef is quant.QCAST and op.operands[0] in int8_args:
                continue
            elif op.opdef is quant.DCAST and self.io == "int8" and self._returned_only(op.results[0]):
                self.forms.map(op.results[0], {Form.ASIS: self.get(op.operands[0], Form.ASIS)})
            else:
                rule = fused.get(op) or RULES.get(op.opdef) or _hybrid_rules().get(op.opdef) or \
                    _float_rules().get(op.opdef)
                if rule is None:
                    still_float = _qtype(op.results[0]) is None
                    raise UnsupportedOpError(f"{_what(op)} has no int8 TFLite form"
                                             + (": the op is still float, and quantir writes no float32 form of it"
                                                if still_float else ""))
                rule(self, op)
        outputs = [self.get(v, Form.ASIS) for v in (ret.operands if ret is not None else ())]
        self.b.set_io(inputs, outputs)
        return TFLiteExport(self.b.build(), self.bindings)

    def _returned_only(self, v: Value) -> bool:
        return bool(v.uses) and all(user.opdef is func.RETURN for user, _ in v.uses)

    def _int8_boundary_args(self) -> dict[Value, Operation]:
        if self.io != "int8":
            return {}
        out = {}
        for arg in self.fn.arguments:
            users = [u for u, _ in arg.uses]
            if len(users) != 1 or users[0].opdef is not quant.QCAST:
                raise UnsupportedOpError(f"io='int8' needs every input to feed exactly one quant.qcast; "
                                         f"input '{arg.name_hint}' feeds {[u.name for u in users]}")
            out[arg] = users[0]
        return out

    def emit(self, code, op: Operation, inputs: list[int], form: Form, options=None,
             version: int | None = None) -> int:
        y = self.new_tensor(op.results[0], form)
        self.b.add_operator(code, inputs, [y], options, version=version)
        return y


# -- rules, one per IR op -------------------------------------------------------------------------

def _elementwise(code, options: Callable[[Operation], object] | None = None):
    def rule(ex: _Exporter, op: Operation) -> None:
        form = ex.prefer(op.operands[0])
        ex.emit(code, op, [ex.get(op.operands[0], form)], form, options(op) if options else None)
    return rule


def _binary(code, options_type):
    def rule(ex: _Exporter, op: Operation) -> None:
        a, b = op.operands
        form = ex.prefer(a, b)   # NHWC only when both are 4-D: broadcasting then holds in either layout
        ex.emit(code, op, [ex.get(a, form), ex.get(b, form)], form,
                options_type(fused_activation_function=_act(op)) if hasattr(options_type, "fused_activation_function")
                else options_type())
    return rule


def _same_or_valid(pads, hw, kernel, strides, dilations=(1, 1)) -> Padding | None:
    """TFLite's VALID is no padding; its SAME is ONNX's SAME_UPPER (the odd pixel at the end)."""
    pads = tuple(int(p) for p in (pads or (0, 0, 0, 0)))
    if pads == (0, 0, 0, 0):
        return Padding.VALID
    same = window_geometry(hw, kernel, {"strides": strides, "dilations": dilations, "auto_pad": "SAME_UPPER"})
    if pads == tuple(same.pads_begin) + tuple(same.pads_end):
        return Padding.SAME
    return None


def _padding(op: Operation, hw, kernel, strides, dilations=(1, 1)) -> Padding | None:
    """A conv/pool's padding: auto_pad SAME_UPPER (pads that follow a dynamic size) is SAME; so are
    fixed pads equal to SAME's on a dynamic axis with stride 1, where SAME pads e - 1 at any size."""
    if op.attr("auto_pad") == "SAME_UPPER":
        return Padding.SAME
    hw = [(k - 1) * d + 1 if n is None and s == 1 else n for n, k, s, d in zip(hw, kernel, strides, dilations)]
    return _same_or_valid(op.attr("pads"), hw, kernel, strides, dilations)


def _explicit_pad(ex: _Exporter, x: Value, src: int, pads, value: int | None = None) -> int:
    """The NHWC tensor ``src`` of ``x`` padded by ONNX ``pads`` (t, l, b, r): PAD with the zero point,
    or PADV2 with the stored integer ``value``."""
    t, left, bt, r = (int(p) for p in pads)
    shape, sig = ex._shape(x, Form.NHWC)
    grown = (shape[0], shape[1] + t + bt, shape[2] + left + r, shape[3])
    padded = ex.b.add_tensor(ex._name(f"{x.name_hint}/pad"), grown, _dtype(x), _quantization(x),
                             shape_signature=tuple(-1 if d == -1 else g for d, g in zip(sig, grown)) if sig else ())
    inputs = [src, ex.int32([[0, 0], [t, bt], [left, r], [0, 0]], f"{x.name_hint}/paddings")]
    if value is None:
        ex.b.add_operator(OP.PAD, inputs, [padded])
    else:
        ex.b.add_operator(OP.PADV2, inputs + [_pad_value(ex, x, value)], [padded])
    return padded


def _pad_value(ex: _Exporter, v: Value, value: int) -> int:
    """PADV2's constant_values: one stored integer, quantized like the padded tensor ``v``."""
    return ex.constant(np.asarray([int(value)], _dtype(v)), f"{v.name_hint}/pad_value", _quantization(v))


def conv(ex: _Exporter, op: Operation) -> None:
    x, w = op.operands[0], op.operands[1]
    xs, ws = x.type.shape, w.type.shape
    weights = quant.stored_constant(w)
    if weights is None:
        raise UnsupportedOpError(f"{_what(op)}: TFLite needs constant weights")
    group = int(op.attr("group") or 1)
    depthwise = group > 1 and group == xs[1] and ws[1] == 1
    if group > 1 and not depthwise:
        raise UnsupportedOpError(f"{_what(op)}: grouped convolution (group {group} of {xs[1]} channels) has no "
                                 "int8 TFLite kernel; only depthwise (group == channels) is exported")
    strides = tuple(op.attr("strides") or (1, 1))
    dilations = tuple(op.attr("dilations") or (1, 1))
    src = ex.get(x, Form.NHWC)
    padding = _padding(op, xs[2:], ws[2:], strides, dilations)
    if padding is None:   # explicit pads: PAD with the zero point (real 0), then VALID
        src, padding = _explicit_pad(ex, x, src, op.attr("pads")), Padding.VALID
    c_out = ws[0]
    bias_v = op.operands[2] if len(op.operands) > 2 else None
    per_tensor_w = not isinstance(_qtype(w), UniformQuantizedPerAxisType)
    # 16x8: an int64 bias (LiteRT's int64 accumulator; DEPTHWISE_CONV_2D takes no other, and CONV_2D
    # would read an int32 one as int64 without quantized_bias_type)
    bias_dtype = np.int64 if _qtype(x).storage_type.width == 16 else np.int32
    if bias_v is not None:
        bias_q = _quantization(bias_v)
        if per_tensor_w:
            bias_q = Quantization(bias_q.scale[:1], bias_q.zero_point[:1])
        bias = ex.constant(np.asarray(quant.stored_constant(bias_v), bias_dtype), f"{bias_v.name_hint or 'bias'}",
                           bias_q)
    else:   # a zero bias: LiteRT's kernels want one; its scale is input x weight by definition
        s_in = np.float32(_qtype(x).scale)
        s_w = np.atleast_1d(np.float32(qnn.scales_of(w.type)))
        scales = (s_in * s_w).astype(np.float64)
        bias = ex.constant(np.zeros(c_out, bias_dtype), f"{op.results[0].name_hint}/bias",
                           Quantization(scales, [0] * len(scales)))
    common = dict(padding=padding, stride_w=strides[1], stride_h=strides[0], fused_activation_function=_act(op),
                  dilation_w_factor=dilations[1], dilation_h_factor=dilations[0])
    if depthwise:
        filt = ex.constant(np.asarray(weights).transpose(1, 2, 3, 0), f"{w.name_hint or 'filter'}/1hwc",
                           _quantization(w, {0: 3}))
        options = DepthwiseConv2DOptions(depth_multiplier=c_out // xs[1], **common)
        ex.emit(OP.DEPTHWISE_CONV_2D, op, [src, filt, bias], Form.NHWC, options)
    else:
        filt = ex.constant(np.asarray(weights).transpose(0, 2, 3, 1), f"{w.name_hint or 'filter'}/ohwi",
                           _quantization(w))
        ex.emit(OP.CONV_2D, op, [src, filt, bias], Form.NHWC, Conv2DOptions(**common))


def transpose_conv(ex: _Exporter, op: Operation) -> None:
    """TRANSPOSE_CONV (output_shape, OHWI weights, input, bias). The output shape is a constant for a
    static result; with a dynamic batch it is computed from the input's: SHAPE · [1, s_h, s_w, 0] +
    [0, k_h − s_h + adjust_h, k_w − s_w + adjust_w, C_out] (= [N, s·(in − 1) + k + adjust, ..., C_out])."""
    x, w = op.operands[0], op.operands[1]
    weights = quant.stored_constant(w)
    if weights is None:
        raise UnsupportedOpError(f"{_what(op)}: TFLite needs constant weights")
    c_out, _, kh, kw = w.type.shape
    (sh, sw), (ah, aw) = op.attr("strides"), op.attr("adjust")
    src = ex.get(x, Form.NHWC)
    y_shape, y_sig = ex._shape(op.results[0], Form.NHWC)
    if y_sig:
        xs = ex.b.add_tensor(ex._name(f"{x.name_hint}/shape"), (4,), np.int32)
        ex.b.add_operator(OP.SHAPE, [src], [xs], ShapeOptions(out_type=TFLiteTensorType.INT32))
        scaled = ex.b.add_tensor(ex._name(f"{op.results[0].name_hint}/scaled_shape"), (4,), np.int32)
        ex.b.add_operator(OP.MUL, [xs, ex.int32([1, sh, sw, 0], f"{op.results[0].name_hint}/strides")], [scaled],
                          MulOptions())
        out_shape = ex.b.add_tensor(ex._name(f"{op.results[0].name_hint}/output_shape"), (4,), np.int32)
        ex.b.add_operator(OP.ADD, [scaled, ex.int32([0, kh - sh + ah, kw - sw + aw, c_out],
                                                    f"{op.results[0].name_hint}/size_offset")], [out_shape],
                          AddOptions())
    else:
        out_shape = ex.int32(y_shape, f"{op.results[0].name_hint}/output_shape")
    filt = ex.constant(np.asarray(weights).transpose(0, 2, 3, 1), f"{w.name_hint or 'filter'}/ohwi", _quantization(w))
    inputs = [out_shape, filt, src]
    if len(op.operands) > 2:
        bias_v = op.operands[2]
        bias_q = _quantization(bias_v)
        if not isinstance(_qtype(w), UniformQuantizedPerAxisType):
            bias_q = Quantization(bias_q.scale[:1], bias_q.zero_point[:1])
        inputs.append(ex.constant(np.asarray(quant.stored_constant(bias_v), np.int32), bias_v.name_hint or "bias",
                                  bias_q))
    padding = Padding.SAME if op.attr("padding") == "SAME" else Padding.VALID
    # 16x8 with an int32 bias: LiteRT reads it as int32 only when the option says so (else as int64)
    wide = len(op.operands) > 2 and _qtype(op.operands[0]).storage_type.width == 16
    bias_type = {"quantized_bias_type": TFLiteTensorType.INT32} if wide else {}
    ex.emit(OP.TRANSPOSE_CONV, op, inputs, Form.NHWC,
            TransposeConvOptions(padding=padding, stride_h=sh, stride_w=sw, fused_activation_function=_act(op),
                                 **bias_type))

def fully_connected(ex: _Exporter, op: Operation) -> None:
    x, w = op.operands[0], op.operands[1]
    weights = quant.stored_constant(w)
    if weights is None:
        raise UnsupportedOpError(f"{_what(op)}: TFLite needs constant weights")
    inputs = [ex.get(x, Form.ASIS), ex.constant(np.asarray(weights), w.name_hint or "weights", _quantization(w))]
    if len(op.operands) > 2:
        b = op.operands[2]
        q = _quantization(b)
        if not isinstance(_qtype(w), UniformQuantizedPerAxisType):
            q = Quantization(q.scale[:1], q.zero_point[:1])
        inputs.append(ex.constant(np.asarray(quant.stored_constant(b), np.int32), b.name_hint or "bias", q))
    else:
        inputs.append(-1)
    keep = len(x.type.shape) > 2
    # 16x8 with an int32 bias: LiteRT reads it as int32 only when the option says so (else as int64)
    wide = len(op.operands) > 2 and _qtype(x).storage_type.width == 16
    bias_type = {"quantized_bias_type": TFLiteTensorType.INT32} if wide else {}
    ex.emit(OP.FULLY_CONNECTED, op, inputs, Form.ASIS,
            FullyConnectedOptions(fused_activation_function=_act(op), keep_num_dims=keep, **bias_type))


_LSTM_GATES = ("input", "forget", "cell", "output")   # LiteRT's order, the IR op's axis 0


def unidirectional_lstm(ex: _Exporter, op: Operation) -> None:
    """UNIDIRECTIONAL_SEQUENCE_LSTM, full integer (8x8_16), time major, with LiteRT's 24 inputs
    (``lstm_shared.h``): the input, per gate an ``[H, I]`` and an ``[H, H]`` int8 weight (per tensor,
    the gate's scale) and an int32 ``[H]`` bias, no peephole, projection or layer norm; the
    output_state (int8, the result's parameters) and cell_state (int16, scale 2**cell_scale_log2)
    as variable tensors without data (LiteRT zeroes them: the int8 one to its zero point); five
    intermediates, four int16 gate tensors at 2**-12 (read only with layer norm) and the hidden one
    (int8, the result's parameters), as the converter writes them. ``reverse``: a REVERSE_V2 on
    the time axis before and after (copies of the stored integers)."""
    x, w, r, b = op.operands
    y = op.results[0]
    arrays = [quant.stored_constant(v) for v in (w, r, b)]
    if any(a is None for a in arrays):
        raise UnsupportedOpError(f"{_what(op)}: TFLite needs constant weights, recurrent weights and bias")
    batch = x.type.shape[1]
    hidden = w.type.shape[1]
    if batch is None:
        raise UnsupportedOpError(
            f"{_what(op)}: a dynamic batch has no UNIDIRECTIONAL_SEQUENCE_LSTM form: LiteRT keeps the states in "
            "variable tensors of the batch written in the file, which it never resizes (its Prepare checks "
            "output_state and cell_state hold n_batch x units elements and refuses any other batch); export with "
            "a static batch")
    name = y.name_hint or "lstm"
    w_scales = np.atleast_1d(qnn.scales_of(w.type))
    r_scales = np.atleast_1d(qnn.scales_of(r.type))
    b_scales = np.atleast_1d(qnn.scales_of(b.type))
    weights, recurrent, bias = (np.asarray(a) for a in arrays)
    y_q = _quantization(y)
    x_shape, x_sig = ex._shape(x, Form.ASIS)
    y_shape, y_sig = ex._shape(y, Form.ASIS)
    reverse = bool(op.attr("reverse"))
    src = ex.get(x, Form.ASIS)
    if reverse:
        time_axis = ex.int32([0], f"{name}/time_axis")
        rev = ex.b.add_tensor(ex._name(f"{name}/reversed_input"), x_shape, _dtype(x), _quantization(x),
                              shape_signature=x_sig)
        ex.b.add_operator(OP.REVERSE_V2, [src, time_axis], [rev])
        src = rev
    inputs = [src]
    inputs += [ex.constant(np.ascontiguousarray(weights[g]), f"{name}/input_to_{gate}_weights",
                           Quantization([w_scales[g]], [0])) for g, gate in enumerate(_LSTM_GATES)]
    inputs += [ex.constant(np.ascontiguousarray(recurrent[g]), f"{name}/recurrent_to_{gate}_weights",
                           Quantization([r_scales[g]], [0])) for g, gate in enumerate(_LSTM_GATES)]
    inputs += [-1, -1, -1]   # cell_to_{input,forget,output} peepholes
    inputs += [ex.constant(np.ascontiguousarray(bias[g], np.int32), f"{name}/{gate}_gate_bias",
                           Quantization([b_scales[g]], [0])) for g, gate in enumerate(_LSTM_GATES)]
    inputs += [-1, -1]   # projection weights and bias
    inputs.append(ex.b.add_tensor(ex._name(f"{name}/output_state"), (batch, hidden), np.int8, y_q, is_variable=True))
    cell_q = Quantization([2.0 ** int(op.attr("cell_scale_log2"))], [0])
    inputs.append(ex.b.add_tensor(ex._name(f"{name}/cell_state"), (batch, hidden), np.int16, cell_q, is_variable=True))
    inputs += [-1, -1, -1, -1]   # layer-norm coefficients
    gate_q = Quantization([2.0 ** -12], [0])
    intermediates = [ex.b.add_tensor(ex._name(f"{name}/{gate}_intermediate"), (0,), np.int16, gate_q)
                     for gate in _LSTM_GATES]
    intermediates.append(ex.b.add_tensor(ex._name(f"{name}/hidden_intermediate"), (0,), np.int8, y_q))
    options = UnidirectionalSequenceLSTMOptions(fused_activation_function=ActivationFunctionType.TANH,
                                                cell_clip=float(op.attr("cell_clip") or 0.0), proj_clip=0.0,
                                                time_major=True, asymmetric_quantize_inputs=False)
    if reverse:
        out = ex.b.add_tensor(ex._name(f"{name}/reversed"), y_shape, _dtype(y), y_q, shape_signature=y_sig)
    else:
        out = ex.new_tensor(y, Form.ASIS)
    _add_operator(ex, OP.UNIDIRECTIONAL_SEQUENCE_LSTM, inputs, [out], options, intermediates)
    if reverse:
        ex.b.add_operator(OP.REVERSE_V2, [out, time_axis], [ex.new_tensor(y, Form.ASIS)])


def _add_operator(ex: _Exporter, code, inputs: list[int], outputs: list[int], options, intermediates: list[int]
                  ) -> None:
    """An operator with ``Operator.intermediates`` (which :meth:`ModelBuilder.add_operator` does not take)."""
    ex.b.operators.append(Operator(ex.b.opcode_index(code), tuple(inputs), tuple(outputs), options,
                                   tuple(intermediates)))


def _pool(code):
    def rule(ex: _Exporter, op: Operation) -> None:
        x = op.operands[0]
        kernel = tuple(op.attr("kernel_shape"))
        strides = tuple(op.attr("strides") or (1, 1))
        padding = _padding(op, x.type.shape[2:], kernel, strides)
        src = ex.get(x, Form.NHWC)
        if padding is None and code is OP.MAX_POOL_2D:
            # padded taps never win a max: PADV2 with the storage minimum, then VALID, is exact
            src, padding = _explicit_pad(ex, x, src, op.attr("pads"), _qtype(x).storage_min), Padding.VALID
        if padding is None:
            raise UnsupportedOpError(f"{_what(op)}: pads {tuple(op.attr('pads'))} are neither SAME nor VALID; "
                                     "TFLite's average pool takes no explicit padding (and padding first would "
                                     "count the padded taps)")
        ex.emit(code, op, [src], Form.NHWC,
                Pool2DOptions(padding=padding, stride_w=strides[1], stride_h=strides[0], filter_width=kernel[1],
                              filter_height=kernel[0], fused_activation_function=_act(op)))
    return rule


_TO_NHWC_AXIS = {0: 0, 1: 3, 2: 1, 3: 2}


def mean(ex: _Exporter, op: Operation, code=OP.MEAN, axes=None) -> None:   # SUM too
    """``axes``: the reduced axes when not the op's own attribute (a float reduce's empty one: all)."""
    x = op.operands[0]
    rank = len(x.type.shape)
    axes = sorted(int(a) % rank for a in (op.attr("axes") if axes is None else axes))
    keep = bool(op.attr("keepdims"))
    form = ex.prefer(x)
    out_form = form
    if form is Form.NHWC and not keep:
        rest = [a for a in range(4) if a not in axes]
        in_nhwc = [a for a in NHWC_PERM if a in rest]
        out_form = Form.ASIS if in_nhwc == rest else None
        if out_form is None:
            form = out_form = Form.ASIS
    t_axes = [_TO_NHWC_AXIS[a] for a in axes] if form is Form.NHWC else axes
    ex.emit(code, op, [ex.get(x, form), ex.int32(sorted(t_axes), f"{op.results[0].name_hint}/axes")], out_form,
            ReducerOptions(keep_dims=keep))


def concat(ex: _Exporter, op: Operation) -> None:
    xs = list(op.operands)
    rank = len(xs[0].type.shape)
    axis = int(op.attr("axis")) % rank
    form = ex.prefer(*xs)
    ex.emit(OP.CONCATENATION, op, [ex.get(v, form) for v in xs], form,
            ConcatenationOptions(axis=_TO_NHWC_AXIS[axis] if form is Form.NHWC else axis))


def pad(ex: _Exporter, op: Operation) -> None:
    x = op.operands[0]
    rank = len(x.type.shape)
    pads = [int(p) for p in op.attr("pads")]
    pairs = [[pads[i], pads[i + rank]] for i in range(rank)]
    form = ex.prefer(x)
    if form is Form.NHWC:
        pairs = [pairs[i] for i in NHWC_PERM]
    inputs = [ex.get(x, form), ex.int32(pairs, f"{op.results[0].name_hint}/paddings")]
    value = op.attr("value")
    if value is None or int(value) == int(_qtype(op.results[0]).zero_point):
        ex.emit(OP.PAD, op, inputs, form)
    else:
        ex.emit(OP.PADV2, op, inputs + [_pad_value(ex, op.results[0], value)], form)


def _resize_size(ex: _Exporter, op: Operation, src: int, sizes=None, factors=None) -> int:
    """The size input of a resize: a constant, or with ``factors`` (dynamic H, W) the input's
    H, W times them at run time: SHAPE → STRIDED_SLICE [1:3] → MUL. ``sizes`` / ``factors``: the
    op's attributes unless given (a float resize's, worked out from ONNX's)."""
    name = op.results[0].name_hint
    sizes, factors = (op.attr("sizes"), op.attr("factors")) if sizes is None and factors is None else (sizes, factors)
    if not factors:
        return ex.int32([int(s) for s in sizes], f"{name}/size")
    shape = ex.b.add_tensor(ex._name(f"{op.operands[0].name_hint}/shape"), (4,), np.int32)
    ex.b.add_operator(OP.SHAPE, [src], [shape], ShapeOptions(out_type=TFLiteTensorType.INT32))
    hw = ex.b.add_tensor(ex._name(f"{name}/input_hw"), (2,), np.int32)
    ex.b.add_operator(OP.STRIDED_SLICE, [shape, ex.int32([1], f"{name}/hw_begin"), ex.int32([3], f"{name}/hw_end"),
                                         ex.int32([1], f"{name}/hw_strides")], [hw], StridedSliceOptions())
    size = ex.b.add_tensor(ex._name(f"{name}/size"), (2,), np.int32)
    ex.b.add_operator(OP.MUL, [hw, ex.int32([int(f) for f in factors], f"{name}/factors")], [size],
                      MulOptions())
    return size


def resize_bilinear(ex: _Exporter, op: Operation) -> None:
    src = ex.get(op.operands[0], Form.NHWC)
    ex.emit(OP.RESIZE_BILINEAR, op, [src, _resize_size(ex, op, src)], Form.NHWC,
            ResizeBilinearOptions(align_corners=bool(op.attr("align_corners")),
                                  half_pixel_centers=bool(op.attr("half_pixel_centers"))))


def resize_nearest(ex: _Exporter, op: Operation) -> None:
    flags = {k: bool(op.attr(k)) for k in ("align_corners", "half_pixel_centers")}
    src = ex.get(op.operands[0], Form.NHWC)
    ex.emit(OP.RESIZE_NEAREST_NEIGHBOR, op, [src, _resize_size(ex, op, src)], Form.NHWC,
            ResizeNearestNeighborOptions(**flags), version=3 if any(flags.values()) else None)   # as op_version.cc


def softmax(ex: _Exporter, op: Operation, beta: float | None = None) -> None:   # over the last axis: IR layout
    """``beta``: when the op has none (ONNX's softmax: 1)."""
    ex.emit(OP.SOFTMAX, op, [ex.get(op.operands[0], Form.ASIS)], Form.ASIS,
            SoftmaxOptions(beta=float(op.attr("beta") if beta is None else beta)))


def clamp(ex: _Exporter, op: Operation) -> None:
    code = {"RELU": OP.RELU, "RELU6": OP.RELU6, "RELU_N1_TO_1": OP.RELU_N1_TO_1, "NONE": OP.QUANTIZE}
    _elementwise(code[op.attr("activation") or "NONE"])(ex, op)


def _run_time_reshape(ex: _Exporter, op: Operation) -> None:
    """A reshape with several dynamic dims (ONNX's ``0`` copies of the input's dims, and its one
    ``-1``): the int32 target is gathered at run time from the input's SHAPE and the constant
    sizes, GATHER(CONCATENATION(SHAPE(x), sizes), picks), which LiteRT's RESHAPE reads."""
    x, y = op.operands[0], op.results[0]
    rank = len(x.type.shape)
    sizes: list[int] = []
    picks: list[int] = []
    for i, d in enumerate(op.attr("shape")):
        if d == 0 and not op.attr("allowzero"):
            picks.append(i)                      # the input's dim i
        else:
            picks.append(rank + len(sizes))      # a static size, or the -1
            sizes.append(int(d))
    name = y.name_hint or "reshape"
    src = ex.get(x, Form.ASIS)
    dims = ex.b.add_tensor(ex._name(f"{name}/input_shape"), (rank,), np.int32)
    ex.b.add_operator(OP.SHAPE, [src], [dims], ShapeOptions(out_type=TFLiteTensorType.INT32))
    both = ex.b.add_tensor(ex._name(f"{name}/shape_and_sizes"), (rank + len(sizes),), np.int32)
    ex.b.add_operator(OP.CONCATENATION, [dims, ex.int32(sizes, f"{name}/sizes")], [both],
                      ConcatenationOptions(axis=0))
    target = ex.b.add_tensor(ex._name(f"{name}/target"), (len(picks),), np.int32)
    ex.b.add_operator(OP.GATHER, [both, ex.int32(picks, f"{name}/picks")], [target], GatherOptions(axis=0))
    ex.emit(OP.RESHAPE, op, [src, target], Form.ASIS, ReshapeOptions(new_shape=()))


def _squeeze_dims(ex: _Exporter, op: Operation) -> None:
    """SQUEEZE / EXPAND_DIMS (one axis) keep any number of dynamic dims: LiteRT sizes the result
    from the input's shape at run time."""
    x, y = op.operands[0], op.results[0]
    src = ex.get(x, Form.ASIS)
    if op.opdef is nn.SQUEEZE:
        rank = len(x.type.shape)
        axes = op.attr("axes")
        axes = sorted({a % rank for a in axes}) if axes is not None else [i for i, d in enumerate(x.type.shape)
                                                                         if d == 1]
        ex.emit(OP.SQUEEZE, op, [src], Form.ASIS, SqueezeOptions(squeeze_dims=tuple(axes)))
        return
    # EXPAND_DIMS takes one axis: several are inserted one by one, in increasing order of their
    # place in the result, so that each lands where the result has it
    axes = sorted(a % len(y.type.shape) for a in op.attr("axes"))
    shape = list(x.type.shape)
    for k, axis in enumerate(axes[:-1]):
        shape.insert(axis, 1)
        step = ex.b.add_tensor(ex._name(f"{y.name_hint or 'unsqueeze'}/step{k}"), tuple(1 if d is None else d
                               for d in shape), _dtype(y), _quantization(y),
                               shape_signature=tuple(-1 if d is None else d for d in shape))
        ex.b.add_operator(OP.EXPAND_DIMS, [src, ex.int32([axis], f"{y.name_hint}/axis{k}")], [step])
        src = step
    ex.emit(OP.EXPAND_DIMS, op, [src, ex.int32([axes[-1]], f"{y.name_hint}/axis")], Form.ASIS)


def reshape(ex: _Exporter, op: Operation) -> None:
    x, y = op.operands[0], op.results[0]
    if y.type.shape is not None and sum(d is None for d in y.type.shape) > 1:
        if op.opdef is nn.RESHAPE:
            return _run_time_reshape(ex, op)
        if op.opdef in (nn.SQUEEZE, nn.UNSQUEEZE):
            return _squeeze_dims(ex, op)
    if not ex.has(x, Form.ASIS) and ex.has(x, Form.NHWC) and ex.same_order(x):
        src = ex.get(x, Form.NHWC)   # the NHWC tensor already holds the elements in the IR's order
    else:
        src = ex.get(x, Form.ASIS)
    ex.reshape(src, ex.new_tensor(y, Form.ASIS), y, Form.ASIS)


def transpose(ex: _Exporter, op: Operation) -> None:
    x = op.operands[0]
    rank = len(x.type.shape)
    perm = op.attr("perm") or tuple(reversed(range(rank)))
    if ex.has(x, Form.NHWC) and tuple(perm) == NHWC_PERM:   # the NHWC form is this transpose's result
        ex.forms.map(op.results[0], {Form.ASIS: ex.get(x, Form.NHWC)})
        ex.bindings.setdefault(op.results[0].name_hint, (ex.get(x, Form.NHWC), None))
        return
    ex.emit(OP.TRANSPOSE, op, [ex.get(x, Form.ASIS), ex.int32(perm, f"{op.results[0].name_hint}/perm")], Form.ASIS)


def _cut(op: Operation) -> tuple[int, int, int] | None:
    """``(axis, start, stop)`` of a slice of one static axis with step 1, else None."""
    shape = op.operands[0].type.shape
    try:
        bounds = slice_bounds(shape, {k: op.attr(k) for k in ("starts", "ends", "axes", "steps")})
    except QuantirError:
        return None
    if len(bounds) != 1:
        return None
    ((axis, (start, stop, step)),) = bounds.items()
    return (axis, start, stop) if step == 1 and shape[axis] is not None and stop > start else None


def _split_group(op: Operation) -> list[Operation] | None:
    """The slices of ``op``'s input that cut one axis into consecutive chunks covering it (what
    quantize's Split expansion writes), in order, when there are two or more and they keep the
    input's quantization; else None."""
    x, me = op.operands[0], _cut(op)
    if me is None:
        return None
    pieces = sorted(((c[1], c[2], user) for user, _ in x.uses if user.opdef is nn.SLICE
                     for c in [_cut(user)] if c is not None and c[0] == me[0]), key=lambda p: (p[0], p[1]))
    edge = 0
    for start, stop, user in pieces:
        if start != edge or _qtype(user.results[0]) != _qtype(x):
            return None
        edge = stop
    return [user for _, _, user in pieces] if len(pieces) > 1 and edge == x.type.shape[me[0]] else None


def _split_v(ex: _Exporter, op: Operation, group: list[Operation]) -> None:
    """One SPLIT_V for the whole group: LiteRT copies each chunk into its output."""
    x = op.operands[0]
    axis, _, _ = _cut(op)
    form = ex.prefer(x)
    sizes = [stop - start for _, start, stop in (_cut(g) for g in group)]
    name = group[0].results[0].name_hint
    outs = [ex.new_tensor(g.results[0], form) for g in group]
    ex.b.add_operator(OP.SPLIT_V, [ex.get(x, form), ex.int32(sizes, f"{name}/size_splits"),
                                   ex.int32(NHWC_PERM.index(axis) if form is Form.NHWC else axis, f"{name}/axis")],
                      outs, SplitVOptions(num_splits=len(group)))


def slice_(ex: _Exporter, op: Operation) -> None:
    """STRIDED_SLICE: ONNX's clamped bounds per sliced axis, the begin/end masks for the others
    (so a dynamic batch passes whole). In the NHWC form when the input lives there. Slices that
    cut one axis into consecutive chunks (an ONNX Split) are one SPLIT_V."""
    if ex.forms.lookup_or_none(op.results[0]) is not None:
        return   # written by its group's SPLIT_V
    group = _split_group(op)
    if group is not None:
        return _split_v(ex, op, group)
    x = op.operands[0]
    shape = x.type.shape
    rank = len(shape)
    bounds = slice_bounds(shape, {k: op.attr(k) for k in ("starts", "ends", "axes", "steps")})
    begin, end, strides, begin_mask, end_mask = [0] * rank, [0] * rank, [1] * rank, 0, 0
    for a in range(rank):
        if a not in bounds:
            begin_mask, end_mask = begin_mask | 1 << a, end_mask | 1 << a
            continue
        start, stop, step = bounds[a]
        if shape[a] is None or step < 0:
            raise UnsupportedOpError(f"{_what(op)}: a slice of a dynamic dim or with a negative step has no "
                                     "STRIDED_SLICE form here")
        begin[a], end[a], strides[a] = start, stop, step
    form = ex.prefer(x)
    if form is Form.NHWC:
        order = NHWC_PERM
        begin, end, strides = ([v[i] for i in order] for v in (begin, end, strides))
        begin_mask = sum(1 << j for j, i in enumerate(order) if begin_mask >> i & 1)
        end_mask = sum(1 << j for j, i in enumerate(order) if end_mask >> i & 1)
    name = op.results[0].name_hint
    ex.emit(OP.STRIDED_SLICE, op, [ex.get(x, form), ex.int32(begin, f"{name}/begin"), ex.int32(end, f"{name}/end"),
                                   ex.int32(strides, f"{name}/strides")], form,
            StridedSliceOptions(begin_mask=begin_mask, end_mask=end_mask))


def identity(ex: _Exporter, op: Operation) -> None:
    x = op.operands[0]
    ex.forms.map(op.results[0], dict(ex.forms.lookup_or_none(x) or {}) or {Form.ASIS: ex.get(x, Form.ASIS)})


def qcast(ex: _Exporter, op: Operation) -> None:
    if isinstance(_qtype(op.results[0]), UniformQuantizedPerAxisType):
        raise UnsupportedOpError(f"{_what(op)}: per-axis activations have no TFLite QUANTIZE form")
    _elementwise(OP.QUANTIZE)(ex, op)


def dcast(ex: _Exporter, op: Operation) -> None:
    if quant.stored_constant(op.operands[0]) is not None:   # a weight: DEQUANTIZE in its readers' layouts
        from quantir.backends.tflite.export_weight_only import weight_dcast
        return weight_dcast(ex, op)
    # in the IR's layout: a float result feeds outputs or float code, and moving int8 is 4x cheaper
    ex.emit(OP.DEQUANTIZE, op, [ex.get(op.operands[0], Form.ASIS)], Form.ASIS)


def gather(ex: _Exporter, op: Operation) -> None:
    """GATHER along the same axis (its NHWC axis when the data lives there). LiteRT refuses negative
    indices: constant ones are written non-negative (ONNX counts them from the end); run-time ones
    are passed as they are, as a .tflite model that took them did."""
    x, idx = op.operands
    rank = len(x.type.shape)
    axis = int(op.attr("axis")) % rank
    form = ex.prefer(x) if len(idx.type.shape) == 1 else Form.ASIS   # a 1-D index keeps the rank
    values = quant.stored_constant(idx)
    if values is None:
        indices = ex.get(idx, Form.ASIS)
    else:
        values = np.asarray(values, np.int64)
        values = np.where(values < 0, values + x.type.shape[axis], values).astype(np.int32)
        indices = ex.b.add_constant(ex._name(f"{op.results[0].name_hint}/indices"), values.copy(order="C"))
    ex.emit(OP.GATHER, op, [ex.get(x, form), indices], form,
            GatherOptions(axis=_TO_NHWC_AXIS[axis] if form is Form.NHWC else axis))


def space_to_depth(ex: _Exporter, op: Operation) -> None:
    if op.attr("mode") != "DCR":
        raise UnsupportedOpError(f"{_what(op)}: mode {op.attr('mode')}; LiteRT's SPACE_TO_DEPTH orders channels "
                                 "as DCR (ONNX SpaceToDepth)")
    ex.emit(OP.SPACE_TO_DEPTH, op, [ex.get(op.operands[0], Form.NHWC)], Form.NHWC,
            SpaceToDepthOptions(block_size=int(op.attr("blocksize"))))


def _space_batch(code, pairs: str, options):
    """SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND on the NHWC form, block_shape and the [2, 2] pairs as
    int32 constants (the pairs are per spatial axis, which NHWC keeps in order)."""
    def rule(ex: _Exporter, op: Operation) -> None:
        x, name = op.operands[0], op.results[0].name_hint
        if len(x.type.shape) != 4:
            raise UnsupportedOpError(f"{_what(op)}: only the 4-D (two spatial axes) form is exported, the input "
                                     f"is {x.type}")
        flat = [int(v) for v in op.attr(pairs)]
        ex.emit(code, op, [ex.get(x, Form.NHWC), ex.int32([int(b) for b in op.attr("block_shape")], f"{name}/block"),
                           ex.int32(np.reshape(flat, (-1, 2)), f"{name}/{pairs}")], Form.NHWC, options())
    return rule


def _compare(code, options_type):
    """A comparison (or MAXIMUM/MINIMUM, ``options_type`` MaximumMinimumOptions) of two int8 tensors;
    a bool result is written in the IR's layout, where the float ops and outputs after it want it."""
    def rule(ex: _Exporter, op: Operation) -> None:
        a, b = op.operands
        form = ex.prefer(a, b) if _qtype(op.results[0]) is not None else Form.ASIS
        ex.emit(code, op, [ex.get(a, form), ex.get(b, form)], form, options_type())
    return rule


def arg_max(ex: _Exporter, op: Operation) -> None:
    """ARG_MAX over the IR's axis, in the IR's layout; the index type is the result's (i32 or i64)."""
    x, y = op.operands[0], op.results[0]
    out_type = TFLiteTensorType.INT64 if y.type.element_type == IntegerType(64) else TFLiteTensorType.INT32
    ex.emit(OP.ARG_MAX, op, [ex.get(x, Form.ASIS), ex.int32([int(op.attr("axis"))], f"{y.name_hint}/axis")],
            Form.ASIS, ArgMaxOptions(output_type=out_type))


def batch_matmul(ex: _Exporter, op: Operation) -> None:
    """BATCH_MATMUL over the IR's last two dims, in the IR's layout; adj_x/adj_y as the op has them."""
    a, b = op.operands
    ex.emit(OP.BATCH_MATMUL, op, [ex.get(a, Form.ASIS), ex.get(b, Form.ASIS)], Form.ASIS,
            BatchMatMulOptions(adj_x=bool(op.attr("adj_x")), adj_y=bool(op.attr("adj_y"))))


def shape(ex: _Exporter, op: Operation) -> None:
    """SHAPE of the IR's layout (the NCHW dims the float model's Shape gives), as i64; ONNX's
    ``start``/``end`` pick some of the dims (a GATHER of them: LiteRT's SHAPE has no such option)."""
    x = op.operands[0]
    start, end = shape_slice(len(x.type.shape), op.opdef.attr_values(op))
    if (start, end) == (0, len(x.type.shape)):
        ex.emit(OP.SHAPE, op, [ex.get(x, Form.ASIS)], Form.ASIS, ShapeOptions(out_type=TFLiteTensorType.INT64))
        return
    name = op.results[0].name_hint or "shape"
    dims = ex.b.add_tensor(ex._name(f"{name}/all_dims"), (len(x.type.shape),), np.int64)
    ex.b.add_operator(OP.SHAPE, [ex.get(x, Form.ASIS)], [dims], ShapeOptions(out_type=TFLiteTensorType.INT64))
    ex.emit(OP.GATHER, op, [dims, ex.int32(list(range(start, end)), f"{name}/picks")], Form.ASIS,
            GatherOptions(axis=0))


def plain_cast(ex: _Exporter, op: Operation) -> None:
    """CAST: an integer input stored in int8 as it is (scale 1, zero point 0: the tensor carries
    those parameters), shape arithmetic between integer widths, or to and from float32 (an
    attention mask made float); other element types have no tensor type here (``_dtype``)."""
    ex.emit(OP.CAST, op, [ex.get(op.operands[0], Form.ASIS)], Form.ASIS)


def plain_range(ex: _Exporter, op: Operation) -> None:
    """RANGE (position ids: 0 .. the sequence length read from a SHAPE)."""
    ex.emit(OP.RANGE, op, [ex.get(v, Form.ASIS) for v in op.operands], Form.ASIS)


def dynamic_reshape(ex: _Exporter, op: Operation) -> None:
    """RESHAPE to a shape computed at run time; LiteRT reads an int32 shape tensor, so an i64 one is
    CAST first. LiteRT takes a 0 in the shape literally, which is ONNX's ``allowzero=1``; ONNX's
    default copies the input's dim there instead, which a shape known only at run time cannot
    tell apart, so that form is refused."""
    x, target = op.operands
    if not op.attr("allowzero"):
        raise UnsupportedOpError(f"{_what(op)}: a run-time shape with allowzero=0 (a 0 copies the input's dim); "
                                 "LiteRT's RESHAPE takes a 0 as a 0")
    shape_t = ex.get(target, Form.ASIS)
    if _dtype(target) != np.int32:
        cast = ex.b.add_tensor(ex._name(f"{op.results[0].name_hint or 'reshape'}/shape_i32"),
                               tuple(target.type.shape), np.int32)
        ex.b.add_operator(OP.CAST, [shape_t], [cast])
        shape_t = cast
    ex.emit(OP.RESHAPE, op, [ex.get(x, Form.ASIS), shape_t], Form.ASIS, ReshapeOptions(new_shape=()))


_COMPARE_OPTIONS = {qnn.EQUAL: (OP.EQUAL, EqualOptions), qnn.NOT_EQUAL: (OP.NOT_EQUAL, NotEqualOptions),
                    qnn.LESS: (OP.LESS, LessOptions), qnn.LESS_EQUAL: (OP.LESS_EQUAL, LessEqualOptions),
                    qnn.GREATER: (OP.GREATER, GreaterOptions),
                    qnn.GREATER_EQUAL: (OP.GREATER_EQUAL, GreaterEqualOptions),
                    qnn.MAXIMUM: (OP.MAXIMUM, MaximumMinimumOptions), qnn.MINIMUM: (OP.MINIMUM, MaximumMinimumOptions)}


RULES: dict[object, Callable[[_Exporter, Operation], None]] = {
    quant.QCAST: qcast, quant.DCAST: dcast, qnn.REQUANTIZE: _elementwise(OP.QUANTIZE),
    qnn.CONV: conv, qnn.FULLY_CONNECTED: fully_connected,
    qnn.TRANSPOSE_CONV: transpose_conv,
    qnn.UNIDIRECTIONAL_LSTM: unidirectional_lstm,
    qnn.ADD: _binary(OP.ADD, AddOptions), qnn.SUB: _binary(OP.SUB, SubOptions), qnn.MUL: _binary(OP.MUL, MulOptions),
    qnn.AVERAGE_POOL: _pool(OP.AVERAGE_POOL_2D), qnn.MAX_POOL: _pool(OP.MAX_POOL_2D),
    qnn.MEAN: mean, qnn.CONCAT: concat, qnn.PAD: pad, qnn.RESIZE_BILINEAR: resize_bilinear,
    qnn.RESIZE_NEAREST: resize_nearest, qnn.SOFTMAX: softmax, qnn.LOGISTIC: _elementwise(OP.LOGISTIC),
    qnn.TANH: _elementwise(OP.TANH), qnn.RSQRT: _elementwise(OP.RSQRT),
    qnn.SQUARED_DIFFERENCE: _binary(OP.SQUARED_DIFFERENCE, SquaredDifferenceOptions),
    qnn.HARD_SWISH: _elementwise(OP.HARD_SWISH),
    qnn.GELU: _elementwise(OP.GELU, lambda op: GeluOptions(approximate=bool(op.attr("approximate")))),
    qnn.LEAKY_RELU: _elementwise(OP.LEAKY_RELU, lambda op: LeakyReluOptions(alpha=float(op.attr("alpha")))),
    qnn.CLAMP: clamp,
    qnn.REDUCE_SUM: lambda ex, op: mean(ex, op, OP.SUM),
    # over the IR's last axis, as the kernels read it: the IR layout
    qnn.L2_NORMALIZATION: lambda ex, op: ex.emit(OP.L2_NORMALIZATION, op, [ex.get(op.operands[0], Form.ASIS)],
                                                 Form.ASIS, L2NormOptions()),
    qnn.LOG_SOFTMAX: lambda ex, op: ex.emit(OP.LOG_SOFTMAX, op, [ex.get(op.operands[0], Form.ASIS)], Form.ASIS,
                                            LogSoftmaxOptions()),
    nn.RESHAPE: reshape, nn.FLATTEN: reshape, nn.SQUEEZE: reshape, nn.UNSQUEEZE: reshape,
    nn.TRANSPOSE: transpose, nn.IDENTITY: identity, nn.SLICE: slice_,
    nn.GATHER: gather, nn.SPACE_TO_DEPTH: space_to_depth,
    qnn.SPACE_TO_BATCH_ND: _space_batch(OP.SPACE_TO_BATCH_ND, "paddings", SpaceToBatchNDOptions),
    qnn.BATCH_TO_SPACE_ND: _space_batch(OP.BATCH_TO_SPACE_ND, "crops", BatchToSpaceNDOptions),
    **{opdef: _compare(*code) for opdef, code in _COMPARE_OPTIONS.items()}, qnn.ARG_MAX: arg_max, nn.SHAPE: shape,
    nn.CAST: plain_cast, nn.CONCAT: concat, nn.RANGE: plain_range, nn.DYNAMIC_RESHAPE: dynamic_reshape,
    qnn.BATCH_MATMUL: batch_matmul,
}


def _hybrid_rules() -> dict[object, Callable[[_Exporter, Operation], None]]:
    """The dynamic-range ops' rules (float activations, int8 weights), in their own module, which
    reads this one's helpers: imported on first use."""
    from quantir.backends.tflite.export_hybrid import HYBRID_RULES
    return HYBRID_RULES


def _float_rules() -> dict[object, Callable[[_Exporter, Operation], None]]:
    """The float32 ops' rules (:mod:`.export_float`, which reads this module's helpers)."""
    from quantir.backends.tflite.export_float import FLOAT_RULES
    return FLOAT_RULES


def _float_fusions(fn: Function):
    from quantir.backends.tflite.export_float import fusions
    return fusions(fn)


def export_tflite(module: Module | Function, *, io: str = "float") -> TFLiteExport:
    """The integer module as a TFLite :class:`~.model.Model`, with the IR-value bindings.

    >>> import numpy as np, quantir as qr                          # doctest: +SKIP
    >>> result = qr.quantize("models/fashion_mnist_cnn.onnx", {"input": images[:500]})   # doctest: +SKIP
    >>> exported = export_tflite(result.module)                    # doctest: +SKIP
    >>> open("cnn.tflite", "wb").write(exported.to_bytes())        # doctest: +SKIP
    """
    fn = module.main if isinstance(module, Module) else module
    return _Exporter(fn, io).run()


def save_tflite(module: Module | Function, path: str | os.PathLike, *, io: str = "float") -> Path:
    """Write the integer module as ``path`` (.tflite), atomically."""
    from quantir.fileio import atomic_write
    p = Path(path)
    atomic_write(p, export_tflite(module, io=io).to_bytes())
    return p
