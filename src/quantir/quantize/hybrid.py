"""Dynamic-range ("hybrid") quantization for LiteRT: int8 weights, float32 activations.

No calibration data. Each chosen float op with a constant weight becomes one of LiteRT's
dynamic-range ops (``ir/dialects/hybrid.py``), which quantize their float input at run time
inside the kernel; everything else stays float:

======================================  ======================================================
float op                                hybrid op (LiteRT builtin)
======================================  ======================================================
MatMul with a constant 2-D B, Gemm      ``hybrid.fully_connected`` (FULLY_CONNECTED); a
(+ Add of a constant [N] bias, + Relu)  following bias Add and Relu (or Clip to [0, 6] or
                                        [-1, 1]) are fused into it
MatMul with a constant B of rank 3-5    ``hybrid.batch_matmul`` (BATCH_MATMUL), one scale per
                                        column N
Conv 2-D with constant weights          ``hybrid.conv`` (CONV_2D; DEPTHWISE_CONV_2D when
(+ Relu, Relu6)                         group == C_in)
Gather of a constant [rows, D] table    ``hybrid.embedding_lookup`` (EMBEDDING_LOOKUP)
along axis 0 (an embedding)
======================================  ======================================================

EMBEDDING_LOOKUP reads ids in [0, rows): ONNX Gather's negative indices fail there, in LiteRT as in
the interpreter, with a QKernelError naming the id.

Weights: int8 symmetric per output channel in LiteRT's narrow range [-127, 127], round to nearest
(``quantize.dynamic.quantize_weight``, the ONNX dynamic path's own), zero point 0; an embedding
table one scale per row. A weight under ``min_elements`` elements stays float: LiteRT's converter
(``QuantizeWeights``, ``weights_min_num_elements``) keeps weights under 1024 elements float.

``asymmetric_quantize_inputs`` (FULLY_CONNECTED, BATCH_MATMUL) defaults to True, what LiteRT's
weight quantizer writes (its ``use_updated_hybrid_scheme``, on by default, sets the option on
both): each input row then gets its own zero point, which keeps one-signed rows (a ReLU's or
GELU's output) at full resolution. CONV_2D has no such option: LiteRT's hybrid conv quantizes
each image asymmetrically when its weights are per channel, symmetrically when they have one
scale, and the depthwise kernel always asymmetrically (``runtime/qkernels/hybrid_conv.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import QuantirError
from ..ir import Function, Module, Operation, Value
from ..ir.builder import OpBuilder, function_like
from ..ir.dialects import arith, nn, quant
from ..ir.dialects.hybrid import HYBRID_BATCH_MATMUL, HYBRID_CONV, HYBRID_EMBEDDING_LOOKUP, HYBRID_FULLY_CONNECTED
from ..ir.mapping import IRMapping
from ..types import FloatType, IntegerType, TensorType, UniformQuantizedPerAxisType
from .dynamic import DynamicConfig, _site, quantize_weight
from .weight_only import MIN_ELEMENTS, FloatWeight, WeightOnlyConfig, _constant, _float_weight, quantize_array
from .weight_only.rewrite import _constant_bytes
from .weight_only.sites import candidate

__all__ = ["HybridConfig", "HybridResult", "HybridLayer", "HybridError", "quantize_hybrid", "OPS"]

OPS = ("matmul", "gemm", "conv", "gather")
_F32 = FloatType("f32")
_RTN8 = WeightOnlyConfig(bits=8, rounding="rtn")


class HybridError(QuantirError):
    """A dynamic-range configuration or model that cannot be quantized; the message says why."""


@dataclass(frozen=True)
class HybridConfig:
    """``ops``: which weights (``"matmul"``, ``"gemm"``, ``"conv"``, ``"gather"``). ``min_elements``:
    smaller weights stay float (LiteRT's converter: 1024). ``asymmetric_quantize_inputs``: the
    FULLY_CONNECTED option (LiteRT's converter writes True). ``exclude``: node labels kept float."""

    ops: tuple[str, ...] = OPS
    min_elements: int = MIN_ELEMENTS
    asymmetric_quantize_inputs: bool = True
    exclude: tuple[str, ...] = ()

    def __post_init__(self):
        unknown = [o for o in self.ops if o not in OPS]
        if unknown or not self.ops:
            raise HybridError(f"unknown dynamic-range ops {unknown or '(none given)'}: choose from {', '.join(OPS)}")
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        if isinstance(self.min_elements, bool) or not isinstance(self.min_elements, int) or self.min_elements < 0:
            raise HybridError(f"min_elements must be a non-negative integer, found {self.min_elements!r}")


@dataclass
class HybridLayer:
    label: str
    op: str                     # the hybrid op it became
    shape: tuple[int, ...]      # the weight in the IR layout ([C_out, K], OIHW, [rows, D])
    sqnr_db: float
    float_bytes: int
    quantized_bytes: int        # int8 values + one f32 scale per channel

    def as_dict(self) -> dict:
        return {"label": self.label, "op": self.op, "shape": list(self.shape), "sqnr_db": round(self.sqnr_db, 2),
                "float_bytes": self.float_bytes, "quantized_bytes": self.quantized_bytes}


@dataclass
class HybridResult:
    """The hybrid module, its quantized layers, the weights left float (with reasons) and the
    constants' bytes before and after."""

    module: Module
    config: HybridConfig
    layers: list[HybridLayer] = field(default_factory=list)
    floats: list[FloatWeight] = field(default_factory=list)
    bytes_before: int = 0
    bytes_after: int = 0
    _writer: Any = None

    def summary_dict(self) -> dict:
        return {"mode": "dynamic-range (LiteRT hybrid)", "weights": "int8 symmetric per channel [-127, 127]",
                "activations": "float32, quantized per row/image inside each kernel (asymmetric_quantize_inputs="
                               f"{self.config.asymmetric_quantize_inputs})",
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                "layers": [x.as_dict() for x in self.layers], "float": [f.as_dict() for f in self.floats]}

    def summary(self) -> str:
        ratio = self.bytes_after / self.bytes_before if self.bytes_before else 1.0
        lines = [f"dynamic-range quantization (LiteRT hybrid ops): {len(self.layers)} weights int8 per channel, "
                 f"{len(self.floats)} weights float; constants {self.bytes_before} -> {self.bytes_after} bytes "
                 f"({ratio:.3f}x)"]
        for x in self.layers:
            lines.append(f"  {x.label:<28} {x.op:<28} {'x'.join(map(str, x.shape)):>12}  SQNR {x.sqnr_db:6.1f} dB")
        for f in self.floats:
            lines.append(f"  {f.op:<28} float: {f.reason}")
        return "\n".join(lines)

    def save(self, path, **options) -> Any:
        if self._writer is None:
            raise HybridError("this result has no writer: save the module with backends.tflite.save_tflite")
        return self._writer(self, path, **options)


# -- which ops ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Plan:
    op: Operation
    kind: str                          # "matmul", "gemm", "batch_matmul", "conv", "gather"
    weight: np.ndarray                 # float, in the hybrid op's layout
    bias: np.ndarray | None = None     # f32 [C_out]
    fused: tuple[Operation, ...] = ()  # the bias Add / Relu absorbed, in order
    bias_from: tuple[Operation, int] | None = None   # (add, operand) of a fused bias constant


def _only_user(v: Value) -> Operation | None:
    users = {u for u, _ in v.uses}
    return next(iter(users)) if len(users) == 1 and len(v.uses) == 1 else None


def _vector_bias(c: np.ndarray | None, n: int) -> np.ndarray | None:
    """A constant that is one value per output channel, broadcast along the last axis, as f32 [n]."""
    if c is None or c.size not in (1, n) or (c.ndim and c.shape[-1] not in (1, n)):
        return None
    return np.ascontiguousarray(np.broadcast_to(np.asarray(c, np.float32).reshape(-1), (n,)))


def _fuse_tail(start: Operation, n: int, allow_bias: bool) -> tuple[tuple[Operation, ...], np.ndarray | None,
                                                                    tuple[Operation, int] | None]:
    """The bias Add (constant [n]) and the Relu after ``start`` that the hybrid op absorbs."""
    fused, bias, src = [], None, None
    last = start
    user = _only_user(last.results[0])
    if allow_bias and user is not None and user.opdef is nn.ADD:
        i = 0 if user.operands[1] is last.results[0] else 1
        b = _vector_bias(_constant(user.operands[i]), n)
        if b is not None and user.results[0].type == last.results[0].type:
            fused.append(user)
            bias, src, last = b, (user, i), user
            user = _only_user(last.results[0])
    if user is not None and _clamp(user) is not None:
        fused.append(user)
    return tuple(fused), bias, src


def _clamp(op: Operation) -> str | None:
    """The fused activation a Relu or a Clip is (Clip to [0, 6]: RELU6, to [-1, 1]: RELU_N1_TO_1), or None."""
    if op.opdef is nn.RELU:
        return "RELU"
    if op.opdef is nn.CLIP and len(op.operands) == 1:
        bounds = (float(op.attr("min")), float(op.attr("max")))
        return {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}.get(bounds)
    return None


def _refusal(op: Operation, kind: str, size: int, config: HybridConfig) -> str | None:
    if kind not in config.ops:
        return f"{kind} weights not chosen (ops: {', '.join(config.ops)})"
    if size < config.min_elements:
        return f"{size} elements, under min_elements {config.min_elements} (LiteRT's converter keeps them float)"
    if (op.label or "") in config.exclude:
        return "excluded"
    return None


def _plan_batched(op: Operation, w: np.ndarray, config: HybridConfig) -> tuple[_Plan | None, str | None]:
    """A MatMul whose constant B has batch axes: LiteRT's BATCH_MATMUL with a constant int8 rhs."""
    why = _refusal(op, "matmul", w.size, config)
    if why is not None:
        return None, why
    if w.ndim > 5 or op.operands[0].type.rank is None or not 2 <= op.operands[0].type.rank <= 5:
        return None, f"a MatMul of rank {max(w.ndim, op.operands[0].type.rank or 0)} (LiteRT's BATCH_MATMUL: 2 to 5)"
    if config.asymmetric_quantize_inputs and w.ndim == 5 and w.shape[0] > 1:
        return None, "asymmetric inputs with a 5-D B whose first axis is > 1 (LiteRT reads row sums it never computed)"
    return _Plan(op, "batch_matmul", np.ascontiguousarray(w, np.float32)), None


def _plan_matmul(op: Operation, config: HybridConfig) -> tuple[_Plan | None, str | None]:
    w, why = _site(op, DynamicConfig(ops=("matmul", "gemm"), min_elements=config.min_elements,
                                     exclude=config.exclude))
    b = _constant(op.operands[1]) if op.opdef is nn.MATMUL and len(op.operands) > 1 else None
    if w is None and b is not None and b.ndim > 2:
        return _plan_batched(op, b, config)
    if w is None:
        return None, why
    kind = "gemm" if op.opdef is nn.GEMM else "matmul"
    if kind not in config.ops:
        return None, f"{kind} weights not chosen (ops: {', '.join(config.ops)})"
    x = op.operands[0].type
    if not x.is_ranked or x.rank < 2:
        return None, "an input of rank < 2 (FULLY_CONNECTED reads rows)"
    n = w.shape[1]
    bias = None
    if kind == "gemm" and len(op.operands) > 2 and op.operands[2] is not None:
        beta = op.attr("beta")
        bias = _vector_bias(_constant(op.operands[2]), n)
        if bias is None:
            return None, "a Gemm whose C is not a constant with one value per output channel"
        bias = (bias * np.float32(1.0 if beta is None else beta)).astype(np.float32)
    fused, add_bias, src = _fuse_tail(op, n, allow_bias=bias is None)
    return _Plan(op, kind, np.ascontiguousarray(w.T), add_bias if bias is None else bias, fused, src), None


def _plan_conv(op: Operation, config: HybridConfig) -> tuple[_Plan | None, str | None]:
    w = _constant(op.operands[1])
    why = _refusal(op, "conv", w.size, config)
    if why is not None:
        return None, why
    if w.ndim != 4:
        return None, f"a {w.ndim - 2}-D convolution (LiteRT's hybrid CONV_2D is 2-D)"
    if (op.attr("auto_pad") or "NOTSET") not in ("NOTSET", "VALID", "SAME_UPPER"):
        return None, f"auto_pad {op.attr('auto_pad')} (TFLite's SAME is SAME_UPPER)"
    bias = None
    if len(op.operands) > 2 and op.operands[2] is not None:
        bias = _constant(op.operands[2])
        if bias is None:
            return None, "a computed bias (LiteRT's hybrid conv takes a constant float32 bias)"
        bias = np.asarray(bias, np.float32).reshape(-1)
    fused, _, _ = _fuse_tail(op, w.shape[0], allow_bias=False)
    return _Plan(op, "conv", w, bias, fused), None


def _plan(op: Operation, config: HybridConfig) -> tuple[_Plan | None, str | None]:
    """What ``op`` becomes, or why its constant weight stays float, or (None, None) for other ops."""
    if op.opdef in (nn.MATMUL, nn.GEMM):
        return _plan_matmul(op, config)
    site, why = candidate(op)
    if site is None:
        return None, why
    if site.kind == "conv":
        return _plan_conv(op, config)
    if site.kind == "gather":
        w = _constant(op.operands[0])
        why = _refusal(op, "gather", w.size, config)
        return (None, why) if why else (_Plan(op, "gather", w), None)
    return None, None


# -- the rewrite -------------------------------------------------------------------------------------

def _weight_value(b: OpBuilder, plan: _Plan, name: str) -> tuple[Value, int, float]:
    """The int8 weight (constant + quant.scast to its per-axis type), its stored bytes, its SQNR."""
    axis = 0
    if plan.kind in ("matmul", "gemm"):
        q_kn, scales, sqnr = quantize_weight(plan.weight.T)          # [K, N], one scale per N
        q = np.ascontiguousarray(q_kn.T)
    else:   # conv: per output channel (axis 0); a table: per row (axis 0); a batched B [..., K, N]: per N
        if plan.kind == "batch_matmul":
            axis = plan.weight.ndim - 1
        qz = quantize_array(plan.weight, channel_axis=axis, block_axis=1 if axis == 0 else axis - 1, config=_RTN8)
        q, scales, sqnr = qz.q.astype(np.int8), np.asarray(qz.scales, np.float32), qz.sqnr_db
    qtype = UniformQuantizedPerAxisType(storage_type=IntegerType(8), expressed_type=_F32,
                                        scales=scales.astype(np.float64).tolist(), zero_points=[0] * scales.size,
                                        quantized_dimension=axis, storage_min=-127, storage_max=127)
    c = b.constant(q, IntegerType(8), name=f"{name}_quantized")
    s = b.insert(quant.SCAST.build([c], [TensorType(tuple(q.shape), qtype)], loc=plan.op.loc)).result
    s.name_hint = f"{name}_int8"
    return s, q.size + 4 * scales.size, sqnr


def _emit(b: OpBuilder, plan: _Plan, m: IRMapping, config: HybridConfig) -> tuple[Value, HybridLayer]:
    op = plan.op
    last = plan.fused[-1] if plan.fused else op
    wname = op.operands[0 if plan.kind == "gather" else 1].name_hint or op.label or "weight"
    w, stored, sqnr = _weight_value(b, plan, wname)
    act = (_clamp(plan.fused[-1]) if plan.fused else None) or "NONE"
    bias = [] if plan.bias is None else [b.constant(plan.bias, name=f"{wname}_bias")]
    if plan.kind == "gather":
        new = HYBRID_EMBEDDING_LOOKUP.build([m.lookup(op.operands[1]), w])
    elif plan.kind == "batch_matmul":
        new = HYBRID_BATCH_MATMUL.build([m.lookup(op.operands[0]), w],
                                        asymmetric_quantize_inputs=config.asymmetric_quantize_inputs)
    elif plan.kind == "conv":
        attrs = {k: op.attr(k) for k in ("strides", "pads", "dilations", "group")}
        auto_pad = op.attr("auto_pad") or "NOTSET"
        if auto_pad == "VALID":
            attrs["pads"] = (0, 0, 0, 0)
        elif auto_pad == "SAME_UPPER":
            attrs["auto_pad"], attrs["pads"] = auto_pad, None
        new = HYBRID_CONV.build([m.lookup(op.operands[0]), w, *bias], activation=act, **attrs)
    else:
        x = m.lookup(op.operands[0])
        new = HYBRID_FULLY_CONNECTED.build([x, w, *bias], activation=act, keep_num_dims=x.type.rank > 2,
                                           asymmetric_quantize_inputs=config.asymmetric_quantize_inputs)
    b.insert(new, op)
    y = new.results[0]
    y.name_hint = last.results[0].name_hint
    layer = HybridLayer(op.label or op.results[0].name_hint or "?", new.opdef.name, tuple(plan.weight.shape), sqnr,
                        int(plan.weight.nbytes), int(stored))
    return y, layer


def quantize_hybrid(module: Module | Function, config: HybridConfig | None = None) -> HybridResult:
    """The dynamic-range twin of the float ``module`` (left as it was); see the module notes."""
    config = config or HybridConfig()
    fn = module.main if isinstance(module, Module) else module
    new = function_like(fn)
    b = OpBuilder.at_end(new)
    m: IRMapping[Value] = IRMapping()
    m.map_all(fn.arguments, new.arguments)
    result = HybridResult(Module([new], name=module.name if isinstance(module, Module) else None), config)
    plans: dict[Operation, _Plan] = {}
    for op in fn.ops:
        plan, why = _plan(op, config)
        if plan is not None:
            plans[op] = plan
        elif why is not None:
            v = op.operands[0 if op.opdef is nn.GATHER else 1]
            kind = {nn.GEMM: "gemm", nn.CONV: "conv", nn.GATHER: "gather"}.get(op.opdef, "matmul")
            result.floats.append(_float_weight(op, v, kind, why))
    absorbed = {f: p for p in plans.values() for f in p.fused}
    consumed = {(p.op, 0 if p.kind == "gather" else 1) for p in plans.values()}
    consumed |= {(p.op, 2) for p in plans.values() if p.kind in ("gemm", "conv") and p.bias is not None}
    consumed |= {p.bias_from for p in plans.values() if p.bias_from is not None}
    for op in fn.ops:
        if op.opdef is arith.CONSTANT and op.results[0].uses and all(u in consumed for u in op.results[0].uses):
            continue   # a float weight or bias now held by a hybrid op
        if op in absorbed:
            continue   # its result was mapped when its hybrid op was emitted
        plan = plans.get(op)
        if plan is None:
            b.clone(op, m)
            continue
        y, layer = _emit(b, plan, m, config)
        for f in (op, *plan.fused):
            m.map(f.results[0], y)
        result.layers.append(layer)
    new.update_type()
    result.bytes_before = _constant_bytes(fn)
    result.bytes_after = result.bytes_before - sum(x.float_bytes - x.quantized_bytes for x in result.layers)
    return result
