"""ONNX's quantization ops as ``nn`` ops: ``nn.quantize_linear``, ``nn.dequantize_linear``,
``nn.dynamic_quantize_linear``. (``nn.qlinear_conv``/``conv_integer`` live in ``nn_conv``,
``nn.qlinear_matmul``/``matmul_integer`` in ``nn_linalg``.)

These carry ONNX semantics on storage integers (``ui8``, ``i8``, ...): they are what an ONNX
QDQ or QOperator model imports to, not quantir's own ``quant`` dialect types. The importer
always passes a zero point (zeros when the ONNX node omits it), so the result element type
is the zero point's.

Scale layouts (``quantization_layout``): a scalar or 1-element scale is per-tensor; a 1-D
scale of length ``x.shape[axis]`` is per-axis; a scale of x's rank whose ``axis`` dim is
``ceil(x.shape[axis] / block_size)`` is blocked.
"""
from __future__ import annotations

from ...errors import ShapeError
from ...types import IntegerType
from .nn_base import F32, INT, define, elt, fmt_shape, normalize_axis, require_float, shape_of, tensor

_U8 = IntegerType(8, "unsigned")


def quantization_layout(x_shape, scale_shape, axis: int, block_size: int) -> str:
    """``"tensor"``, ``"axis"`` or ``"block"``; raises ``ShapeError`` for a scale that fits none."""
    if scale_shape is None or x_shape is None:
        return "tensor" if scale_shape in ((), (1,)) else "axis"
    if block_size:
        ax = normalize_axis(axis, len(x_shape))
        if len(scale_shape) != len(x_shape):
            raise ShapeError(f"blocked scale {fmt_shape(scale_shape)} must have the rank of x {fmt_shape(x_shape)}")
        for i, (d, s) in enumerate(zip(x_shape, scale_shape)):
            want = d if i != ax else (None if d is None else -(-d // block_size))
            if None not in (want, s) and want != s:
                raise ShapeError(f"blocked scale {fmt_shape(scale_shape)} does not fit x {fmt_shape(x_shape)} "
                                 f"with block_size {block_size} on axis {ax}")
        return "block"
    if len(scale_shape) == 0 or tuple(scale_shape) == (1,):
        return "tensor"   # one value: per-tensor, whatever the axis says
    if len(scale_shape) == 1:
        ax = normalize_axis(axis, len(x_shape))
        if None not in (x_shape[ax], scale_shape[0]) and x_shape[ax] != scale_shape[0]:
            raise ShapeError(f"per-axis scale of {scale_shape[0]} values does not match dim {ax} "
                             f"of x {fmt_shape(x_shape)}")
        return "axis"
    raise ShapeError(f"scale of shape {fmt_shape(scale_shape)} is neither per-tensor, per-axis nor blocked "
                     f"for x {fmt_shape(x_shape)}")


def _check_params(types, attrs, what):
    x, scale, zp = types
    quantization_layout(shape_of(x), shape_of(scale), attrs["axis"], attrs["block_size"])
    one = lambda shape: shape is not None and all(d == 1 for d in shape)  # noqa: E731  () or (1,): per tensor
    if shape_of(zp) is not None and shape_of(scale) is not None and shape_of(zp) != shape_of(scale) \
            and not (one(shape_of(zp)) and one(shape_of(scale))):
        raise ShapeError(f"{what} zero point {fmt_shape(shape_of(zp))} must have the scale's shape "
                         f"{fmt_shape(shape_of(scale))}")
    require_float(scale, f"{what} scale")


def _quantize(types, attrs):
    _check_params(types, attrs, "quantize_linear")
    if not isinstance(elt(types[2]), IntegerType):
        raise ShapeError(f"quantize_linear zero point must be an integer, got '{elt(types[2])}'")
    return [tensor(shape_of(types[0]), elt(types[2]))]


def _dequantize(types, attrs):
    _check_params(types, attrs, "dequantize_linear")
    return [tensor(shape_of(types[0]), elt(types[1]))]


def _dynamic_quantize(types, attrs):
    require_float(types[0], "dynamic_quantize_linear input")
    return [tensor(shape_of(types[0]), _U8), tensor((), F32), tensor((), _U8)]


_ATTRS = {"axis": INT(1), "block_size": INT(0)}
QUANTIZE_LINEAR = define(
    "quantize_linear", ("x", "y_scale", "y_zero_point"), ("y",), {**_ATTRS, "saturate": INT(1)}, _quantize,
    summary="y = saturate(round_half_even(x / y_scale) + y_zero_point) in the zero point's type.")
DEQUANTIZE_LINEAR = define(
    "dequantize_linear", ("x", "x_scale", "x_zero_point"), ("y",), _ATTRS, _dequantize,
    summary="y = (x - x_zero_point) * x_scale in the scale's type.")
DYNAMIC_QUANTIZE_LINEAR = define(
    "dynamic_quantize_linear", ("x",), ("y", "y_scale", "y_zero_point"), {}, _dynamic_quantize,
    summary="ui8 quantization with scale and zero point computed from x's range (which includes 0).")
