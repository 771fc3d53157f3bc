"""Weight-only modules (``quantize.weight_only``) as ``.tflite``: each quantized weight is an int8 or
int4 constant with its scales and zero points, a DEQUANTIZE to float32, and the float op reading it;
everything else is float (:mod:`.export_float`).

>>> result = quantir.quantize_weights("model.onnx", bits=4)        # doctest: +SKIP
>>> result.save("model.int4.tflite")                                # doctest: +SKIP

What LiteRT 2.3 runs (``BUILTIN_REF``, measured on one-op models): DEQUANTIZE of a constant of
INT8 or INT4 storage with per-tensor or per-axis scales, zero points 0 or not, feeding a float
FULLY_CONNECTED (weights [N, K], axis 0), BATCH_MATMUL (rhs [K, N], axis 1), CONV_2D (OHWI, axis 0),
DEPTHWISE_CONV_2D (1HWC, axis 3) or GATHER (a table, axis 0): each equal to the product with the
dequantized weight within float32 rounding. Each DEQUANTIZE's output is a float32 tensor of the
weight's full shape: the file is small, but at run time the weights take float32's memory and the
ops run in float (an int8 table read in place is the dynamic-range EMBEDDING_LOOKUP of
``quantize_hybrid``, not this form).

INT4 storage: the row-major elements two per byte, the first in the low nibble, an odd count padded
with a zero nibble (LiteRT unpacks the whole tensor so: a nibble order swapped gives other weights,
measured). Block-wise weights (``block_size`` set) are refused with ``UnsupportedOpError``. The
schema's ``BlockwiseQuantization`` details (block scales in a separate FLOAT16 tensor) exist, but,
measured with a writer patched for the probe on an INT4 [8, 64] weight in blocks of 32: the
reference kernels ignore them and return zeros, for DEQUANTIZE and for a FULLY_CONNECTED reading
the weight directly; only XNNPACK's FULLY_CONNECTED computes it (int8 activations at run time,
0.7% off the float product). No oracle runs it, so quantir does not write it.

Layout: a weight is written in the layout its reader takes (MatMul B [K, N] transposed to
FULLY_CONNECTED's [N, K], a conv filter OIHW to OHWI or 1HWC), the integers transposed at export
and the quantized dimension moved with them; a weight read elsewhere (a Gather table) keeps the
IR layout. Each (weight, layout) is written once.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from quantir.backends.tflite.export import OP, Form, _Exporter, _what, export_tflite
from quantir.backends.tflite.model import Quantization
from quantir.backends.tflite.schema import TensorType as TFLiteTensorType
from quantir.errors import UnsupportedOpError
from quantir.ir import Function, Module, Operation, Value
from quantir.ir.dialects import nn, quant
from quantir.types import TensorType
from quantir.types.quant import (QuantizedType, UniformQuantizedPerAxisType, UniformQuantizedSubChannelType,
                                 UniformQuantizedType)

__all__ = ["weight_chain", "dequantized", "weight_dcast", "check_tflite_weights", "save_weight_only_tflite",
           "pack_int4"]


def weight_chain(v: Value) -> tuple[np.ndarray, QuantizedType] | None:
    """(the storage integers, their quantized type) when ``v`` is ``quant.dcast`` of a stored constant."""
    op = getattr(v, "op", None)
    if op is None or op.opdef is not quant.DCAST:
        return None
    data = quant.stored_constant(op.operands[0])
    t = op.operands[0].type
    q = t.element_type if isinstance(t, TensorType) else None
    if data is None or not isinstance(q, QuantizedType):
        return None
    return np.asarray(data), q


def pack_int4(q: np.ndarray) -> bytes:
    """Signed 4-bit integers, row-major, two per byte, the first in the low nibble (LiteRT's INT4)."""
    u = (np.ravel(q).astype(np.int16) & 0xF).astype(np.uint8)
    if u.size % 2:
        u = np.append(u, np.uint8(0))
    return (u[0::2] | (u[1::2] << 4)).astype(np.uint8).tobytes()


def _quantization(v: Value, q: QuantizedType, perm: tuple[int, ...]) -> Quantization:
    if isinstance(q, UniformQuantizedPerAxisType):
        return Quantization(q.scales_array(), q.zero_points_array(), perm.index(q.quantized_dimension))
    if isinstance(q, UniformQuantizedType):
        return Quantization([q.scale], [q.zero_point])
    if isinstance(q, UniformQuantizedSubChannelType):
        raise UnsupportedOpError(_blockwise_message(v, q))
    raise UnsupportedOpError(f"weight '{v.name_hint}' of type {q} has no TFLite DEQUANTIZE form")


def _blockwise_message(v: Value, q: UniformQuantizedSubChannelType) -> str:
    blocks = ", ".join(f"{s} along axis {d}" for d, s in q.block_sizes if s != 1)
    return (f"weight '{v.name_hint}' is quantized block-wise (blocks of {blocks}): a .tflite DEQUANTIZE takes "
            f"per-tensor or per-channel scales only; quantize with block_size=None (per channel) for .tflite, "
            f"or save the block-wise model as .onnx")


def dequantized(ex: _Exporter, v: Value, perm: tuple[int, ...] | None = None) -> int | None:
    """The float32 tensor of weight ``v`` (a ``quant.dcast`` of stored integers) in the layout ``perm``
    of its IR axes: the integers transposed, a DEQUANTIZE after them. None when ``v`` is no such weight."""
    chain = weight_chain(v)
    if chain is None:
        return None
    data, q = chain
    perm = tuple(range(data.ndim)) if perm is None else tuple(perm)
    cache = ex.__dict__.setdefault("_weight_only_tensors", {})
    if (v, perm) in cache:
        return cache[(v, perm)]
    quantization = _quantization(v, q, perm)
    ints = np.ascontiguousarray(data.transpose(perm))
    tag = "" if perm == tuple(range(data.ndim)) else "/" + "".join(map(str, perm))
    name = f"{v.name_hint or 'weight'}{tag}"
    width = q.storage_width
    if width == 4:
        stored = ex.b.add_tensor(ex._name(f"{name}/int4"), ints.shape, TFLiteTensorType.INT4, quantization,
                                 buffer=ex.b.add_buffer(pack_int4(ints)))
    elif q.storage_numpy_dtype is None:
        raise UnsupportedOpError(f"weight '{v.name_hint}' has float storage ({q}); a .tflite DEQUANTIZE reads "
                                 f"integers")
    else:   # int8 (an int16/int32 constant of an integer model read by a float op is written the same way)
        stored = ex.constant(ints.astype(q.storage_numpy_dtype), f"{name}/int{width}", quantization)
    out = ex.b.add_tensor(ex._name(name), ints.shape, np.float32)
    ex.b.add_operator(OP.DEQUANTIZE, [stored], [out])
    cache[(v, perm)] = out
    return out


def _reads_as_weight(user: Operation, i: int) -> bool:
    """Readers whose float rules ask :func:`dequantized` for the weight in their own layout."""
    if i != 1:
        return False
    if user.opdef is nn.MATMUL:
        return len(user.operands[1].type.shape) == 2 and len(user.operands[0].type.shape) >= 2
    return user.opdef in (nn.GEMM, nn.CONV)


def weight_dcast(ex: _Exporter, op: Operation) -> None:
    """A weight's ``quant.dcast``: its readers that take a weight write their own DEQUANTIZE (in their
    layout); any other reader (a Gather) gets it in the IR layout."""
    v = op.results[0]
    if all(_reads_as_weight(u, i) for u, i in v.uses):
        return
    ex.bind(v, Form.ASIS, dequantized(ex, v))


def check_tflite_weights(fn: Function) -> None:
    """Raise before writing anything when a weight has no .tflite form (block-wise scales)."""
    for op in fn.ops:
        chain = weight_chain(op.results[0]) if op.results else None
        if chain is not None and isinstance(chain[1], UniformQuantizedSubChannelType):
            raise UnsupportedOpError(f"{_what(op)}: " + _blockwise_message(op.results[0], chain[1]))


def save_weight_only_tflite(module: Module | Function, path: "str | os.PathLike") -> Path:
    """Write the weight-only module as ``path`` (.tflite) atomically, float32 inputs and outputs."""
    from quantir.fileio import atomic_write
    fn = module.main if isinstance(module, Module) else module
    check_tflite_weights(fn)
    data = export_tflite(fn).to_bytes()
    p = Path(path)
    atomic_write(p, data)
    return p
