"""The IR rewrite: each chosen weight becomes storage integers -> quant.scast -> quant.dcast."""
from __future__ import annotations

import math

import numpy as np

from ...ir import Function, Module, Operation, Value
from ...ir.builder import OpBuilder, function_like
from ...ir.dialects import arith, func, quant
from ...ir.mapping import IRMapping
from ...types import FloatType, IntegerType, TensorType
from ...types.quant import UniformQuantizedPerAxisType, UniformQuantizedSubChannelType
from .array import quantize_array
from .config import WeightOnlyConfig, WeightOnlyError
from .result import WeightLayer, WeightOnlyResult
from .rounding import Quantized
from .sites import Site, _constant, find_sites

_F32 = FloatType("f32")


def _quant_type(qz: Quantized, site: Site, config: WeightOnlyConfig):
    storage = IntegerType(config.bits)
    zps = qz.zero_points.astype(np.int64)
    if config.block_size is None:
        return UniformQuantizedPerAxisType(storage_type=storage, expressed_type=_F32,
                                           scales=qz.scales.astype(np.float64).tolist(),
                                           zero_points=zps.tolist(), quantized_dimension=site.channel_axis,
                                           storage_min=config.qrange[0], storage_max=config.qrange[1])
    blocks = tuple((d, config.block_size if d == site.block_axis else 1) for d in range(qz.q.ndim))
    return UniformQuantizedSubChannelType(storage_type=storage, expressed_type=_F32,
                                          scales=qz.scales.astype(np.float64).ravel().tolist(),
                                          zero_points=zps.ravel().tolist(), shape=qz.scales.shape,
                                          block_sizes=blocks, storage_min=config.qrange[0],
                                          storage_max=config.qrange[1])


def _stored_bytes(qz: Quantized, config: WeightOnlyConfig) -> int:
    n = (qz.q.size * config.bits + 7) // 8 + 4 * qz.scales.size
    return n + (0 if config.symmetric else (qz.zero_points.size * config.bits + 7) // 8)


def _constant_bytes(fn: Function) -> int:
    total = 0
    for op in fn.ops:
        if op.opdef is arith.CONSTANT and op.results[0].uses:
            a = getattr(op.attributes.get("value"), "array", None)
            if a is not None:
                t = op.results[0].type
                full = math.prod(t.shape) if isinstance(t, TensorType) and t.shape and None not in t.shape \
                    else np.asarray(a).size
                total += int(full) * np.asarray(a).dtype.itemsize
    return total


def quantize_weights(module: Module, config: WeightOnlyConfig,
                     importance: dict[Operation, np.ndarray] | None = None) -> WeightOnlyResult:
    """The weight-only module of ``module`` (left as it is). ``importance``: per op, the error
    weights of its weight (``input_importance``). Raises ``WeightOnlyError`` when no weight
    qualifies, with each weight's reason."""
    fn = module.main
    sites, left = find_sites(fn, config)
    if not sites:
        reasons = "; ".join(f"{x.name} ({x.op}): {x.reason}" for x in left[:8]) or \
            "the model has no constant MatMul/Gemm/Conv weight or Gather table"
        raise WeightOnlyError(f"no weight to quantize ({config.describe()}): {reasons}")
    by_op = {s.op: s for s in sites}
    new = function_like(fn)
    b = OpBuilder.at_end(new)
    mapping: IRMapping[Value] = IRMapping()
    mapping.map_all(fn.arguments, new.arguments)
    done: dict[Value, Value] = {}
    layers: list[WeightLayer] = []
    saved = 0
    for op in fn.ops:
        site = by_op.get(op)
        if site is None:
            if op.opdef is func.RETURN or op.opdef is not arith.CONSTANT or _needed_float(op, by_op):
                b.clone(op, mapping)
            continue
        v = op.operands[site.operand]
        if v not in done:
            w = _constant(v)
            how, stats = (importance or {}).get(op, (None, None))
            qz = quantize_array(w, channel_axis=site.channel_axis, block_axis=site.block_axis, config=config,
                                importance=stats if how == "diag" else None,
                                hessian=stats if how == "hessian" and w.ndim == 2 else None)
            done[v] = _emit_chain(b, qz, site, config, v, op)
            gran = (f"per channel, axis {site.channel_axis}" if config.block_size is None else
                    f"block {config.block_size} along axis {site.block_axis}")
            rounding = ("rtn" if config.rounding == "rtn" else "gptq" if how == "hessian" and w.ndim == 2 else
                        "mse, E[x^2]-weighted" if how == "diag" else "mse")
            stored = _stored_bytes(qz, config)
            saved += w.nbytes - stored
            layers.append(WeightLayer(v.name_hint or "?", op.label or op.name, site.kind, tuple(w.shape), gran,
                                      qz.sqnr_db, qz.sqnr_rtn_db, int(w.nbytes), stored, rounding))
        operands = [done[v] if i == site.operand else mapping.lookup(x) for i, x in enumerate(op.operands)]
        b.clone(op, mapping, operands=operands)
    new.update_type()
    before = _constant_bytes(fn)
    return WeightOnlyResult(Module([new], name=module.name), fn, config, layers, left, before, before - saved)


def _needed_float(const: Operation, by_op: dict) -> bool:
    """A float constant is kept unless its every reader is a site quantizing it."""
    r = const.results[0]
    return not r.uses or any(by_op.get(u) is None or by_op[u].operand != i for u, i in r.uses)


def _emit_chain(b: OpBuilder, qz: Quantized, site: Site, config: WeightOnlyConfig, v: Value,
                op: Operation) -> Value:
    """constant (storage) -> quant.scast -> quant.dcast, named after the float weight."""
    qtype = TensorType(tuple(qz.q.shape), _quant_type(qz, site, config))
    c = b.constant(np.ascontiguousarray(qz.q, np.int8), IntegerType(config.bits),
                   name=f"{v.name_hint or 'weight'}_quantized")
    # named after the weight, not labelled as the op: the op's label stays its own (its ONNX node name)
    s = b.insert(quant.SCAST.build([c], [qtype], loc=op.loc)).result
    s.name_hint = f"{v.name_hint or 'weight'}_stored"
    d = b.insert(quant.DCAST.build([s], [v.type], loc=op.loc)).result
    d.name_hint = v.name_hint
    return d
