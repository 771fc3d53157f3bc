"""Adapters from ``qnn`` ops to the integer kernels, and the quant casts' kernels.

Each kernel reads scales and zero points from its op's operand and result types, runs the
matching ``qkernels.prepare_*`` once per op (LiteRT's Prepare: multipliers, tables, checks),
and calls the integer kernel on the stored integers. ``quant.qcast`` quantizes with LiteRT's
QUANTIZE rounding (float32 division, ties away from zero); ``quant.dcast`` is DEQUANTIZE;
``quant.scast`` reinterprets storage and so is the identity on arrays.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

import numpy as np

from ...errors import quote_name
from ...ir import Operation
from ...ir.dialects import qnn, quant
from ...types import QuantizedType, TensorType, UniformQuantizedPerAxisType, UniformQuantizedSubChannelType
from .. import qkernels as qk
from .limits import check_allocation

# Prepared parameters per op, dropped with the op.
_prepared: "weakref.WeakKeyDictionary[Operation, Any]" = weakref.WeakKeyDictionary()
_prepared_lock = threading.Lock()


def prepare_once(op: Operation, build: Callable[[], Any], key: Any = ()) -> Any:
    """LiteRT's Prepare runs once per op and input shape (it runs again on a resize); Eval reuses
    its integers. ``key`` is whatever of the inputs' shapes the parameters depend on (MEAN's
    element count): one module may run at 8x8 and then at 2x2. numerics refuses arguments it
    cannot represent with a ValueError (an infinite multiplier, a table entry past int64: scales
    from a corrupt file); here that is the op's parameters, so it becomes a QKernelError naming it."""
    with _prepared_lock:   # Interpreter.run_all: several threads may reach one op first
        per_key = _prepared.setdefault(op, {})
        if key in per_key:
            return per_key[key]
    try:
        built = build()     # outside the lock: a deterministic function of the op, so a race builds it twice at worst
    except ValueError as e:
        raise qk.QKernelError(f"{quote_name(op.label or op.name)} ({op.name}): its quantization parameters "
                              f"cannot be prepared: {e}") from None
    with _prepared_lock:
        return per_key.setdefault(key, built)


def _q(t) -> QuantizedType:
    return t.element_type if isinstance(t, TensorType) else t


def scale_of(v) -> float:
    return float(_q(v.type).scale)


def zero_point_of(v) -> int:
    return int(_q(v.type).zero_point)


def activation_of(op: Operation) -> str:
    return (op.attr("activation") or "NONE").lower()


# short names for the adapters below
_s, _z, _act = scale_of, zero_point_of, activation_of


def _pads_tlbr(pads) -> tuple[int, int, int, int]:
    """ONNX (h_begin, w_begin, h_end, w_end) -> qkernels (top, left, bottom, right): the same order."""
    return tuple(int(p) for p in (pads or (0, 0, 0, 0)))  # type: ignore[return-value]


def _padded_pads(op: Operation, x, kernel=None) -> tuple[int, int, int, int]:
    """The pads, once the padded input the qkernels will make is known to fit the run's limit;
    auto_pad SAME_UPPER (TFLite's SAME) takes them from this run's input size (``tflite_pads``)."""
    if op.attr("auto_pad") == "SAME_UPPER":
        pads = qk.tflite_pads("same", x.shape[2:], kernel, tuple(op.attr("strides") or (1, 1)),
                              tuple(op.attr("dilations") or (1, 1)))
    else:
        pads = _pads_tlbr(op.attr("pads"))
    top, left, bottom, right = pads
    if x.ndim == 4 and any(pads):
        check_allocation(f"the padded input of '{op.name}'", (*x.shape[:2], x.shape[2] + top + bottom,
                                                              x.shape[3] + left + right), x.dtype)
    return pads


def _weight_scales(v) -> np.ndarray:
    q = _q(v.type)
    return np.asarray(q.scales if isinstance(q, UniformQuantizedPerAxisType) else [q.scale], np.float64)


