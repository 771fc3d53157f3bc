"""Dynamic quantization: int8 weights per output channel, activations quantized at run time.

No calibration data. Each chosen MatMul/Gemm with a constant 2-D weight becomes, in the IR, the ONNX
ops that compute it on integers::

    x ──nn.dynamic_quantize_linear──> (xq: ui8, x_scale, x_zp)     per tensor, range of x incl. 0
    nn.matmul_integer(xq, Wq: i8 [K, N], x_zp, 0) ──nn.cast f32──> acc
    y = acc · (x_scale · w_scale[N])                                 [+ Gemm's C]

``Wq`` is symmetric per output channel in LiteRT's narrow range [-127, 127] (round to nearest,
``w_scale = max|W[:, n]| / 127``); the activation is ONNX's DynamicQuantizeLinear: uint8, one scale
and zero point per call from the tensor's [min, max]. The module holds only standard ONNX ops, so
the interpreter runs it as it is (its kernels for DynamicQuantizeLinear and MatMulInteger follow
ONNX's reference) and the ONNX export is the module op for op; importing the written file with
``quantir.load`` gives this module back.

Which ONNX form: measured, all-MiniLM-L6-v2 in ONNX Runtime 1.32, 1 thread, median ms at (batch x
sequence) 1x64 / 1x128 / 32x64 / 32x128 (fp32: 14.6 / 26.6 / 413 / 916):

(a) the chain above: 4.7 / 8.7 / 131 / 385. ONNX Runtime's optimizer fuses DynamicQuantizeLinear ->
    MatMulInteger -> Cast -> Mul(x_scale · w_scale) into its MatMulIntegerToFloat and
    DynamicQuantizeMatMul kernels with the per-channel scale vector, and the Q, K and V MatMuls share
    one DynamicQuantizeLinear of their common input;
(b) com.microsoft.DynamicQuantizeMatMul written directly (it accepts per-column B scales): the
    same cosine, 5.0 / 9.1 / 147 / 409 ms: each node quantizes its input again, so Q, K and V pay
    three times; and it is a contrib op that no other runtime, nor quantir's importer, reads;
(c) QDQ with dynamic scales (DynamicQuantizeLinear -> DequantizeLinear -> MatMul, the weight a
    per-axis DequantizeLinear): fused into the same kernels, but the bias Adds stay unfused, 156 vs
    138 ms at 32x64 (another run, (a) and (c) side by side);
ONNX Runtime's own ``quantize_dynamic`` (QInt8 weights, per tensor / per channel):
    6.4 / 11.9 / 193 / 472 and 6.7 / 12.1 / 193 / 469 ms.

So (a), standard ONNX, is the only form written.

Accuracy. Mean sentence-embedding cosine vs fp32 over the 713 evaluation sentences: (a) 0.9934
(min 0.982); ONNX Runtime's ``quantize_dynamic`` 0.9618 per tensor, 0.9932 per channel. Per-tensor
uint8 activations over the whole batch are what limits it, not the weights (33-43 dB SQNR): leaving
one layer float at a time, the FFN output MatMuls (their input is GELU's, with a few very large
channels) cost most — layer 0's 0.0012, layer 2's 0.0007, layer 1's 0.0005 on the calibration
sentences (the same order on the evaluation ones, where the FFN input MatMuls cost about 0.0005 each
and the attention ones under 0.0003). ``exclude`` keeps named MatMuls (ONNX node names) float:
MiniLM with ``node_MatMul_56`` and ``node_MatMul_140`` float reaches 0.9956 at 5.7 / 10.3 / 157 /
413 ms (still under ONNX Runtime's dynamic model and fp32); all six FFN outputs float, 0.9966 at
7.4 / 13.4 / 209 / 505 ms (slower than ONNX Runtime's own). The choice is per model; the default
quantizes every MatMul.

What stays float: MatMuls whose B is not a constant 2-D float, weights under ``min_elements``
elements (LiteRT's converter keeps them float), a Gemm with transA or alpha != 1, excluded nodes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import QuantirError
from ..ir import Function, Module, Operation, Value
from ..ir.builder import OpBuilder, function_like
from ..ir.dialects import arith, nn
from ..ir.mapping import IRMapping
from ..types import FloatType, IntegerType
from .weight_only import MIN_ELEMENTS, FloatWeight, WeightOnlyConfig, _constant, _float_weight, quantize_array
from .weight_only.sites import candidate

__all__ = ["DynamicConfig", "DynamicResult", "DynamicError", "DynamicLayer", "quantize_dynamic"]

OPS = ("matmul", "gemm")
_F32 = FloatType("f32")


class DynamicError(QuantirError):
    """A dynamic-quantization configuration or model that cannot be quantized; the message says why."""


@dataclass(frozen=True)
class DynamicConfig:
    """``ops``: which weights (``"matmul"``, ``"gemm"``). ``min_elements``: smaller weights stay
    float. ``exclude``: node labels (ONNX node names) kept float."""

    ops: tuple[str, ...] = OPS
    min_elements: int = MIN_ELEMENTS
    exclude: tuple[str, ...] = ()

    def __post_init__(self):
        unknown = [o for o in self.ops if o not in OPS]
        if unknown or not self.ops:
            raise DynamicError(f"unknown dynamic ops {unknown or '(none given)'}: choose from {', '.join(OPS)}")
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        if isinstance(self.min_elements, bool) or not isinstance(self.min_elements, int) or self.min_elements < 0:
            raise DynamicError(f"min_elements must be a non-negative integer, found {self.min_elements!r}")


@dataclass
class DynamicLayer:
    label: str
    kind: str
    shape: tuple[int, ...]      # the weight as [K, N]
    sqnr_db: float

    def as_dict(self) -> dict:
        return {"label": self.label, "kind": self.kind, "shape": list(self.shape), "sqnr_db": round(self.sqnr_db, 2)}


@dataclass
class DynamicResult:
    """The dynamic module, the quantized layers and the weights left float (with reasons)."""

    module: Module
    config: DynamicConfig
    layers: list[DynamicLayer] = field(default_factory=list)
    floats: list[FloatWeight] = field(default_factory=list)
    _writer: Any = None

    def summary_dict(self) -> dict:
        return {"mode": "dynamic", "weights": "int8 symmetric per channel [-127, 127]",
                "activations": "uint8 per tensor at run time (DynamicQuantizeLinear)",
                "layers": [x.as_dict() for x in self.layers], "float": [f.as_dict() for f in self.floats]}

    def summary(self) -> str:
        lines = [f"dynamic quantization: {len(self.layers)} weights int8 per channel, activations uint8 per "
                 f"tensor at run time; {len(self.floats)} weights float"]
        for x in self.layers:
            lines.append(f"  {x.label:<28} {x.kind:<7} {'x'.join(map(str, x.shape)):>10}  SQNR {x.sqnr_db:6.1f} dB")
        for f in self.floats:
            lines.append(f"  {f.op:<28} float: {f.reason}")
        return "\n".join(lines)

    def save(self, path, **options) -> Any:
        if self._writer is None:
            raise DynamicError("this result has no writer: make it with quantir.quantize_dynamic")
        return self._writer(self, path, **options)


# -- the rewrite -----------------------------------------------------------------------------------

def _site(op: Operation, config: DynamicConfig) -> tuple[np.ndarray | None, str | None]:
    """(the weight as [K, N], None), (None, why it stays float), or (None, None) for other ops. The
    constant weights are weight-only quantization's (``weight_only.candidate``); a Gemm must also be
    a plain product of its input (the rewrite keeps no transA or alpha)."""
    site, why = candidate(op)
    if site is None or site.kind not in OPS:
        return None, why if op.opdef is nn.MATMUL else None
    w = _constant(op.operands[1])
    if site.kind == "gemm":
        if op.attr("trans_a") or float(op.attr("alpha") if op.attr("alpha") is not None else 1.0) != 1.0:
            return None, "a Gemm with transA or alpha != 1"
        beta = op.attr("beta")
        if len(op.operands) > 2 and beta is not None and float(beta) != 1.0 and _constant(op.operands[2]) is None:
            return None, "a Gemm with beta != 1 and a computed C"
        w = w.T if op.attr("trans_b") else w
    if site.kind not in config.ops:
        return None, f"{site.kind} weights not chosen (ops: {', '.join(config.ops)})"
    if w.size < config.min_elements:
        return None, f"{w.size} elements, under min_elements {config.min_elements}"
    if (op.label or "") in config.exclude:
        return None, "excluded"
    return np.ascontiguousarray(w, np.float32), None


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(int8 [K, N] in [-127, 127], f32 scale per column N, SQNR in dB): round to nearest."""
    qz = quantize_array(w, channel_axis=1, block_axis=0, config=WeightOnlyConfig(bits=8, rounding="rtn"))
    return qz.q.astype(np.int8), np.asarray(qz.scales, np.float32), qz.sqnr_db


