"""Weight-only quantization: int8 or int4 weights, per channel or block-wise, float activations.

No calibration data is needed. Each chosen constant weight — MatMul/Gemm B, Conv W, the table of a
Gather (embeddings) — becomes its storage integers (``arith.constant`` of ``i8``/``i4``), a
``quant.scast`` to the quant dialect's type and a ``quant.dcast`` in front of the float op, which is
left as it was: the interpreter runs the module as it is, and the ONNX backend writes each chain as
one DequantizeLinear (``backends/onnx/weight_only.py``).

Granularity. Per channel (``block_size=None``): one scale per output channel
(``!quant.uniform<i8:f32:1, {...}>``, MatMul [K, N] axis 1, Gemm with transB axis 0, Conv axis 0,
an embedding table one scale per row). Block-wise: blocks of ``block_size`` consecutive elements
along the reduction axis (MatMul K = axis 0, Conv input channels = axis 1, an embedding row =
axis 1), one scale per block and output channel: ``!quant.uniform<i4:f32:{0:32, 1:1}, {{...}}>``,
the layout of ONNX's blocked DequantizeLinear. A weight whose blocked dimension the block size
does not divide stays float, with the reason (refused rather than padded: the quant dialect's
sub-channel type requires whole blocks, and a padded weight is no longer the model's tensor).

Ranges. Symmetric (zero point 0): int8 in LiteRT's narrow range [-127, 127], int4 in [-8, 7] with
the scale set by the largest magnitude over 7. Asymmetric: the group's [min, max] on the full
storage range with a zero point.

Rounding. ``rounding="rtn"`` is round-to-nearest with the scale from the group's extremes.
``"mse"`` (default) without calibration data searches, per group, the clipping ratio of the scale
(18 ratios from 1.0 down to 0.5) that minimizes the group's squared error, the integers rounded to
nearest: it needs no data and costs a few vectorized passes per weight. With calibration data,
2-D MatMul/Gemm weights take GPTQ (``gptq``): the input's E[x x^T] is collected on the samples,
the block scales come from the search above, and the rows of W are rounded one by one, largest
E[x_k^2] first, each row's error pushed onto the rows not yet rounded through the inverse
Hessian, so what is minimized is the layer's output error rather than the weight's; a conv
weight's search then weights element k's error by E[x_k^2] of its input channel. Why GPTQ: on
MiniLM int4 block 32 the weights' own error is not what the embedding feels (BERT's LayerNorm
outputs carry a few channels 10-100x larger than the rest, and an error on their rows dominates
each matmul's output); measured on 256 held-out sentences, mean cosine vs fp32: RTN 0.956, MSE
search 0.963, E[x^2]-weighted search 0.971, GPTQ 0.991 (asymmetric: RTN-with-search 0.974, GPTQ
0.993). GPTQ lowers the weight SQNR it reports (it trades weight error for output error);
``WeightLayer.sqnr_rtn_db`` is round-to-nearest's SQNR on the same weight, side by side, and
``bench/weight_only.py`` gives the model-level figures each run.

What stays float: constants read by other ops, weights under ``min_elements`` elements
(LiteRT's converter keeps weights under 1024 elements float: ``weights_min_num_elements``), op
kinds not in ``ops``, batched constant B, and undivisible blocks; each with its reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import QuantirError
from ..ir import Function, Module, Operation, Value
from ..ir.builder import OpBuilder, function_like
from ..ir.dialects import arith, func, nn, quant
from ..ir.dialects.nn_quant import quantization_layout
from ..ir.mapping import IRMapping
from ..types import FloatType, IntegerType, TensorType
from ..types.quant import UniformQuantizedPerAxisType, UniformQuantizedSubChannelType
from .rules import Violation

__all__ = ["WeightOnlyConfig", "WeightOnlyResult", "WeightOnlyError", "WeightLayer", "FloatWeight",
           "quantize_weights", "quantize_array", "input_importance", "OPS", "MIN_ELEMENTS"]

OPS = ("matmul", "gemm", "conv", "gather")
MIN_ELEMENTS = 1024          # LiteRT's converter: weights with fewer elements stay float
BLOCK_SIZES = (32, 256)      # the block sizes accepted, inclusive
# clipping ratios of the search: fine near 1 (int8 gains there), coarse down to 0.5 (int4 outliers)
MSE_RATIOS = 1.0 - np.array([0, .005, .01, .015, .02, .03, .04, .05, .07, .09, .12, .15, .2, .25, .3, .35, .4, .5])
_CHUNK = 1 << 20             # elements per vectorized pass of the search (bounds its memory)
_F32 = FloatType("f32")


class WeightOnlyError(QuantirError):
    """A weight-only configuration or model that cannot be quantized; the message says why."""


@dataclass(frozen=True)
class WeightOnlyConfig:
    """``bits``: 8 or 4. ``block_size``: None (per channel) or 32..256 elements along the
    reduction axis. ``symmetric``: zero point 0, else a zero point per group. ``ops``: which
    weights (``"matmul"``, ``"gemm"``, ``"conv"``, ``"gather"``). ``min_elements``: smaller
    weights stay float. ``rounding``: ``"mse"`` (clipping search) or ``"rtn"``."""

    bits: int = 8
    block_size: int | None = None
    symmetric: bool = True
    ops: tuple[str, ...] = OPS
    min_elements: int = MIN_ELEMENTS
    rounding: str = "mse"

    def __post_init__(self):
        if isinstance(self.bits, bool) or self.bits not in (4, 8):
            raise WeightOnlyError(f"weight-only bits must be 4 or 8, found {self.bits!r}")
        b = self.block_size
        if b is not None and (isinstance(b, bool) or not isinstance(b, int)
                              or not BLOCK_SIZES[0] <= b <= BLOCK_SIZES[1]):
            raise WeightOnlyError(f"block size must be an integer in {BLOCK_SIZES[0]}..{BLOCK_SIZES[1]} "
                                  f"(or None for per-channel scales), found {b!r}")
        unknown = [o for o in self.ops if o not in OPS]
        if unknown or not self.ops:
            raise WeightOnlyError(f"unknown weight-only ops {unknown or '(none given)'}: choose from {', '.join(OPS)}")
        object.__setattr__(self, "ops", tuple(self.ops))
        if isinstance(self.min_elements, bool) or not isinstance(self.min_elements, int) or self.min_elements < 0:
            raise WeightOnlyError(f"min_elements must be a non-negative integer, found {self.min_elements!r}")
        if self.rounding not in ("mse", "rtn"):
            raise WeightOnlyError(f"rounding must be 'mse' or 'rtn', found {self.rounding!r}")

    @property
    def qrange(self) -> tuple[int, int]:
        """The stored integers' range: symmetric int8 is LiteRT's narrow [-127, 127]."""
        lo, hi = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return (lo + 1, hi) if self.symmetric and self.bits == 8 else (lo, hi)

    def describe(self) -> str:
        gran = "per channel" if self.block_size is None else f"block {self.block_size}"
        return (f"int{self.bits} {gran}, {'symmetric' if self.symmetric else 'asymmetric'}, "
                f"{self.rounding.upper()} rounding")


# -- one array ------------------------------------------------------------------------------------

@dataclass
class Quantized:
    """One weight quantized: storage integers of the weight's shape, scales and zero points in
    the layout of the quant type (per channel: 1-D; blocks: the weight's rank), the SQNR of the
    dequantized weight and, for comparison, of round-to-nearest."""

    q: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray
    sqnr_db: float
    sqnr_rtn_db: float


def _groups(w: np.ndarray, channel_axis: int, block_axis: int, block: int | None):
    """(rows [groups, group size], a function mapping a row-shaped array back to the weight's
    layout, the scale layout's shape)."""
    if block is None:
        moved = np.moveaxis(w, channel_axis, 0)
        rows = moved.reshape(moved.shape[0], -1)
        return rows, lambda r: np.moveaxis(r.reshape(moved.shape), 0, channel_axis), (w.shape[channel_axis],)
    moved = np.moveaxis(w, block_axis, -1)
    rows = moved.reshape(-1, block)
    scale_moved = moved.shape[:-1] + (moved.shape[-1] // block,)
    scale_shape = tuple(np.moveaxis(np.empty(scale_moved, np.int8), -1, block_axis).shape)
    return rows, lambda r: np.moveaxis(r.reshape(moved.shape), -1, block_axis), scale_shape


def _params(lo: np.ndarray, hi: np.ndarray, qmin: int, qmax: int, symmetric: bool):
    """(float32 scale, zero point) per group from its (clipped) extremes."""
    if symmetric:
        amax = np.maximum(np.abs(lo), np.abs(hi))
        scale = amax / min(qmax, -qmin)
        zp = np.zeros_like(scale, dtype=np.int64)
    else:
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)   # zero representable: a zero weight stays zero
        scale = (hi - lo) / (qmax - qmin)
        zp = np.zeros_like(scale, dtype=np.int64)
        ok = scale > 0
        zp[ok] = np.clip(np.round(qmin - lo[ok] / scale[ok]), qmin, qmax).astype(np.int64)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)   # an all-zero group: any scale, 1.0
    return scale, zp


def _round(rows: np.ndarray, scale: np.ndarray, zp: np.ndarray, qmin: int, qmax: int):
    """(stored integers, dequantized rows) with round-to-nearest-even for the given scales."""
    s = scale.astype(np.float64)[:, None]
    q = np.clip(np.round(rows / s) + zp[:, None], qmin, qmax)
    return q, (q - zp[:, None]) * s


def _quantize_rows(rows: np.ndarray, weight: np.ndarray | None, qmin: int, qmax: int, symmetric: bool,
                   ratios: Sequence[float]):
    """Per row, the ratio of ``ratios`` whose clipped scale gives the least weighted squared error."""
    lo, hi = rows.min(axis=1), rows.max(axis=1)
    best = None
    for r in ratios:
        scale, zp = _params(lo * r, hi * r, qmin, qmax, symmetric)
        q, deq = _round(rows, scale, zp, qmin, qmax)
        d2 = (rows - deq) ** 2
        err = (d2 if weight is None else d2 * weight).sum(axis=1)
        if best is None:
            best = [err, q, scale, zp]
            continue
        better = err < best[0]
        best[0] = np.where(better, err, best[0])
        best[1][better] = q[better]
        best[2] = np.where(better, scale, best[2])
        best[3] = np.where(better, zp, best[3])
    return best[1], best[2], best[3]


def quantize_array(w: np.ndarray, *, channel_axis: int, block_axis: int, config: WeightOnlyConfig,
                   importance: np.ndarray | None = None, hessian: np.ndarray | None = None) -> Quantized:
    """Quantize one float weight (see the module notes). ``importance``: per-element weights of
    the squared error, broadcastable to ``w`` (E[x_k^2] of the input channel), or None.
    ``hessian``: E[x x^T] of a 2-D weight's input ([K, K], K = ``w.shape[block_axis]``): GPTQ."""
    w = np.asarray(w, np.float32)
    block = config.block_size
    qmin, qmax = config.qrange
    if hessian is not None and w.ndim == 2 and config.rounding != "rtn":
        return _gptq_weight(w, block_axis, hessian, config)
    rows, back, scale_shape = _groups(w.astype(np.float64), channel_axis, block_axis, block)
    imp = None if importance is None else _groups(
        np.broadcast_to(np.asarray(importance, np.float64), w.shape), channel_axis, block_axis, block)[0]
    ratios = MSE_RATIOS if config.rounding == "mse" else (1.0,)
    q = np.empty(rows.shape, np.int8)
    scales = np.empty(rows.shape[0], np.float32)
    zps = np.empty(rows.shape[0], np.int64)
    step = max(1, _CHUNK // max(1, rows.shape[1]))
    noise = noise_rtn = 0.0
    for a in range(0, rows.shape[0], step):
        part = rows[a:a + step]
        pq, ps, pz = _quantize_rows(part, None if imp is None else imp[a:a + step], qmin, qmax, config.symmetric,
                                    ratios)
        q[a:a + step], scales[a:a + step], zps[a:a + step] = pq, ps, pz
        noise += float(((part - (pq - pz[:, None]) * ps.astype(np.float64)[:, None]) ** 2).sum())
        rs, rz = _params(part.min(axis=1), part.max(axis=1), qmin, qmax, config.symmetric)
        noise_rtn += float(((part - _round(part, rs, rz, qmin, qmax)[1]) ** 2).sum())
    signal = float((rows ** 2).sum())
    if block is None:
        scales_out, zps_out = scales, zps
    else:
        scales_out, zps_out = (back_scale(x, w.shape, block_axis, block) for x in (scales, zps))
    assert scales_out.shape == scale_shape
    return Quantized(back(q), scales_out, zps_out, _sqnr(signal, noise), _sqnr(signal, noise_rtn))


def _gptq_weight(w: np.ndarray, block_axis: int, hessian: np.ndarray, config: WeightOnlyConfig) -> Quantized:
    """GPTQ on a 2-D weight, in the [K, N] layout (K the reduction axis), back to ``w``'s layout."""
    kn = w.astype(np.float64) if block_axis == 0 else w.T.astype(np.float64)
    q, scales, zps = gptq(kn, hessian, config)
    qmin, qmax = config.qrange
    deq = (q - (zps if config.block_size is None else np.repeat(zps, config.block_size, axis=0))) * \
        (scales.astype(np.float64) if config.block_size is None else
         np.repeat(scales.astype(np.float64), config.block_size, axis=0))
    signal = float((kn ** 2).sum())
    rows = kn.T if config.block_size is None else kn.T.reshape(-1, config.block_size)
    rs, rz = _params(rows.min(axis=1), rows.max(axis=1), qmin, qmax, config.symmetric)
    noise_rtn = float(((rows - _round(rows, rs, rz, qmin, qmax)[1]) ** 2).sum())
    out = Quantized(q.astype(np.int8), scales, zps, _sqnr(signal, float(((kn - deq) ** 2).sum())),
                    _sqnr(signal, noise_rtn))
    if block_axis != 0:
        out.q, out.scales, out.zero_points = out.q.T, out.scales.T if out.scales.ndim == 2 else out.scales, \
            out.zero_points.T if out.zero_points.ndim == 2 else out.zero_points
    out.q = np.ascontiguousarray(out.q)
    return out


GPTQ_DAMP = 0.01        # of the mean diagonal, added to the Hessian (GPTQ's default)
GPTQ_BATCH = 128        # rows updated together before the lazy update of the rest


def gptq(w: np.ndarray, hessian: np.ndarray, config: WeightOnlyConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPTQ (Frantar et al. 2022) on ``w`` [K, N] with ``hessian`` = E[x x^T] [K, K]: rows are
    quantized in order, each row's rounding error spread over the rows not yet quantized through
    the inverse Hessian's Cholesky factor, so the layer's output error, not the weight's, is
    minimized. A block's scales are chosen (MSE search) when the sweep reaches it, from the
    updated weights. Returns (integers [K, N], scales, zero points) in the quant type's layout:
    per channel (N,), blocks (K/B, N)."""
    k, n = w.shape
    qmin, qmax = config.qrange
    ratios = MSE_RATIOS if config.rounding == "mse" else (1.0,)
    W = w.astype(np.float64).copy()
    H = np.asarray(hessian, np.float64).copy()
    dead = np.diag(H) <= 0
    H[dead, dead] = 1.0
    H[np.diag_indices(k)] += GPTQ_DAMP * float(np.mean(np.diag(H)))
    block = config.block_size
    # scales first, from the float weights (GPTQ's "static groups"): the sweep may then take the rows
    # in any order; it takes them by decreasing E[x_k^2] ("act order"), the outlier channels first,
    # while the most rows remain to absorb their error
    if block is None:
        _, scales, zps = _quantize_rows(W.T, None, qmin, qmax, config.symmetric, ratios)
        row_s, row_z = np.broadcast_to(scales, (k, n)), np.broadcast_to(zps, (k, n))
    else:
        _, fs, fz = _quantize_rows(W.T.reshape(-1, block), None, qmin, qmax, config.symmetric, ratios)
        scales, zps = fs.reshape(n, k // block).T, fz.reshape(n, k // block).T
        row_s, row_z = np.repeat(scales, block, axis=0), np.repeat(zps, block, axis=0)
    order = np.argsort(-np.diag(H), kind="stable")
    W, H = W[order], H[np.ix_(order, order)]
    row_s, row_z = row_s[order].astype(np.float64), row_z[order]
    try:
        U = np.linalg.cholesky(np.linalg.inv(H)).T        # upper factor of H^-1
    except np.linalg.LinAlgError:
        U = np.diag(1.0 / np.sqrt(np.diag(H)))            # not positive definite: no error spreading
    Q = np.zeros((k, n), np.int64)
    for i1 in range(0, k, GPTQ_BATCH):
        i2 = min(i1 + GPTQ_BATCH, k)
        W1, U1 = W[i1:i2].copy(), U[i1:i2, i1:i2]
        E = np.zeros_like(W1)
        for j in range(i2 - i1):
            s, z = row_s[i1 + j], row_z[i1 + j]
            q = np.clip(np.round(W1[j] / s) + z, qmin, qmax)
            Q[i1 + j] = q
            e = (W1[j] - (q - z) * s) / U1[j, j]
            W1[j + 1:] -= np.outer(U1[j, j + 1:], e)
            E[j] = e
        W[i2:] -= U[i1:i2, i2:].T @ E
    out = np.empty_like(Q)
    out[order] = Q
    return out, scales, zps


def back_scale(flat: np.ndarray, shape: tuple[int, ...], block_axis: int, block: int) -> np.ndarray:
    """Per-block values in row order back to the blocked scale layout."""
    moved = tuple(np.moveaxis(np.empty(shape, np.int8), block_axis, -1).shape)
    return np.moveaxis(flat.reshape(moved[:-1] + (moved[-1] // block,)), -1, block_axis)


def _sqnr(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf


# -- which weights --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Site:
    op: Operation
    operand: int          # the weight's operand index
    channel_axis: int     # output channel (per-channel scales)
    block_axis: int       # reduction axis (blocks)
    kind: str             # "matmul", "gemm", "conv", "gather"


def _constant(v: Value) -> np.ndarray | None:
    op = getattr(v, "op", None)
    if op is None or op.opdef is not arith.CONSTANT:
        return None
    a = getattr(op.attributes.get("value"), "array", None)
    return None if a is None or not np.issubdtype(np.asarray(a).dtype, np.floating) else np.asarray(a)


def candidate(op: Operation) -> tuple[Site | None, str | None]:
    """The weight site of ``op`` or the reason its constant weight cannot be one; (None, None) for an
    op that has no constant weight of these kinds."""
    if op.opdef is nn.MATMUL and len(op.operands) > 1 and _constant(op.operands[1]) is not None:
        w = _constant(op.operands[1])
        if w.ndim != 2:
            return None, f"a constant B of rank {w.ndim} (batched weights are not quantized)"
        return Site(op, 1, 1, 0, "matmul"), None
    if op.opdef is nn.GEMM and _constant(op.operands[1]) is not None:
        tb = bool(op.attr("trans_b"))
        return Site(op, 1, 0 if tb else 1, 1 if tb else 0, "gemm"), None
    if op.opdef is nn.CONV and _constant(op.operands[1]) is not None:
        return Site(op, 1, 0, 1, "conv"), None
    if op.opdef is nn.GATHER and _constant(op.operands[0]) is not None:
        w = _constant(op.operands[0])
        if (op.attr("axis") or 0) % max(w.ndim, 1) != 0 or w.ndim != 2:
            return None, "a gather from a constant that is not a [rows, columns] table read along its rows"
        return Site(op, 0, 0, 1, "gather"), None
    return None, None


def _refusal(site: Site, w: np.ndarray, config: WeightOnlyConfig) -> str | None:
    if site.kind not in config.ops:
        return f"{site.kind} weights not chosen (ops: {', '.join(config.ops)})"
    if w.size < config.min_elements:
        return f"{w.size} elements, under min_elements {config.min_elements} (LiteRT keeps small weights float)"
    b = config.block_size
    if b is not None and w.shape[site.block_axis] % b:
        return (f"block size {b} does not divide dimension {site.block_axis} ({w.shape[site.block_axis]}): "
                f"blocks are whole, the weight is not padded")
    return None


# -- the result -----------------------------------------------------------------------------------

@dataclass
class WeightLayer:
    name: str           # the weight
    op: str             # the op reading it
    kind: str
    shape: tuple[int, ...]
    granularity: str
    sqnr_db: float
    sqnr_rtn_db: float
    float_bytes: int
    quantized_bytes: int
    rounding: str = "mse"   # "rtn", "mse", "mse, E[x^2]-weighted" or "gptq"

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class FloatWeight:
    name: str
    op: str
    kind: str
    elements: int
    reason: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class WeightOnlyResult:
    """The module with quantized weights (float ops, ``quant.dcast`` before each), the float
    function it came from, and what was done: ``layers`` (per weight: SQNR, bytes), ``left_float``
    (each weight kept float and why), the constants' bytes before and after."""

    module: Module
    float_function: Function
    config: WeightOnlyConfig
    layers: list[WeightLayer]
    left_float: list[FloatWeight]
    bytes_before: int
    bytes_after: int
    calibrated: bool = False
    _writer: Callable[..., Any] | None = field(default=None, repr=False)

    def summary_dict(self) -> dict:
        return {"config": self.config.describe(), "calibration_weighted": self.calibrated,
                "quantized": [x.as_dict() for x in self.layers], "left_float": [x.as_dict() for x in self.left_float],
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                "ratio": self.bytes_after / self.bytes_before if self.bytes_before else None}

    def summary(self) -> str:
        lines = [f"weight-only {self.config.describe()}"
                 + (" with calibration data (GPTQ on MatMul/Gemm weights, E[x^2]-weighted search on the others)"
                    if self.calibrated else "")
                 + f": {len(self.layers)} weights quantized, {len(self.left_float)} left float"]
        lines.append(f"  {'SQNR dB':>8} {'RTN dB':>8}  weight (op, shape, granularity[, rounding])")
        for x in self.layers:
            how = f", {x.rounding}" if x.rounding != self.config.rounding else ""
            lines.append(f"  {x.sqnr_db:8.2f} {x.sqnr_rtn_db:8.2f}  {x.name} ({x.op}, {x.kind} "
                         f"{'x'.join(map(str, x.shape))}, {x.granularity}{how})")
        if self.left_float:
            lines.append("left float:")
            lines += [f"  {x.name} ({x.op}, {x.kind}, {x.elements} elements): {x.reason}" for x in self.left_float]
        ratio = self.bytes_after / self.bytes_before if self.bytes_before else float("nan")
        lines.append(f"constants: {self.bytes_before / 1e6:.2f} MB float -> {self.bytes_after / 1e6:.2f} MB "
                     f"({ratio:.3f}x)")
        return "\n".join(lines)

    def save(self, path, **options) -> Any:
        """Write the model atomically: ``.onnx`` (by default 4-bit blocked MatMul weights and Gather
        tables as ONNX Runtime's MatMulNBits / GatherBlockQuantized; ``matmul_nbits=False``: standard
        DequantizeLinear for every weight) or ``.mlir``."""
        if self._writer is None:
            raise WeightOnlyError("this result has no writer: make it with quantir.quantize_weights")
        return self._writer(self, path, **options)


# -- the rewrite ----------------------------------------------------------------------------------

HESSIAN_MAX_K = 4096   # GPTQ's K x K statistics beyond this would cost more memory than they are worth


def input_importance(fn: Function, sites: Sequence[Site], run_batches: Callable[[list[str]], Any]) -> dict:
    """Per site reading an activation, what its rounding uses from the calibration samples: for a
    2-D MatMul/Gemm weight the input's E[x x^T] (``("hessian", [K, K])``, GPTQ), for a conv
    E[x_k^2] per input channel shaped to broadcast against the weight (``("diag", array)``).
    ``run_batches(names)`` yields dicts of those values' arrays, one per calibration batch."""
    wanted = {s.op: s.op.operands[0] for s in sites if s.kind != "gather"
              and not (s.kind == "gemm" and s.op.attr("trans_a"))}
    names = sorted({v.name_hint for v in wanted.values() if v.name_hint})
    conv = {v.name_hint for op, v in wanted.items() if op.opdef is nn.CONV}
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for out in run_batches(names):
        for n in names:
            x = np.asarray(out[n], np.float64)
            if n in conv:
                part, rows = (x ** 2).sum(axis=tuple(i for i in range(x.ndim) if i != 1)), x.size // x.shape[1]
            else:
                flat = x.reshape(-1, x.shape[-1])
                part = flat.T @ flat if x.shape[-1] <= HESSIAN_MAX_K else (flat ** 2).sum(axis=0)
                rows = flat.shape[0]
            sums[n] = sums.get(n, 0.0) + part
            counts[n] = counts.get(n, 0) + rows
    result = {}
    for s in sites:
        v = wanted.get(s.op)
        if v is None or v.name_hint not in sums:
            continue
        mean = sums[v.name_hint] / max(1, counts[v.name_hint])
        if mean.ndim == 2:
            result[s.op] = ("hessian", mean)
        else:
            result[s.op] = ("diag", _importance_layout(s, mean))
    return result


def _importance_layout(site: Site, mean: np.ndarray) -> np.ndarray:
    """E[x_k^2] broadcast against the weight: along its reduction axis."""
    w = _constant(site.op.operands[site.operand])
    shape = [1] * w.ndim
    shape[site.block_axis] = w.shape[site.block_axis]
    if mean.size != w.shape[site.block_axis]:
        return np.ones(shape)
    return np.maximum(mean, 1e-12).reshape(shape)   # an input channel never seen still counts a little


def find_sites(fn: Function, config: WeightOnlyConfig) -> tuple[list[Site], list[FloatWeight]]:
    sites, left = [], []
    for op in fn.ops:
        site, why = candidate(op)
        if site is None:
            if why is not None:
                left.append(_float_weight(op, op.operands[1], op.name.split(".")[-1], why))
            continue
        v = op.operands[site.operand]
        w = _constant(v)
        why = _refusal(site, w, config)
        if why is None and any(u is not op for u, _ in v.uses):
            readers = {u.label or u.name for u, _ in v.uses if u is not op}
            if not all(candidate(u)[0] is not None and candidate(u)[0].operand == i
                       and candidate(u)[0].kind == site.kind for u, i in v.uses):
                why = f"also read by {', '.join(sorted(readers))}, which needs it float"
        if why is None:
            sites.append(site)
        else:
            left.append(_float_weight(op, v, site.kind, why))
    return sites, left


def _float_weight(op: Operation, v: Value, kind: str, why: str) -> FloatWeight:
    w = _constant(v)
    return FloatWeight(v.name_hint or "?", op.label or op.name, kind, int(w.size) if w is not None else 0, why)


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


# -- quantir check: the weight-only rows -------------------------------------------------------------
# A float op whose weight is a DequantizeLinear of constant integers and whose result is not quantized
# (an ONNX weight-only model): 8- or 4-bit storage, scales finite and positive, per tensor, per
# output channel or in blocks along the reduction axis, zero points in the storage range.

def _role(op: Operation) -> tuple[int, int, int] | None:
    """(weight operand, output-channel axis, reduction axis) of a weight-only op kind."""
    if op.opdef is nn.MATMUL:
        return 1, 1, 0
    if op.opdef is nn.GEMM:
        return (1, 0, 1) if op.attr("trans_b") else (1, 1, 0)
    if op.opdef is nn.CONV:
        return 1, 0, 1
    if op.opdef is nn.GATHER and (op.attr("axis") or 0) == 0:
        return 0, 0, 1
    return None


def _const_array(v: Value) -> np.ndarray | None:
    op = getattr(v, "op", None)
    if op is None or op.opdef is not arith.CONSTANT:
        return None
    a = getattr(op.attributes.get("value"), "array", None)
    return None if a is None else np.asarray(a)


def weight_only_rows(fn: Function) -> tuple[int, list]:
    """(ops checked, violations) for the weight-only ops of an imported ONNX model."""
    checked, found = 0, []
    for op in fn.ops:
        if op.opdef is nn.ONNX_OP and op.attr("op_type") in CONTRIB_ROWS:
            checked += 1
            found += [Violation(op.label or op.name, f"{op.attr('op_type')} (weight-only)", "input 1", m)
                      for m in CONTRIB_ROWS[op.attr("op_type")](op)]
            continue
        role = _role(op)
        if role is None or not op.results or any(u.opdef is nn.QUANTIZE_LINEAR for u, _ in op.results[0].uses):
            continue
        index, channel, reduction = role
        dq = getattr(op.operands[index], "op", None) if index < len(op.operands) else None
        if dq is None or dq.opdef is not nn.DEQUANTIZE_LINEAR or _const_array(dq.operands[0]) is None:
            continue
        checked += 1
        kind = f"{op.name.split('.')[-1].upper()} (weight-only)"
        where = f"input {index}"

        def bad(message: str) -> None:
            found.append(Violation(op.label or op.name, kind, where, message))
        q = _const_array(dq.operands[0])
        et = dq.operands[0].type.element_type
        if not isinstance(et, IntegerType) or et.width not in (4, 8):
            bad(f"weights must be stored in 8 or 4 bits, found {et}")
            continue
        lo, hi = (0, (1 << et.width) - 1) if et.signedness == "unsigned" else (-(1 << (et.width - 1)),
                                                                                (1 << (et.width - 1)) - 1)
        if q.size and (q.min() < lo or q.max() > hi):
            bad(f"stored values outside the {et} range [{lo}, {hi}]")
        scale = _const_array(dq.operands[1])
        zp = _const_array(dq.operands[2]) if len(dq.operands) > 2 else None
        if scale is None:
            bad("the scale must be a constant")
            continue
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            bad("scales must be finite and positive")
        if zp is not None and zp.size and (zp.min() < lo or zp.max() > hi):
            bad(f"zero points outside the {et} range [{lo}, {hi}]")
        rank = q.ndim
        layout = quantization_layout(q.shape, scale.shape, dq.attr("axis"), dq.attr("block_size"))
        axis = dq.attr("axis") % rank if rank else 0
        if layout == "axis" and axis != channel:
            bad(f"per-channel scales must be along the output channels (axis {channel}), found axis {axis}")
        if layout == "block" and axis != reduction:
            bad(f"blocks must run along the reduction axis ({reduction}), found axis {axis}")
    return checked, found


def _contrib_node(op: Operation):
    import base64

    import onnx
    node = onnx.NodeProto()
    node.ParseFromString(base64.b64decode(op.attr("node")))
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _scales_ok(scales: np.ndarray | None, count: int) -> list[str]:
    if scales is None:
        return ["the scales must be a constant"]
    out = [] if scales.size == count else [f"{count} scales expected, found {scales.size}"]
    if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        out.append("scales must be finite and positive")
    return out


def _block_ok(block: int) -> list[str]:
    return [] if block >= 16 and not block & (block - 1) else [f"block_size {block} must be a power of 2, >= 16"]


def _matmul_nbits_row(op: Operation) -> list[str]:
    """com.microsoft.MatMulNBits: B packed [N, K/block, block·bits/8] uint8, N·K/block scales."""
    a = _contrib_node(op)
    k, n, bits, block = a.get("K"), a.get("N"), a.get("bits", 4), a.get("block_size", 0)
    if len(op.operands) < 3:
        return ["needs A, B and scales"]
    found = _block_ok(block) + ([] if bits in (4, 8) else [f"bits must be 4 or 8, found {bits}"])
    b = _const_array(op.operands[1])
    blocks = -(-k // block) if block else 0
    if b is None or b.dtype != np.uint8 or b.shape != (n, blocks, block * bits // 8):
        found.append(f"B must be a constant uint8 [{n}, {blocks}, {block * bits // 8}], found "
                     f"{None if b is None else (b.dtype.name, list(b.shape))}")
    return found + _scales_ok(_const_array(op.operands[2]), n * blocks)


def _gather_block_quantized_row(op: Operation) -> list[str]:
    """com.microsoft.GatherBlockQuantized: an int4 table [V, D] with [V, D/block] scales."""
    a = _contrib_node(op)
    block = a.get("block_size", 128)
    data = _const_array(op.operands[0])
    et = op.operands[0].type.element_type
    found = _block_ok(block)
    if data is None or not isinstance(et, IntegerType) or et.width not in (4, 8) or data.ndim != 2:
        return found + [f"the table must be a constant 2-D int4/uint4/uint8 tensor, found {et}"]
    d = data.shape[1] * (2 if et.width == 8 and a.get("bits", 4) == 4 else 1)
    return found + _scales_ok(_const_array(op.operands[2]), data.shape[0] * -(-d // block))


CONTRIB_ROWS = {"MatMulNBits": _matmul_nbits_row, "GatherBlockQuantized": _gather_block_quantized_row}