def conv(op: Operation, x, w, b=None):
    xv, wv, y = op.operands[0], op.operands[1], op.results[0]
    channels = w.shape[0]
    # 16x8 (i16 input): the IR's int32 bias is LiteRT's int64 one (int64 accumulator, 64-bit MBQM)
    wide = dict(storage=np.int16, input_zero_point=_z(xv)) if x.dtype == np.int16 else {}
    if wide and b is not None:
        b = np.asarray(b, np.int64)
    p = prepare_once(op, lambda: qk.prepare_conv2d(_s(xv), _weight_scales(wv), _s(y), _z(y), _act(op),
                                                   channels=channels, **wide),
                 key=channels)
    group = op.attr("group") or 1
    common = dict(input_zero_point=_z(xv), strides=tuple(op.attr("strides") or (1, 1)),
                  pads=_padded_pads(op, x, w.shape[2:]),
                  dilations=tuple(op.attr("dilations") or (1, 1)), **p.as_kwargs())
    if group > 1 and group == x.shape[1] and w.shape[1] == 1:
        return qk.depthwise_conv2d(x, w, b, **common)
    return qk.conv2d(x, w, b, groups=group, **common)


def fully_connected(op: Operation, x, w, b=None):
    xv, wv, y = op.operands[0], op.operands[1], op.results[0]
    per_axis = isinstance(_q(wv.type), UniformQuantizedPerAxisType)
    # 16x8 (i16 input): an int32 bias means LiteRT's quantized_bias_type INT32 (int32 accumulator)
    wide = dict(storage=np.int16, input_zero_point=_z(xv),
                bias_type="int32" if b is not None and np.asarray(b).dtype == np.int32 else "int64") \
        if x.dtype == np.int16 else {}
    p = prepare_once(op, lambda: qk.prepare_fully_connected(
        _s(xv), _weight_scales(wv) if per_axis else _weight_scales(wv)[0], _s(y), _z(y), _act(op),
        channels=w.shape[0], **wide), key=w.shape[0])
    lead = x.shape[:-1]
    # LiteRT's reference kernel (BUILTIN_REF) requantizes FC in double — per channel and, in
    # ai-edge-litert 2.x, per tensor too (measured: 11 of 300 random per-tensor models differ
    # from fixed point, 0 from the double path); its optimized kernel uses fixed point. They
    # differ by 1 on rare elements; quantir follows the reference.
    out = qk.fully_connected(x.reshape(-1, x.shape[-1]), w, b, input_zero_point=_z(xv), reference_float=True,
                             **p.as_kwargs())
    return out.reshape(*lead, w.shape[0])


def binary(prepare, kernel):
    """A two-input kernel (ADD, SUB, MUL): Prepare from both inputs' and the output's parameters."""
    def run(op: Operation, a, b):
        av, bv, y = op.operands[0], op.operands[1], op.results[0]
        # int16 operands: the 16-bit Prepare (zero points 0; ADD/SUB pick LiteRT's POT or general kernel)
        wide = dict(storage=np.int16, input_zero_points=(_z(av), _z(bv))) if a.dtype == np.int16 else {}
        p = prepare_once(op, lambda: prepare(_s(av), _s(bv), _s(y), _z(y), _act(op), **wide))
        return kernel(a, b, input1_zero_point=_z(av), input2_zero_point=_z(bv), **p.as_kwargs())
    return run


def pool(prepare, kernel):
    """A window kernel (MAX_POOL_2D, AVERAGE_POOL_2D) over the op's kernel_shape, strides and pads
    (int8, or int16 when the operand's storage is i16)."""
    def run(op: Operation, x):
        xv, y = op.operands[0], op.results[0]
        p = prepare_once(op, lambda: prepare(_s(xv), _z(xv), _s(y), _z(y), _act(op), **_storage(x)))
        return kernel(x, kernel=tuple(op.attr("kernel_shape")), strides=tuple(op.attr("strides") or (1, 1)),
                      pads=_padded_pads(op, x, tuple(op.attr("kernel_shape"))), **p.as_kwargs())
    return run


