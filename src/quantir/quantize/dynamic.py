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

Row scales (``DynamicConfig.activations``). One scale per tensor is stretched by a few rows: in a
transformer's FFN the GELU output of the [CLS]/[SEP] tokens is far larger than the other rows'.
With row scales the input is first divided by its rows' ``r = max |x|`` over the last axis (kept
[.., rows, 1]; ReduceMax, ReduceMin, Neg, Max with the smallest normal float, Div), so that every row
of ``x / r`` spans at most [-1, 1]; the DynamicQuantizeLinear above then gives each row as many
steps as its own symmetric int8 scale would (LiteRT's per-row input scale), and the product is
multiplied back by ``r``: ``y = acc · (x_scale · w_scale[N]) · r``. ``"auto"`` (the default) does
this only where no normalization bounds the rows (``row_bounded``: not a LayerNormalization's output,
nor a product of two activations such as attention's softmax · V); ``"per_row"`` everywhere;
``"per_tensor"`` nowhere. Gather tables (``ops`` "gather") are stored int8 with a scale per row;
Gather reads the int8 rows and their scales, Cast and Mul dequantize only those rows.

Which ONNX form: measured, all-MiniLM-L6-v2 in ONNX Runtime 1.32, 1 thread, median ms at (batch x
sequence) 1x64 / 1x128 / 32x64 / 32x128, the models round-robin in one process (2 cores shared with
other jobs: the absolute numbers move from run to run, the order at each shape is what to read).
Per tensor, earlier runs (fp32: 14.6 / 26.6 / 413 / 916):

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

Per row, every input, in each form; two runs. Run 1 (fp32 15.3 / 28.0 / 447 / 980, ONNX Runtime's
quantize_dynamic 6.6 / 12.5 / 212 / 512, per tensor (a) 5.1 / 9.2 / 146 / 435):

(d) row-symmetric int8 (Div by max|x|/127, QuantizeLinear int8 zero point 0): 49.6 / 94.1 / 1532 /
    3117 — ONNX Runtime's int8 x int8 MatMulInteger has no fast kernel on this x86;
(e) the same as uint8 with zero point 128 (its u8s8 kernels): 6.1 / 11.2 / 243 / 612.

Run 2 (fp32 15.3 / 28.7 / 481 / 1673, ONNX Runtime 6.4 / 13.2 / 222 / 805, per tensor 4.8 / 9.8 /
166 / 705): (e) 5.8 / 11.7 / 266 / 964;
(f) (e) with an opset-21 blocked QuantizeLinear (block = K, the scale [.., rows, 1]): 5.5 / 11.1 /
    273 / 903 — (e) and (f) leave MatMulInteger unfused: an int32 accumulator, Cast and two Muls;
(g) the rows divided by r before DynamicQuantizeLinear (the form written): 5.9 / 11.6 / 284 / 873;
    the fused kernels stay, the cost is the Div, the two row reductions and the Mul by r (which
    keeps ONNX Runtime from fusing the bias Add). The cosine of (d)-(g): 0.9975 to 0.9977.

(g) is the row form written: the fastest of (e)-(g) at 32x128 and the one that keeps the fused
kernels, but with every input row-scaled it loses to ONNX Runtime's model at batch 32. Only where it
matters, a later run (fp32 15.3 / 29.2 / 458 / 981, ONNX Runtime 6.5 / 13.5 / 209 / 490, per
tensor 4.9 / 10.0 / 144 / 397): the six GELU outputs (``"auto"``) 5.2 / 10.5 / 162 / 432; also the
LayerNorm outputs 5.8 / 11.7 / 209 / 517; every input 5.9 / 12.0 / 208 / 517. The defaults as
written (``"auto"``, Gather tables int8), 20 rounds at batch 32: 5.3 / 10.8 / 233 / 397 against
ONNX Runtime's 6.3 / 14.2 / 291 / 464 and fp32 17.2 / 28.0 / 610 / 921 (per tensor 4.7 / 9.9 /
224 / 351; ``"auto"`` with float tables 5.2 / 10.6 / 222 / 380). ``bench/transformers.py
--dynamic-only --rounds 60`` on a quiet machine: ``"auto"`` 5.1 / 9.8 / 140 / 368, ONNX Runtime 6.1 /
12.2 / 179 / 439, fp32 14.6 / 27.1 / 411 / 884 (``"per_row"`` 5.8 / 10.9 / 170 / 436, per tensor 4.6
/ 9.2 / 123 / 334); under heavy load another run had ``"auto"`` level with ONNX Runtime at 32x128
(591 vs 585 ms) and ahead at the other three shapes.

Conv (``ops`` "conv", per-tensor activations, ConvInteger): EfficientNet-Lite0 keeps top-1 on 7/7
real photos (ONNX Runtime's quantize_dynamic of the Convs: 4/7), but ONNX Runtime runs ConvInteger
about 10x slower than its float Conv — 90 vs 9.6 ms at batch 1, 878 vs 81 at batch 8 (its own
dynamic model 112 / 917) — so Conv stays float by default, with that reason in the summary.

Accuracy. Mean sentence-embedding cosine vs fp32 over the 713 evaluation sentences (min in
brackets): per tensor 0.9934 (0.982); ``"auto"`` 0.9963 (0.989); ``"per_row"`` 0.9977 (0.990);
row scales on the LayerNorm outputs only 0.9949, on the attention products only 0.9936 (so those
stay per tensor); ``"auto"`` with the two embedding tables int8 (the default ops) 0.9963 (0.988),
file 22.9 MB (ONNX Runtime's 22.8 MB; the MatMul weights alone, 58.5 MB; fp32 90.3 MB). ONNX
Runtime's ``quantize_dynamic`` 0.9618 per tensor, 0.9932 per channel. Per tensor, leaving one layer
float at a time, the FFN output MatMuls (GELU's input) cost most — layer 0's 0.0012, layer 2's
0.0007, layer 1's 0.0005 on the calibration sentences; ``exclude`` keeps named MatMuls (ONNX node
names) float: per tensor with ``node_MatMul_56`` and ``node_MatMul_140`` float, 0.9956. Hence the
default ``"auto"``: >= 0.995, under ONNX Runtime's dynamic model and fp32 at the four shapes.

Interpreter vs ONNX Runtime: equal up to float rounding, until rounding moves a DynamicQuantizeLinear
input (per tensor: the tensor's min or max; per row: any row's max |x|) across a step, which
re-rounds everything it scales; the two then differ at the level of the quantization noise and
are equally accurate (tests/quantize/test_dynamic.py).

What stays float: MatMuls whose B is not a constant 2-D float, weights under ``min_elements``
elements (LiteRT's converter keeps them float), a Gemm with transA or alpha != 1, excluded nodes,
Conv weights unless ``ops`` names "conv".
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

OPS = ("matmul", "gemm", "gather", "conv")
DEFAULT_OPS = ("matmul", "gemm", "gather")   # conv: see the module notes (ConvInteger measured slower)
ACTIVATIONS = ("auto", "per_row", "per_tensor")
_F32 = FloatType("f32")
_CONV_FLOAT = "; Conv stays float by default: ONNX Runtime's ConvInteger measured slower than its float Conv"
_TINY = np.float32(np.finfo(np.float32).tiny)   # an all-zero row divides by this, not by 0


class DynamicError(QuantirError):
    """A dynamic-quantization configuration or model that cannot be quantized; the message says why."""


@dataclass(frozen=True)
class DynamicConfig:
    """``ops``: which weights (``"matmul"``, ``"gemm"``, ``"gather"``: embedding tables stored int8
    per row, dequantized after the Gather; ``"conv"``, not by default: ConvInteger, activations per
    tensor). ``min_elements``: smaller weights stay
    float. ``exclude``: node labels (ONNX node names) kept float. ``activations``: one run-time
    scale per tensor (``"per_tensor"``), per row (last axis) for every input (``"per_row"``), or per row
    for the inputs whose rows no normalization bounds (``"auto"``, see ``row_bounded``)."""

    ops: tuple[str, ...] = DEFAULT_OPS
    min_elements: int = MIN_ELEMENTS
    exclude: tuple[str, ...] = ()
    activations: str = "auto"

    def __post_init__(self):
        unknown = [o for o in self.ops if o not in OPS]
        if unknown or not self.ops:
            raise DynamicError(f"unknown dynamic ops {unknown or '(none given)'}: choose from {', '.join(OPS)}")
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        if isinstance(self.min_elements, bool) or not isinstance(self.min_elements, int) or self.min_elements < 0:
            raise DynamicError(f"min_elements must be a non-negative integer, found {self.min_elements!r}")
        if self.activations not in ACTIVATIONS:
            raise DynamicError(f"unknown activations {self.activations!r}: choose from {', '.join(ACTIVATIONS)}")


@dataclass
class DynamicLayer:
    label: str
    kind: str
    shape: tuple[int, ...]      # the weight as [K, N]
    sqnr_db: float

    def as_dict(self) -> dict:
        return {"label": self.label, "kind": self.kind, "shape": list(self.shape), "sqnr_db": round(self.sqnr_db, 2)}


_SCHEMES = {"per_tensor": "uint8 per tensor at run time (DynamicQuantizeLinear)",
            "per_row": "per row at run time (rows scaled by max |x|, then DynamicQuantizeLinear)",
            "auto": "per row at run time where no normalization bounds the rows (rows scaled by max |x|, then "
                    "DynamicQuantizeLinear), uint8 per tensor elsewhere"}


@dataclass
class DynamicResult:
    """The dynamic module, the quantized layers, the weights left float (with reasons), the inputs
    quantized per row, and the constants' bytes before and after."""

    module: Module
    config: DynamicConfig
    layers: list[DynamicLayer] = field(default_factory=list)
    floats: list[FloatWeight] = field(default_factory=list)
    per_row: list[str] = field(default_factory=list)   # the activations given row scales
    bytes_before: int = 0
    bytes_after: int = 0
    _writer: Any = None

    def summary_dict(self) -> dict:
        return {"mode": "dynamic", "weights": "int8 symmetric per channel [-127, 127]",
                "activations": _SCHEMES[self.config.activations], "per_row_inputs": list(self.per_row),
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                "layers": [x.as_dict() for x in self.layers], "float": [f.as_dict() for f in self.floats]}

    def summary(self) -> str:
        tables = sum(1 for x in self.layers if x.kind == "gather")
        lines = [f"dynamic quantization: {len(self.layers)} weights int8 per channel"
                 + (f" ({tables} Gather tables per row)" if tables else "") + ", activations "
                 f"{_SCHEMES[self.config.activations]}; {len(self.floats)} weights float",
                 f"  constants: {self.bytes_before / 1e6:.2f} MB -> {self.bytes_after / 1e6:.2f} MB"]
        if self.per_row:
            lines.append(f"  per-row inputs: {', '.join(self.per_row)}")
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
    """(the weight as [K, N] or a Gather's table as [rows, D], None), (None, why it stays float), or
    (None, None) for other ops. The constant weights are weight-only quantization's
    (``weight_only.candidate``); a Gemm must also be a plain product of its input (the rewrite keeps
    no transA or alpha)."""
    site, why = candidate(op)
    if site is None or site.kind not in OPS:
        return None, why if op.opdef is nn.MATMUL else None
    w = _constant(op.operands[site.operand])
    if site.kind == "gemm":
        if op.attr("trans_a") or float(op.attr("alpha") if op.attr("alpha") is not None else 1.0) != 1.0:
            return None, "a Gemm with transA or alpha != 1"
        beta = op.attr("beta")
        if len(op.operands) > 2 and beta is not None and float(beta) != 1.0 and _constant(op.operands[2]) is None:
            return None, "a Gemm with beta != 1 and a computed C"
        w = w.T if op.attr("trans_b") else w
    if site.kind not in config.ops:
        return None, f"{site.kind} weights not chosen (ops: {', '.join(config.ops)})" + (
            _CONV_FLOAT if site.kind == "conv" and "conv" not in config.ops else "")
    if w.size < config.min_elements:
        return None, f"{w.size} elements, under min_elements {config.min_elements}"
    if (op.label or "") in config.exclude:
        return None, "excluded"
    return np.ascontiguousarray(w, np.float32), None


def constant_bytes(fn: Function) -> int:
    """Bytes of the arrays held by ``fn``'s constants (the weights a file stores)."""
    return sum(int(np.asarray(op.attributes["value"].array).nbytes) for op in fn.ops if op.opdef is arith.CONSTANT)


def _weight_operand(op: Operation) -> int:
    return 0 if op.opdef is nn.GATHER else 1


def quantize_table(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(int8 [rows, D] in [-127, 127], f32 scale per row as [rows, 1], SQNR in dB): a Gather reads whole
    rows, so each row carries its own scale and is dequantized after the lookup."""
    qz = quantize_array(w, channel_axis=0, block_axis=1, config=WeightOnlyConfig(bits=8, rounding="rtn"))
    return qz.q.astype(np.int8), np.asarray(qz.scales, np.float32).reshape(-1, 1), qz.sqnr_db


def _emit_gather(b: OpBuilder, op: Operation, m: IRMapping, q: np.ndarray, scale: np.ndarray) -> Value:
    """Gather(int8 table, ids) -> Cast f32 -> Mul by Gather(row scales, ids): only the rows read are
    dequantized (a DequantizeLinear of the whole table would run it all at every call)."""
    name = op.results[0].name_hint or op.label or "gather"
    ids, axis = m.lookup(op.operands[1]), op.attr("axis") or 0
    rows = b.insert(nn.GATHER.build([b.constant(q, IntegerType(8), name=f"{name}_table_quantized"), ids],
                                    axis=axis), op).result
    rows.name_hint = f"{name}_rows_quantized"
    rowsf = b.insert(nn.CAST.build([rows], to=_F32), op).result
    scales = b.insert(nn.GATHER.build([b.constant(scale, name=f"{name}_table_scale"), ids], axis=axis), op).result
    scales.name_hint = f"{name}_row_scales"
    y = b.insert(nn.MUL.build([rowsf, scales]), op).result
    y.name_hint = op.results[0].name_hint
    return y


def _emit_conv(b: OpBuilder, op: Operation, m: IRMapping, x: tuple, q: np.ndarray, scale: np.ndarray) -> Value:
    """ConvInteger(xq, Wq [O, I/g, kh, kw], x_zp, 0) -> Cast -> Mul(x_scale · w_scale[1, O, 1, 1]) [+ bias]."""
    name = op.results[0].name_hint or op.label or "conv"
    xq, xs, xz, _ = x
    wq = b.constant(q, IntegerType(8), name=f"{name}_weight_quantized")
    wz = b.constant(np.zeros((), np.int8), IntegerType(8), name=f"{name}_weight_zero_point")
    acc = b.insert(nn.CONV_INTEGER.build([xq, wq, xz, wz], **{k: v for k, v in op.attributes.items()}), op).result
    acc.name_hint = f"{name}_accumulator"
    accf = b.insert(nn.CAST.build([acc], to=_F32), op).result
    ws = b.constant(scale.reshape(1, -1, *([1] * (q.ndim - 2))), name=f"{name}_weight_scale")
    s = b.insert(nn.MUL.build([xs, ws]), op).result
    s.name_hint = f"{name}_scale"
    y = b.insert(nn.MUL.build([accf, s]), op).result
    if len(op.operands) > 2 and op.operands[2] is not None:
        bias = _constant(op.operands[2])
        c = (b.constant(np.asarray(bias, np.float32).reshape(1, -1, *([1] * (q.ndim - 2))), name=f"{name}_bias")
             if bias is not None else m.lookup(op.operands[2]))
        y.name_hint = f"{name}_product"
        y = b.insert(nn.ADD.build([y, c]), op).result
    y.name_hint = op.results[0].name_hint
    return y


def quantize_weight(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(int8 [K, N] in [-127, 127], f32 scale per column N, SQNR in dB): round to nearest."""
    qz = quantize_array(w, channel_axis=1, block_axis=0, config=WeightOnlyConfig(bits=8, rounding="rtn"))
    return qz.q.astype(np.int8), np.asarray(qz.scales, np.float32), qz.sqnr_db


# ops that only move or view data: a row-bounded tensor stays row-bounded through them
_VIEWS = (nn.RESHAPE, nn.DYNAMIC_RESHAPE, nn.TRANSPOSE, nn.SQUEEZE, nn.UNSQUEEZE, nn.FLATTEN, nn.IDENTITY)


def row_bounded(x: Value) -> bool:
    """Whether x's rows share one range by construction, so that one scale per tensor loses little:
    a LayerNormalization's output (every row normalized, then the same affine map) or a product of two
    activations (attention's softmax-weighted sum of V rows, which stays within V's range), seen
    through reshapes and transposes. Anything else (a GELU's output, a graph input) may hold a few
    rows far larger than the rest, the [CLS]/[SEP] rows of a transformer's FFN."""
    op = getattr(x, "op", None)
    while op is not None and op.opdef in _VIEWS:
        op = getattr(op.operands[0], "op", None)
    if op is None:
        return False
    if op.opdef is nn.LAYER_NORMALIZATION:
        return True
    return op.opdef is nn.MATMUL and all(_constant(v) is None for v in op.operands)


def _per_row(config: DynamicConfig, x: Value) -> bool:
    return config.activations == "per_row" or (config.activations == "auto" and not row_bounded(x))


def _row_scale(b: OpBuilder, op: Operation, x: Value, name: str) -> tuple[Value, Value]:
    """(x / r, r) with r = max |x| over the last axis, kept as [.., rows, 1]: every row of x / r
    spans at most [-1, 1], so one uint8 scale for the tensor is as fine on each row as that row's
    own symmetric int8 scale would be. max(hi, -lo) reads x twice but writes nothing as big as x
    (Abs would); all-zero rows divide by the smallest normal float."""
    def add(opdef, operands, suffix, **attrs):
        v = b.insert(opdef.build(operands, **attrs), op).result
        v.name_hint = f"{name}_{suffix}"
        return v
    hi = add(nn.REDUCE["max"], [x], "row_max", axes=[-1], keepdims=1)
    lo = add(nn.REDUCE["min"], [x], "row_min", axes=[-1], keepdims=1)
    neg = add(nn.UNARY["neg"], [lo], "row_min_negated")
    tiny = b.constant(np.asarray(_TINY), name=f"{name}_row_floor")
    r = add(nn.VARIADIC["max"], [hi, neg, tiny], "row_scale")
    return add(nn.DIV, [x, r], "rows"), r


def _quantize_input(b: OpBuilder, op: Operation, x: Value, seen: dict, per_row: bool) -> tuple:
    """(xq, x_scale, x_zero_point, row scale or None): one DynamicQuantizeLinear per activation,
    shared by the MatMuls that read it (Q, K, V), after the row scaling when ``per_row``."""
    if (x, per_row) not in seen:
        name = (x.name_hint or op.label or "input") + ("" if per_row or (x, True) not in seen else "_tensor")
        xr, r = _row_scale(b, op, x, name) if per_row else (x, None)
        dq = b.insert(nn.DYNAMIC_QUANTIZE_LINEAR.build([xr]), op)
        for v, suffix in zip(dq.results, ("quantized", "scale", "zero_point")):
            v.name_hint = f"{name}_{suffix}"
        seen[x, per_row] = (*dq.results, r)
    return seen[x, per_row]


def _emit(b: OpBuilder, op: Operation, x: tuple, q: np.ndarray, scale: np.ndarray, bias: Value | None) -> Value:
    name = op.results[0].name_hint or op.label or "matmul"
    xq, xs, xz, rows = x
    wq = b.constant(q, IntegerType(8), name=f"{name}_weight_quantized")
    wz = b.constant(np.zeros((), np.int8), IntegerType(8), name=f"{name}_weight_zero_point")
    acc = b.insert(nn.MATMUL_INTEGER.build([xq, wq, xz, wz]), op).result
    acc.name_hint = f"{name}_accumulator"
    accf = b.insert(nn.CAST.build([acc], to=_F32), op).result
    ws = b.constant(scale, name=f"{name}_weight_scale")
    s = b.insert(nn.MUL.build([xs, ws]), op).result
    s.name_hint = f"{name}_scale"
    y = b.insert(nn.MUL.build([accf, s]), op).result
    if rows is not None:   # the rows were divided by r before quantization: give it back
        y.name_hint = f"{name}_row_product"
        y = b.insert(nn.MUL.build([y, rows]), op).result
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
                u in quantized and i == _weight_operand(u) for u, i in op.results[0].uses):
            continue   # a float weight now stored as int8: not written
        w, why = sites[op]
        if w is None:
            if why is not None:
                result.floats.append(_float_weight(op, op.operands[_weight_operand(op)], op.opdef.name.split(".")[-1],
                                                   why))
            b.clone(op, m)
            continue
        if op.opdef is nn.GATHER:
            q, scale, sqnr = quantize_table(w)
            m.map(op.results[0], _emit_gather(b, op, m, q, scale))
            result.layers.append(DynamicLayer(op.label or op.results[0].name_hint or "?", "gather", tuple(w.shape),
                                              sqnr))
            continue
        if op.opdef is nn.CONV:   # per tensor: a kernel window spans rows, no row scale factors out
            qz = quantize_array(w, channel_axis=0, block_axis=1, config=WeightOnlyConfig(bits=8, rounding="rtn"))
            x = _quantize_input(b, op, m.lookup(op.operands[0]), seen, False)
            m.map(op.results[0], _emit_conv(b, op, m, x, qz.q.astype(np.int8), np.asarray(qz.scales, np.float32)))
            result.layers.append(DynamicLayer(op.label or op.results[0].name_hint or "?", "conv", tuple(w.shape),
                                              qz.sqnr_db))
            continue
        q, scale, sqnr = quantize_weight(w)
        bias = _gemm_bias(b, op, m) if op.opdef is nn.GEMM else None
        rows = _per_row(config, op.operands[0])
        if rows and (m.lookup(op.operands[0]), True) not in seen:
            result.per_row.append(op.operands[0].name_hint or op.label or "?")
        x = _quantize_input(b, op, m.lookup(op.operands[0]), seen, rows)
        m.map(op.results[0], _emit(b, op, x, q, scale, bias))
        result.layers.append(DynamicLayer(op.label or op.results[0].name_hint or "?",
                                          "gemm" if op.opdef is nn.GEMM else "matmul", tuple(w.shape), sqnr))
    new.update_type()
    result.bytes_before, result.bytes_after = constant_bytes(fn), constant_bytes(new)
    return result
