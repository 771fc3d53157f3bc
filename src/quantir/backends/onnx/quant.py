"""The ``quant`` dialect as ONNX QDQ: ``quant.qcast`` -> QuantizeLinear, ``quant.dcast`` ->
DequantizeLinear, ``quant.scast`` -> Identity.

Parameters come from the quantized type: per-tensor ``!quant.uniform<i8:f32, s:z>`` gives a
scalar scale and zero point, per-axis ``!quant.uniform<i8:f32:1, {s0:z0, s1:z1}>`` gives 1-D
ones and ``axis = quantized_dimension``. The scale initializer has the expressed type
(``f32``: the double scale of the type rounded to float32), the zero point the storage type
(``i8`` -> int8, ``ui8``/``u8`` -> uint8; ``i16``/``ui16`` need opset 21).

Numerics (docs/numerics.md): ONNX QuantizeLinear computes ``saturate(round_half_even(x /
scale) + zero_point)`` with the division in float32 — ties go to even, unlike LiteRT's
QUANTIZE, which rounds half away from zero — which is ``quantir.numerics.quantize_onnx``.
DequantizeLinear computes ``(q - zero_point) * scale`` in float32, which is
``quantir.numerics.dequantize(..., scheme="onnx")`` (the same bits as LiteRT for 8- and
16-bit storage). A storage range narrower than the storage type (``i8<-127:127>``) is
enforced by a Clip on the integers after QuantizeLinear, so the exported model saturates
where the type says.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...errors import UnsupportedOpError
from ...ir import Operation
from ...ir.dialects import quant
from ...types import IntegerType, QuantizedType, TensorType, UniformQuantizedPerAxisType, UniformQuantizedType
from .dtypes import numpy_dtype, storage_element_type

if TYPE_CHECKING:
    from .exporter import NodeContext

_STORAGE_SINCE = {np.dtype(np.int8): 13, np.dtype(np.uint8): 13, np.dtype(np.int16): 21, np.dtype(np.uint16): 21}


def _params(ctx: "NodeContext", op: Operation, value) -> tuple[str, str, int | None, QuantizedType]:
    """(scale name, zero point name, axis or None, quantized type) of a quantized value."""
    t = value.type
    q = t.element_type if isinstance(t, TensorType) else t
    what = ctx.describe(op)
    if not isinstance(q, (UniformQuantizedType, UniformQuantizedPerAxisType)):
        raise UnsupportedOpError(f"{what}: quantized type '{q}' has no ONNX QuantizeLinear/DequantizeLinear form "
                                 f"(supported: per-tensor and per-axis !quant.uniform)")
    st = storage_element_type(t)
    since = _STORAGE_SINCE.get(numpy_dtype(t, what)) if isinstance(st, IntegerType) and st.width in (8, 16) else None
    if since is None:
        raise UnsupportedOpError(f"{what}: storage type {q.storage_spelling} of '{q}' has no ONNX quantized form "
                                 f"(supported: i8, u8/ui8, and i16/ui16 from opset 21)")
    if ctx.opset < since:
        raise UnsupportedOpError(f"{what}: {q.storage_spelling} storage needs ONNX opset {since} or newer "
                                 f"(exporting at opset {ctx.opset})")
    storage = numpy_dtype(t, what)
    expressed = numpy_dtype(TensorType((), q.expressed_type), what)
    if isinstance(q, UniformQuantizedType):
        scales, zps, axis = np.asarray(q.scale), np.asarray(q.zero_point), None
    else:
        scales, zps, axis = np.asarray(q.scales), np.asarray(q.zero_points), q.quantized_dimension
    info = np.iinfo(storage)
    if zps.size and (zps.min() < info.min or zps.max() > info.max):
        raise UnsupportedOpError(f"{what}: zero point of '{q}' does not fit in {storage} storage")
    hint = ctx.name(value)
    scale_name = ctx.constant(scales.astype(expressed), f"{hint}_scale")
    zp_name = ctx.constant(zps.astype(storage), f"{hint}_zero_point")
    return scale_name, zp_name, axis, q


def _axis_attrs(axis: int | None) -> dict:
    return {} if axis is None else {"axis": axis}


def _qcast(ctx: "NodeContext", op: Operation) -> None:
    scale, zp, axis, q = _params(ctx, op, op.results[0])
    out = ctx.result_names(op)[0]
    narrow = not q.has_default_storage_range
    raw = ctx.fresh(f"{out}_unclipped", like=op.results[0]) if narrow else out
    ctx.node(op, "QuantizeLinear", [ctx.name(op.operands[0]), scale, zp], [raw], _axis_attrs(axis))
    if narrow:
        storage = numpy_dtype(op.results[0].type, ctx.describe(op))
        lo = ctx.constant(np.asarray(q.storage_min, dtype=storage), f"{out}_storage_min")
        hi = ctx.constant(np.asarray(q.storage_max, dtype=storage), f"{out}_storage_max")
        ctx.node(op, "Clip", [raw, lo, hi], [out], {})


def _dcast(ctx: "NodeContext", op: Operation) -> None:
    scale, zp, axis, _ = _params(ctx, op, op.operands[0])
    ctx.node(op, "DequantizeLinear", [ctx.name(op.operands[0]), scale, zp], ctx.result_names(op),
             _axis_attrs(axis))


def _identity(ctx: "NodeContext", op: Operation) -> None:
    """Ops that do not change the stored bits: scast, and the instrumentation identities."""
    what = ctx.describe(op)
    src, dst = op.operands[0].type, op.results[0].type
    if numpy_dtype(src, what) != numpy_dtype(dst, what):
        raise UnsupportedOpError(f"{what}: '{src}' and '{dst}' have different ONNX storage types")
    ctx.node(op, "Identity", [ctx.name(op.operands[0])], ctx.result_names(op), {})


CUSTOM = {
    quant.QCAST: _qcast,
    quant.DCAST: _dcast,
    quant.SCAST: _identity,
    quant.STATS_REF: _identity,
    quant.STATS: _identity,
    quant.COUPLED_REF: _identity,
}

__all__ = ["CUSTOM"]