def mean(op: Operation, x):
    xv, y = op.operands[0], op.results[0]
    axes = tuple(op.attr("axes"))
    count = int(np.prod([x.shape[a] for a in axes]))
    if count == 0:   # float gives NaN there, which no int8 value holds
        raise qk.QKernelError(f"MEAN {quote_name(op.label or op.name)}: the axes {list(axes)} of its input of shape "
                              f"{list(x.shape)} hold no element, so the mean is undefined; give the model an input "
                              "with a non-empty reduced axis")
    p = prepare_once(op, lambda: qk.prepare_mean(_s(xv), _z(xv), _s(y), _z(y), count=count, storage=x.dtype),
                     key=count)
    return qk.mean(x, axes=axes, keepdims=bool(op.attr("keepdims")), **p.as_kwargs())


def concat(op: Operation, *xs):
    y = op.results[0]
    prepare_once(op, lambda: qk.prepare_concatenation([(_s(v), _z(v)) for v in op.operands], _s(y), _z(y),
                                                      storage=xs[0].dtype))
    return qk.concatenation(list(xs), axis=int(op.attr("axis")) % xs[0].ndim)


def requantize(op: Operation, x):
    xv, y = op.operands[0], op.results[0]
    p = prepare_once(op, lambda: qk.prepare_requantize(_s(xv), _s(y)))
    return qk.requantize(x, input_zero_point=_z(xv), output_zero_point=_z(y),
                         out_dtype=_q(y.type).storage_numpy_dtype, **p.as_kwargs())


def pad(op: Operation, x):
    xv, y = op.operands[0], op.results[0]
    stored = op.attr("value")
    constant = None if stored is None else (int(stored), _s(y), _z(y))
    value = prepare_once(op, lambda: qk.prepare_pad(_s(xv), _z(xv), _s(y), _z(y), constant=constant, **_storage(x)))
    pads = op.attr("pads")
    rank = x.ndim
    return qk.pad(x, pads=[(pads[i], pads[i + rank]) for i in range(rank)], value=value)


def resize_bilinear(op: Operation, x):
    return qk.resize_bilinear(x, size=qnn.resize_output_hw(op, x.shape[2:]),
                              align_corners=bool(op.attr("align_corners")),
                              half_pixel_centers=bool(op.attr("half_pixel_centers")))


def resize_nearest(op: Operation, x):
    return qk.resize_nearest(x, size=qnn.resize_output_hw(op, x.shape[2:]),
                             align_corners=bool(op.attr("align_corners")),
                             half_pixel_centers=bool(op.attr("half_pixel_centers")))


def _storage(x) -> dict:
    """``storage=np.int16`` for the 16x8 Prepare when the operand's storage is i16 (the array says so)."""
    return {"storage": np.int16} if np.asarray(x).dtype == np.int16 else {}


def softmax(op: Operation, x):
    xv, y = op.operands[0], op.results[0]
    wide = dict(_storage(x), input_zero_point=_z(xv)) if _storage(x) else {}
    p = prepare_once(op, lambda: qk.prepare_softmax(_s(xv), float(op.attr("beta")), _s(y), _z(y), **wide))
    return qk.softmax(x, **p.as_kwargs())


def table(prepare, kernel):
    """A lookup-table kernel (LOGISTIC, TANH): the table is built once, at Prepare (for int16, the
    fixed-point kernel's output on all 65,536 inputs)."""
    def run(op: Operation, x):
        xv, y = op.operands[0], op.results[0]
        table = prepare_once(op, lambda: prepare(_s(xv), _z(xv), _s(y), _z(y), **_storage(x)))
        return kernel(x, table=table)
    return run


def gelu(op: Operation, x):
    """GELU in int8 (256-entry table) or int16 (interpolated 513-entry table)."""
    xv, y = op.operands[0], op.results[0]
    table = prepare_once(op, lambda: qk.prepare_gelu(_s(xv), _z(xv), _s(y), _z(y),
                                                     approximate=bool(op.attr("approximate")), **_storage(x)))
    return qk.gelu(x, table=table)


