"""A float module with ``quant.qcast -> quant.dcast`` pairs (or fake-quant ops) as a QDQ function.

A QAT tool that writes ``quant.const_fake_quant`` ops gives each quantized tensor its range; after
``--convert-fake-quant`` (:mod:`quantir.passes.fake_quant`) each is a qcast/dcast pair with the
exact ``!quant.uniform`` type. :func:`casts_to_qdq` rewrites those pairs into the ONNX
``QuantizeLinear -> DequantizeLinear`` pairs :mod:`quantir.quantize.from_qdq` converts, so the
integer module keeps the module's own scales and zero points (no recalibration):

* an activation pair (per tensor, 8-bit storage with its full range) -> ``QuantizeLinear`` and
  ``DequantizeLinear`` with constant scale and zero point (``i8`` or ``u8``, as the type says);
* a pair on an ``arith.constant`` (a weight, per tensor or per axis, up to 8 bits) ->
  ``DequantizeLinear`` of the stored integers, quantized here with the pair's own rounding
  (QUANTIZE's, :func:`quantir.numerics.quantize_tflite`), so the float module and the integer one
  hold the same weights.

Refused with :class:`~quantir.quantize.from_qdq.QdqError` (naming the value): a per-axis pair on an
activation; activation storage other than full-range 8 bits (narrow range, 4, 6 or 16 bits: the
int8 kernels would clamp to another range than the type); weights wider than 8 bits; a lone qcast
or dcast.
"""
from __future__ import annotations

import numpy as np

from ..ir import Module, Operation
from ..ir.dialects import arith, nn, quant
from ..numerics import quantize_tflite
from ..passes.fold_constants import make_constant
from ..types import TensorType, UniformQuantizedPerAxisType, UniformQuantizedType
from .from_qdq import QdqError
from .regions import constant_array

__all__ = ["casts_to_qdq"]


def _name(op: Operation) -> str:
    return op.label or op.results[0].name_hint or (f"{op.name} at {op.loc}" if op.loc else op.name)


def _params(t) -> tuple[np.ndarray, np.ndarray, int | None]:
    if isinstance(t, UniformQuantizedPerAxisType):
        return np.asarray(t.scales, np.float32), np.asarray(t.zero_points, np.int64), t.quantized_dimension
    return np.asarray(t.scale, np.float32), np.asarray(t.zero_point, np.int64), None


def _rewrite(fn, dq: Operation) -> None:
    q = getattr(dq.operands[0], "op", None)
    if q is None or q.opdef is not quant.QCAST:
        raise QdqError(f"'{_name(dq)}': a quant.dcast of a value no quant.qcast produces; only qcast -> dcast "
                       f"pairs (and fake-quant ops) convert")
    t = q.results[0].type.element_type
    if not isinstance(t, (UniformQuantizedType, UniformQuantizedPerAxisType)):
        raise QdqError(f"'{_name(q)}': {t} is not a !quant.uniform type")
    x, (scale, zp, axis) = q.operands[0], _params(t)
    dtype = np.int8 if t.is_signed else np.uint8
    values = constant_array(x) if getattr(x, "op", None) is not None and x.op.opdef is arith.CONSTANT else None
    if values is not None:   # a weight: its stored integers
        if t.storage_width > 8:
            raise QdqError(f"'{_name(q)}': a {t.storage_width}-bit weight; weights convert up to 8 bits")
        stored = quantize_tflite(np.asarray(values, np.float32), scale, zp, t.storage_min, t.storage_max, axis=axis)
        src = fn.body.insert_before(q, make_constant(stored.astype(dtype), label=q.label)).results[0]
    else:
        if axis is not None:
            raise QdqError(f"'{_name(q)}': per-axis quantization of an activation has no LiteRT int8 form")
        if t.storage_width != 8 or not t.has_default_storage_range:
            raise QdqError(f"'{_name(q)}': activation storage {t.storage_spelling}<{t.storage_min}:{t.storage_max}> "
                           f"is not converted (8-bit storage with its full range is: the int8 kernels clamp to it)")
        s_c, z_c = (fn.body.insert_before(q, make_constant(a)).results[0]
                    for a in (scale, zp.astype(dtype)))
        src = fn.body.insert_before(q, nn.QUANTIZE_LINEAR.build([x, s_c, z_c], [TensorType(
            x.type.shape, t.storage_type)], loc=q.loc, label=q.label)).results[0]
    s_c, z_c = (fn.body.insert_before(dq, make_constant(a)).results[0] for a in (scale, zp.astype(dtype)))
    attrs = {} if axis is None else {"axis": axis}
    new = fn.body.insert_before(dq, nn.DEQUANTIZE_LINEAR.build([src, s_c, z_c], [dq.results[0].type], loc=dq.loc,
                                                               label=dq.label, **attrs))
    new.results[0].name_hint = dq.results[0].name_hint
    dq.results[0].replace_all_uses_with(new.results[0])
    fn.body.erase(dq)
    if not q.results[0].has_uses:
        fn.body.erase(q)


def _name_values(fn) -> None:
    """from_qdq keys parameters by value name (an ONNX tensor name); IR text has none: name each
    unnamed value after its op and position (``nn.conv_3``)."""
    taken = {v.name_hint for v in fn.body.arguments} | {r.name_hint for op in fn.ops for r in op.results}
    for i, a in enumerate(fn.body.arguments):
        if not a.name_hint:
            a.name_hint = f"arg{i}"
    for i, op in enumerate(fn.ops):
        for j, r in enumerate(op.results):
            if not r.name_hint:
                name = f"{op.name.split('.')[-1]}_{i}" + (f"_{j}" if j else "")
                while name in taken:
                    name += "_"
                r.name_hint = name
                taken.add(name)


def casts_to_qdq(module: Module) -> int:
    """Rewrite every qcast -> dcast pair of ``module``'s main function (in place); the pair count."""
    fn = module.main
    _name_values(fn)
    pairs = [op for op in fn.ops if op.opdef is quant.DCAST]
    for dq in pairs:
        _rewrite(fn, dq)
    left = [op for op in fn.ops if op.opdef in (quant.QCAST, quant.SCAST)]
    if left:
        raise QdqError(f"'{_name(left[0])}': a {left[0].name} without its pair; only qcast -> dcast pairs convert")
    return len(pairs)
