"""Sliding-window ``nn`` ops over NC<spatial> tensors: convolutions (float, integer,
QLinear), transposed convolution, and pooling.

The window arithmetic (``window_geometry``) is shared by the type rules here and by the
kernels, so the shape a rule promises is the shape a kernel produces.

ONNX rules, per spatial axis with input size ``n``, kernel ``k``, stride ``s``, dilation
``d`` and effective kernel ``e = (k - 1) * d + 1``:
- explicit pads ``(b, a)``: ``out = floor((n + b + a - e) / s) + 1`` (``ceil`` with
  ``ceil_mode``, dropping a last window that would start in the end padding);
- ``SAME_UPPER``/``SAME_LOWER``: ``out = ceil(n / s)``, total pad ``max(0, (out - 1) * s + e - n)``
  split with the extra pixel at the end (UPPER) or the beginning (LOWER);
- ``VALID``: no padding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...errors import ShapeError, UnsupportedOpError
from .nn_base import (I32, I64, INT, INTS, STRING, Dim, check_choice, define, elt, opt, require_float, shape_of,
                      tensor, variadic_results)

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True)
class Window:
    """Resolved geometry of one sliding-window op: per spatial axis, pads and output size."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[Dim, ...]
    pads_end: tuple[Dim, ...]
    out: tuple[Dim, ...]

    @property
    def effective(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def window_geometry(spatial: Sequence[Dim], kernel: Sequence[int], attrs, *, ceil_mode: bool = False) -> Window:
    """Pads and output sizes of a conv/pool window from the ONNX attributes."""
    n = len(spatial)
    strides = tuple(attrs.get("strides") or (1,) * n)
    dilations = tuple(attrs.get("dilations") or (1,) * n)
    pads = tuple(attrs.get("pads") or (0,) * (2 * n))
    auto_pad = attrs.get("auto_pad") or "NOTSET"
    check_choice(auto_pad, AUTO_PADS, "auto_pad")
    for what, v, length in (("strides", strides, n), ("dilations", dilations, n), ("pads", pads, 2 * n)):
        if len(v) != length:
            raise ShapeError(f"{what} {v} must have {length} values for {n} spatial dims")
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations) or any(p < 0 for p in pads):
        raise ShapeError(f"strides {strides} and dilations {dilations} must be >= 1 and pads {pads} >= 0")
    if any(k is not None and k < 1 for k in kernel):
        raise ShapeError(f"kernel_shape {tuple(kernel)} must be >= 1")
    begin: list[Dim] = []
    end: list[Dim] = []
    out: list[Dim] = []
    for i, (size, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)):
        e = (k - 1) * d + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            if size is None:
                begin.append(None), end.append(None), out.append(None)
                continue
            o = -(-size // s)
            total = max(0, (o - 1) * s + e - size)
            small, large = total // 2, total - total // 2
            b, a = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        else:
            b, a = (0, 0) if auto_pad == "VALID" else (pads[i], pads[n + i])
            if size is None:
                begin.append(b), end.append(a), out.append(None)
                continue
            span = size + b + a - e
            if span < 0:
                raise ShapeError(f"spatial dim {i}: window of size {e} is larger than the padded input "
                                 f"({size} + {b} + {a})")
            o = (-(-span // s) if ceil_mode else span // s) + 1
            if ceil_mode and (o - 1) * s >= size + b:
                o -= 1
        begin.append(b), end.append(a), out.append(o)
    return Window(tuple(kernel), strides, dilations, tuple(begin), tuple(end), tuple(out))


_CONV_ATTRS = {"auto_pad": STRING("NOTSET"), "dilations": INTS(), "group": INT(1), "kernel_shape": INTS(),
               "pads": INTS(), "strides": INTS()}


def _conv_shape(x, w, attrs, what: str = "conv") -> tuple[Dim, ...] | None:
    xs, ws = shape_of(x), shape_of(w)
    if xs is None or ws is None:
        return None
    if len(xs) < 3 or len(ws) != len(xs):
        raise ShapeError(f"{what} expects x of rank >= 3 and w of the same rank, got x {xs} and w {ws}")
    group = attrs["group"]
    kernel = tuple(attrs.get("kernel_shape") or ws[2:])
    if tuple(kernel) != tuple(ws[2:]) and None not in ws[2:]:
        raise ShapeError(f"kernel_shape {kernel} does not match the weight's spatial dims {ws[2:]}")
    if xs[1] is not None and ws[1] is not None and xs[1] != ws[1] * group:
        raise ShapeError(f"x has {xs[1]} channels but w expects {ws[1]} per group x {group} groups")
    if ws[0] is not None and ws[0] % group:
        raise ShapeError(f"{ws[0]} output channels do not divide into {group} groups")
    win = window_geometry(xs[2:], kernel, attrs)
    return (xs[0], ws[0], *win.out)


def _conv(types, attrs):
    x, w = types[0], types[1]
    require_float(x, "conv input")
    shape = _conv_shape(x, w, attrs)        # checks the ranks before the bias reads w's dim 0
    if len(types) == 3 and shape_of(types[2]) is not None and shape_of(w) is not None:
        if shape_of(types[2]) != (shape_of(w)[0],):
            raise ShapeError(f"bias of shape {shape_of(types[2])} must be ({shape_of(w)[0]},)")
    return [tensor(shape, elt(x))]


def _conv_integer(types, attrs):
    return [tensor(_conv_shape(types[0], types[1], attrs, "conv_integer"), I32)]


def _qlinear_conv(types, attrs):
    return [tensor(_conv_shape(types[0], types[3], attrs, "qlinear_conv"), elt(types[7]))]


def conv_transpose_geometry(spatial, kernel, attrs) -> tuple[list[Dim], list[Dim], list[Dim]]:
    """Output sizes and (begin, end) pads of ConvTranspose, per ONNX's rules."""
    n = len(spatial)
    strides = tuple(attrs.get("strides") or (1,) * n)
    dilations = tuple(attrs.get("dilations") or (1,) * n)
    out_pad = tuple(attrs.get("output_padding") or (0,) * n)
    pads = tuple(attrs.get("pads") or (0,) * (2 * n))
    auto_pad = attrs.get("auto_pad") or "NOTSET"
    check_choice(auto_pad, AUTO_PADS, "auto_pad")
    output_shape = attrs.get("output_shape")
    if output_shape is not None and len(output_shape) > n:
        output_shape = output_shape[-n:]
    out, begin, end = [], [], []
    for i in range(n):
        size, k, s, d, op = spatial[i], kernel[i], strides[i], dilations[i], out_pad[i]
        e = (k - 1) * d + 1
        if size is None:
            out.append(None if output_shape is None else output_shape[i]), begin.append(None), end.append(None)
            continue
        full = s * (size - 1) + op + e
        if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            target = output_shape[i] if output_shape is not None else size * s
            total = full - target   # negative: the output is larger than the full result
            small, large = total // 2, total - total // 2
            b, a = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        elif auto_pad == "VALID":
            b, a = 0, 0
        else:
            b, a = pads[i], pads[n + i]
        out.append(full - b - a), begin.append(b), end.append(a)
    return out, begin, end


def _conv_transpose(types, attrs):
    x, w = types[0], types[1]
    require_float(x, "conv_transpose input")
    xs, ws = shape_of(x), shape_of(w)
    if xs is None or ws is None:
        return [tensor(None, elt(x))]
    if len(xs) < 3 or len(ws) != len(xs):
        raise ShapeError(f"conv_transpose expects x of rank >= 3 and w of the same rank, got x {xs} and w {ws}")
    kernel = tuple(attrs.get("kernel_shape") or ws[2:])
    if xs[1] is not None and ws[0] is not None and xs[1] != ws[0]:
        raise ShapeError(f"x has {xs[1]} channels but the weight expects {ws[0]}")
    out, _, _ = conv_transpose_geometry(xs[2:], kernel, attrs)
    channels = None if ws[1] is None else ws[1] * attrs["group"]
    return [tensor((xs[0], channels, *out), elt(x))]


def _pool(types, attrs):
    x = types[0]
    xs = shape_of(x)
    kernel = attrs["kernel_shape"]
    if xs is None:
        return [tensor(None, elt(x))]
    if len(xs) != len(kernel) + 2:
        raise ShapeError(f"kernel_shape {kernel} needs an input of rank {len(kernel) + 2}, got rank {len(xs)}")
    if attrs.get("storage_order", 0) not in (0, 1):
        raise UnsupportedOpError(f"storage_order = {attrs['storage_order']} is not supported")
    win = window_geometry(xs[2:], kernel, attrs, ceil_mode=bool(attrs["ceil_mode"]))
    y = tensor((xs[0], xs[1], *win.out), elt(x))
    return [y, tensor(shape_of(y), I64)]


def _global_pool(types, attrs):
    xs = shape_of(types[0])
    return [tensor(None if xs is None else (*xs[:2], *(1,) * (len(xs) - 2)), elt(types[0]))]


CONV = define("conv", ("x", "w", opt("b")), ("y",), _CONV_ATTRS, _conv,
              summary="N-d convolution (ONNX Conv), grouped and dilated.")
CONV_TRANSPOSE = define(
    "conv_transpose", ("x", "w", opt("b")), ("y",),
    {**_CONV_ATTRS, "output_padding": INTS(), "output_shape": INTS()}, _conv_transpose,
    summary="N-d transposed convolution (ONNX ConvTranspose); w is (C_in, C_out / group, k...).")
CONV_INTEGER = define("conv_integer", ("x", "w", "x_zero_point", "w_zero_point"), ("y",), _CONV_ATTRS,
                      _conv_integer, summary="(x - x_zp) conv (w - w_zp) with an i32 result.")
QLINEAR_CONV = define(
    "qlinear_conv", ("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale",
                     "y_zero_point", opt("b")), ("y",), _CONV_ATTRS, _qlinear_conv,
    summary="Quantized conv: requantize(int conv(x - x_zp, w - w_zp) + b, x_scale * w_scale / y_scale).")

_POOL_ATTRS = {"auto_pad": STRING("NOTSET"), "ceil_mode": INT(0), "dilations": INTS(),
               "kernel_shape": INTS(required=True), "pads": INTS(), "strides": INTS()}
MAX_POOL = define("max_pool", ("x",), ("y", variadic_results("indices")),
                  {**_POOL_ATTRS, "storage_order": INT(0)}, _pool,
                  summary="Max pooling; the optional second result holds flat argmax indices.")
AVERAGE_POOL = define("average_pool", ("x",), ("y",), {**_POOL_ATTRS, "count_include_pad": INT(0)},
                      lambda t, a: _pool(t, a)[:1], summary="Average pooling.")
GLOBAL_AVERAGE_POOL = define("global_average_pool", ("x",), ("y",), {}, _global_pool,
                             summary="Mean over all spatial dims, kept as size 1.")
GLOBAL_MAX_POOL = define("global_max_pool", ("x",), ("y",), {}, _global_pool,
                         summary="Max over all spatial dims, kept as size 1.")