def _quantize_input(b: OpBuilder, op: Operation, x: Value, seen: dict) -> tuple[Value, Value, Value]:
    """One DynamicQuantizeLinear per activation, shared by the MatMuls that read it (Q, K, V)."""
    if x not in seen:
        dq = b.insert(nn.DYNAMIC_QUANTIZE_LINEAR.build([x]), op)
        for v, suffix in zip(dq.results, ("quantized", "scale", "zero_point")):
            v.name_hint = f"{x.name_hint or op.label or 'input'}_{suffix}"
        seen[x] = tuple(dq.results)
    return seen[x]


def _emit(b: OpBuilder, op: Operation, x: tuple[Value, Value, Value], q: np.ndarray, scale: np.ndarray,
          bias: Value | None) -> Value:
    name = op.results[0].name_hint or op.label or "matmul"
    xq, xs, xz = x
    wq = b.constant(q, IntegerType(8), name=f"{name}_weight_quantized")
    wz = b.constant(np.zeros((), np.int8), IntegerType(8), name=f"{name}_weight_zero_point")
    acc = b.insert(nn.MATMUL_INTEGER.build([xq, wq, xz, wz]), op).result
    acc.name_hint = f"{name}_accumulator"
    accf = b.insert(nn.CAST.build([acc], to=_F32), op).result
    ws = b.constant(scale, name=f"{name}_weight_scale")
    s = b.insert(nn.MUL.build([xs, ws]), op).result
    s.name_hint = f"{name}_scale"
    y = b.insert(nn.MUL.build([accf, s]), op).result
    if bias is not None:
        y.name_hint = f"{name}_product"
        y = b.insert(nn.ADD.build([y, bias]), op).result
    y.name_hint = op.results[0].name_hint
    return y


