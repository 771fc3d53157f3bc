"""Build small integer (qnn) functions directly, for export tests: float in -> qcast -> ops -> dcast -> out.

Parameters are the test's to choose (hypothesis draws them), not a calibrator's, so the
exporter is checked on multipliers near 1 and tiny, zero points at the range ends and
per-axis scales spanning 1e3.
"""
from __future__ import annotations

import numpy as np

from quantir.ir import Block, Function, Module, Value, elements_attr
from quantir.ir.attributes import StringAttr
from quantir.ir.dialects import arith, func, quant
from quantir.numerics import quantize_multipliers
from quantir.types import (FloatType, FunctionType, IntegerType, TensorType, UniformQuantizedPerAxisType,
                           UniformQuantizedType)

I8, I32, F32 = IntegerType(8), IntegerType(32), FloatType("f32")


def qt(shape, scale, zp=0) -> TensorType:
    return TensorType(tuple(shape), UniformQuantizedType(storage_type=I8, expressed_type=F32, scale=float(scale),
                                                         zero_point=int(zp)))


def per_axis(shape, scales, storage=I8, axis=0, narrow=True) -> TensorType:
    scales = tuple(float(np.float32(s)) for s in np.ravel(scales))
    extra = {"storage_min": -127, "storage_max": 127} if narrow and storage is I8 else {}
    return TensorType(tuple(shape), UniformQuantizedPerAxisType(
        storage_type=storage, expressed_type=F32, scales=scales, zero_points=(0,) * len(scales),
        quantized_dimension=axis, **extra))


class QFunction:
    """One float input ``x`` quantized with (scale, zp); ops appended with :meth:`op`."""

    def __init__(self, shape, scale, zp):
        self.in_type = TensorType(tuple(shape), F32)
        self.body = Block([self.in_type])
        self.x = self.body.arguments[0]
        self.x.name_hint = "x"
        self.q = self.op(quant.QCAST, [self.x], qt(shape, scale, zp), "xq")

    def op(self, opdef, operands, result_type, name, **attrs) -> Value:
        v = self.body.append(opdef.build(list(operands), [result_type], **attrs)).result
        v.name_hint = name
        return v

    def const(self, ints, qtype: TensorType, name: str) -> Value:
        ints = np.asarray(ints)
        storage = qtype.element_type.storage_type
        arr = ints.astype({8: np.int8, 32: np.int32}[storage.width])
        c = self.body.append(arith.CONSTANT.build([], [TensorType(arr.shape, storage)],
                                                  value=elements_attr(arr, storage))).result
        return self.op(quant.SCAST, [c], qtype, name)

    def fixed_point(self, real) -> dict:
        m, s = quantize_multipliers(np.atleast_1d(np.asarray(real, np.float64)))
        return {"multiplier": m.tolist(), "shift": s.tolist()}

    def finish(self, *outs: Value) -> Module:
        results = []
        for i, v in enumerate(outs):
            f = self.op(quant.DCAST, [v], v.type.clone(element_type=F32), f"out{i}")
            results.append(f)
        self.body.append(func.RETURN.build(results, []))
        fn = Function("main", FunctionType((self.in_type,), tuple(r.type for r in results)), body=self.body,
                      arg_attrs=[{"quantir.name": StringAttr("x")}],
                      res_attrs=[{"quantir.name": StringAttr(f"out{i}")} for i in range(len(results))])
        return Module([fn])


def feeds_for(rng: np.random.Generator, shape, scale, zp) -> np.ndarray:
    """Floats that quantize to int8 values spread over the whole range, ends included."""
    q = rng.integers(-128, 128, size=shape)
    u = rng.random(size=shape)
    q[u < 0.05], q[u > 0.95] = -128, 127
    return ((q - zp) * np.float32(scale)).astype(np.float32)