def rsqrt(op: Operation, x):
    """RSQRT in int8 (inverse-sqrt multiplier) or int16 (interpolated table)."""
    xv, y = op.operands[0], op.results[0]
    p = prepare_once(op, lambda: qk.prepare_rsqrt(_s(xv), _z(xv), _s(y), _z(y), **_storage(x)))
    return qk.rsqrt(x, **p.as_kwargs())


def hard_swish(op: Operation, x):
    xv, y = op.operands[0], op.results[0]
    if _storage(x):
        raise qk.QKernelError(f"{quote_name(op.label or op.name)} ({op.name}): LiteRT has no int16 HARD_SWISH "
                              "kernel (int8 and uint8 only); keep its input and output int8")
    p = prepare_once(op, lambda: qk.prepare_hard_swish(_s(xv), _z(xv), _s(y), _z(y)))
    return qk.hard_swish(x, **p.as_kwargs())


def leaky_relu(op: Operation, x):
    xv, y = op.operands[0], op.results[0]
    p = prepare_once(op, lambda: qk.prepare_leaky_relu(_s(xv), _z(xv), float(op.attr("alpha")), _s(y), _z(y),
                                                       **_storage(x)))
    return qk.leaky_relu(x, **p.as_kwargs())


def clamp(op: Operation, x):
    xv, y = op.operands[0], op.results[0]
    kind = {"none": "relu_n1_to_1"}.get(_act(op), _act(op))
    if _act(op) == "none":   # a plain rescale: requantize without a clamp
        return requantize(op, x)
    p = prepare_once(op, lambda: qk.prepare_relu(kind, _s(xv), _z(xv), _s(y), _z(y)))
    return qk.relu(x, **p.as_kwargs())


def qcast(op: Operation, x):
    q = _q(op.results[0].type)
    if isinstance(q, UniformQuantizedPerAxisType):
        out = qk.quantize(x, scale=np.asarray(q.scales), zero_point=np.asarray(q.zero_points),
                          dtype=q.storage_numpy_dtype, axis=q.quantized_dimension)
    else:
        out = qk.quantize(x, scale=q.scale, zero_point=q.zero_point, dtype=q.storage_numpy_dtype)
    info = np.iinfo(out.dtype)
    if (q.storage_min, q.storage_max) != (info.min, info.max):   # i4, u6 in a byte, i8<-127:127>
        out = np.clip(out, q.storage_min, q.storage_max).astype(out.dtype)
    return out


def dcast(op: Operation, q):
    t = _q(op.operands[0].type)
    if isinstance(t, UniformQuantizedSubChannelType):   # block-wise weights (quantize.weight_only)
        return dequantize_sub_channel(q, t)
    if isinstance(t, UniformQuantizedPerAxisType):
        return qk.dequantize(q, scale=np.asarray(t.scales), zero_point=np.asarray(t.zero_points),
                             axis=t.quantized_dimension)
    return qk.dequantize(q, scale=t.scale, zero_point=t.zero_point)


def dequantize_sub_channel(q, t: UniformQuantizedSubChannelType) -> np.ndarray:
    """``f32(double(s)·(q - zp))`` with each scale and zero point repeated over its block (a dim
    without a block size is one block: its single scale broadcasts)."""
    s, zp = t.scales_array(), t.zero_points_array()
    for d, b in t.block_sizes:
        s, zp = np.repeat(s, b, axis=d), np.repeat(zp, b, axis=d)
    q = np.asarray(q)
    return (s * (q.astype(np.int64) - zp).astype(np.float64)).astype(np.float32)


def scast(op: Operation, x):
    return x


# The quant dialect's casts. The integer ops' bindings are the functions above, which each op's
# declaration (quantir.quantize.ops) names; the interpreter finds them there.
KERNELS = {quant.QCAST: qcast, quant.DCAST: dcast, quant.SCAST: scast}