def _gemm_bias(b: OpBuilder, op: Operation, m: IRMapping) -> Value | None:
    if len(op.operands) < 3 or op.operands[2] is None:
        return None
    beta = op.attr("beta")
    beta = 1.0 if beta is None else float(beta)
    c = _constant(op.operands[2])
    if beta != 1.0 and c is not None:
        return b.constant(np.asarray(c * np.float32(beta), np.float32), name=f"{op.label or 'gemm'}_bias")
    return m.lookup(op.operands[2])


def quantize_dynamic(module: Module | Function, config: DynamicConfig | None = None) -> DynamicResult:
    """The dynamic twin of ``module`` (see the module notes); ``module`` is left as it was."""
    config = config or DynamicConfig()
    fn = module.main if isinstance(module, Module) else module
    new = function_like(fn)
    b = OpBuilder.at_end(new)
    m: IRMapping[Value] = IRMapping()
    m.map_all(fn.arguments, new.arguments)
    result = DynamicResult(Module([new], name=module.name if isinstance(module, Module) else None), config)
    sites = {op: _site(op, config) for op in fn.ops}
    seen: dict = {}
    quantized = {op for op, (w, _) in sites.items() if w is not None}
    for op in fn.ops:
        if op.opdef is arith.CONSTANT and op.results[0].uses and all(
                u in quantized and i == 1 for u, i in op.results[0].uses):
            continue   # a float weight now stored as int8: not written
        w, why = sites[op]
        if w is None:
            if why is not None:
                result.floats.append(_float_weight(op, op.operands[1], op.opdef.name.split(".")[-1], why))
            b.clone(op, m)
            continue
        q, scale, sqnr = quantize_weight(w)
        bias = _gemm_bias(b, op, m) if op.opdef is nn.GEMM else None
        x = _quantize_input(b, op, m.lookup(op.operands[0]), seen)
        m.map(op.results[0], _emit(b, op, x, q, scale, bias))
        result.layers.append(DynamicLayer(op.label or op.results[0].name_hint or "?",
                                          "gemm" if op.opdef is nn.GEMM else "matmul", tuple(w.shape), sqnr))
    new.update_type()
    return result
