"""LiteRT's dynamic-range ("hybrid") kernels: float activations, int8 weights, float output.

The weights are int8 constants, symmetric (zero point 0), per tensor or per output channel; the
activations stay float32 and are quantized at run time, one scale per *row*, then multiplied in
integers and rescaled into float32. Every function reproduces the float32 arithmetic of the
kernel ``BUILTIN_REF`` runs, step for step, so the results are bit-exact (docs/numerics.md §8).
Weights are laid out as in the other qkernels (fully-connected ``[C_out, K]``); activations are
plain float arrays.

Run-time input quantization (``tensor_utils``, the portable forms every LiteRT CPU build uses):

* :func:`symmetric_quantize_rows` — ``SymmetricQuantizeFloats``: ``range = max(|min|, |max|)``
  of the row, ``scale = f32(range / 127)``, ``q = clamp(rnd(f32(x · f32(127 / range))), -127, 127)``;
  an all-zero row gets ``q = 0`` and scale ``1``.
* :func:`asymmetric_quantize_rows` — ``AsymmetricQuantizeFloats``: ``rmin = min(0, lo)``,
  ``rmax = max(0, hi)`` in float32, their difference **in float32** (measured: a double
  difference changes the scale's last bit in about one row of three), then in double
  ``scale = width / 255``, the zero point from whichever end has the smaller error, nudged into
  [-128, 127] with ``std::round``; the scale is stored as float32 and
  ``q = clamp(zp + rnd(f32(x · f32(1 / scale))), -128, 127)`` (the zero point added after the
  rounding, as an integer). A row whose range is empty (all zeros) gets ``q = 0``, scale ``1``,
  zero point ``0``.
* ``rnd`` (:func:`litert_round_rows`) is not one rounding but two, by position in the row: LiteRT's
  x86 build runs a SIMD loop over the first ``K - K % 8`` values of each row, which adds ±0.5 in
  float32 and truncates (so ``0.49999997`` becomes ``0.99999997``, which float32 rounds to 1.0, and
  then 1), and a scalar loop over the last ``K % 8`` values, which rounds half away from zero.
  Measured with an identity weight (the output is then the quantized row): 0 of 128,000 values
  differ with this rule; rounding ``f32(zp + ...)`` half away everywhere, the first form, missed
  one value in a few hundred rows of all-MiniLM-L6-v2's activations.

The integer dot products are exact (int32 in LiteRT; here exact float64 or int64 BLAS), and the
zero point enters as ``acc - zp · rowsum[c]``, the weights' row sums taken as LiteRT's x86 build
takes them (:func:`weight_row_sums`: int16 lanes that wrap for K > 2064 with one-sign weights).
FULLY_CONNECTED refuses weights of -128, which LiteRT's x86 dot product mishandles
(:func:`check_no_int8_min`).

FULLY_CONNECTED (``EvalHybridDense`` -> ``MatrixBatchVectorMultiplyAccumulate``):
per-tensor weights fold their scale into the row's factor first, ``s[b] = f32(s_in[b] · s_w)``;
per-channel weights use ``f32(s_w[c] · s_in[b])``; then ``out = f32(bias[c] + f32(f32(acc) ·
scale))`` (the output starts as the bias), then the fused activation in float. An input that is
zero *everywhere* skips the product: the output is the bias (then the activation).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from quantir.numerics import round_half_away
from quantir.runtime.qkernels._common import QKernelError

__all__ = ["symmetric_quantize_rows", "asymmetric_quantize_rows", "float_activation", "weight_row_sums",
           "check_no_int8_min", "fully_connected_hybrid", "batch_matmul_hybrid", "embedding_lookup_hybrid"]

_F32 = np.float32
FLOAT_ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1")


def _rows(x: Any, op: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype != np.float32:
        raise QKernelError(f"{op}: a hybrid kernel takes float32 activations, found {a.dtype}; cast the input to "
                           "float32 (LiteRT's hybrid kernels accept no other float type)")
    return a


def litert_round_rows(p: np.ndarray) -> np.ndarray:
    """LiteRT x86's rounding of a float32 ``[rows, K]`` array to integers (float64 values): the
    first ``K - K % 8`` of each row as ``trunc(f32(p ± 0.5))``, the rest half away from zero."""
    p = np.asarray(p, _F32)
    out = round_half_away(p.astype(np.float64))
    body = p.shape[1] - p.shape[1] % 8
    head = p[:, :body]
    out[:, :body] = np.trunc((head + np.copysign(_F32(0.5), head)).astype(_F32))
    return out


def symmetric_quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quantize each row of the float32 ``[rows, K]`` ``x`` to int8 in [-127, 127]; returns
    ``(q, scale)`` with one float32 scale per row (``SymmetricQuantizeFloats``)."""
    x = _rows(x, "symmetric_quantize_rows")
    if x.ndim != 2:
        raise ValueError(f"symmetric_quantize_rows: expected [rows, K], found shape {x.shape}")
    rng = (np.max(np.abs(x), axis=1) if x.shape[1] else np.zeros(x.shape[0], _F32)).astype(_F32)
    zero = rng == 0
    safe = np.where(zero, _F32(1), rng)
    scale = np.where(zero, _F32(1), (safe / _F32(127)).astype(_F32))
    inv = (_F32(127) / safe).astype(_F32)
    q = np.clip(litert_round_rows((x * inv[:, None]).astype(_F32)), -127, 127).astype(np.int8)
    q[zero] = 0
    return q, scale.astype(_F32)


def asymmetric_quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quantize each row of the float32 ``[rows, K]`` ``x`` to int8 in [-128, 127] with its own
    scale and zero point; returns ``(q, scale float32, zero_point int32)`` (``AsymmetricQuantizeFloats``)."""
    x = _rows(x, "asymmetric_quantize_rows")
    if x.ndim != 2:
        raise ValueError(f"asymmetric_quantize_rows: expected [rows, K], found shape {x.shape}")
    if x.shape[1] == 0:
        n = x.shape[0]
        return np.zeros(x.shape, np.int8), np.ones(n, _F32), np.zeros(n, np.int32)
    rmin32 = np.minimum(_F32(0), x.min(axis=1))
    rmax32 = np.maximum(_F32(0), x.max(axis=1))
    empty = rmin32 == rmax32
    rmin, rmax = rmin32.astype(np.float64), rmax32.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the width of the range is a float32 difference (measured: a double one differs in 1 row of 3)
        scale64 = (rmax32 - rmin32).astype(_F32).astype(np.float64) / 255.0
        zp_from_min = -128.0 - rmin / scale64
        zp_from_max = 127.0 - rmax / scale64
        err_min = 128.0 + np.abs(rmin / scale64)
        err_max = 127.0 + np.abs(rmax / scale64)
    zp_real = np.where(err_min < err_max, zp_from_min, zp_from_max)
    zp = np.where(zp_real <= -128.0, -128, np.where(zp_real >= 127.0, 127,
                                                      round_half_away(np.where(empty, 0.0, zp_real))))
    zp = np.where(empty, 0, zp).astype(np.int32)
    scale = np.where(empty, _F32(1), scale64.astype(_F32)).astype(_F32)
    inv = (_F32(1) / scale).astype(_F32)
    scaled = (x * inv[:, None]).astype(_F32)
    q = np.clip(zp[:, None] + litert_round_rows(scaled), -128, 127).astype(np.int8)
    q[empty] = 0
    return q, scale, zp


def float_activation(y: np.ndarray, activation: str, op: str) -> np.ndarray:
    """The fused activation of a hybrid kernel, applied to float32 (``ActivationFunctor``)."""
    if activation == "none":
        return y
    if activation == "relu":
        return np.maximum(y, _F32(0))
    if activation == "relu6":
        return np.minimum(np.maximum(y, _F32(0)), _F32(6))
    if activation == "relu_n1_to_1":
        return np.minimum(np.maximum(y, _F32(-1)), _F32(1))
    raise QKernelError(f"{op}: fused activation {activation!r} is not reproduced bit-exactly (LiteRT computes "
                       f"tanh/sigmoid with libm); use one of {FLOAT_ACTIVATIONS} and a separate op")


def _weight_scales(weight_scales: Any, channels: int, op: str) -> np.ndarray:
    s = np.atleast_1d(np.asarray(weight_scales, dtype=_F32)).reshape(-1)
    if s.size not in (1, channels):
        raise QKernelError(f"{op}: {s.size} weight scales for {channels} output channels; give one (per tensor) "
                           f"or {channels} (per channel)")
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise QKernelError(f"{op}: weight scales must be finite and positive, found {s}")
    return s


def _check_weight(weight: Any, ndim: int, op: str) -> np.ndarray:
    w = np.asarray(weight)
    if w.dtype != np.int8 or w.ndim != ndim:
        raise QKernelError(f"{op}: the weights must be an int8 array of rank {ndim}, found {w.dtype} of shape "
                           f"{w.shape}")
    return w


def check_no_int8_min(w: np.ndarray, op: str) -> None:
    """Refuse weights of -128 where LiteRT's x86 dot product gets them wrong.

    ``SseMatrixBatchVectorMultiplyAccumulate`` multiplies with ``_mm_sign_epi8``, whose negation
    of -128 wraps to -128: a -128 weight times a negative input adds ``-|q|·128`` instead of
    ``+|q|·128`` (measured against ``BUILTIN_REF``). Symmetric int8 weights lie in [-127, 127].
    """
    if np.any(w == -128):
        raise QKernelError(f"{op}: int8 weights must lie in [-127, 127] (symmetric): LiteRT's x86 hybrid dot "
                           "product negates -128 to -128 and returns wrong sums. Requantize the weights with "
                           "narrow range")


def _float_bias(bias: Any, channels: int, op: str) -> np.ndarray | None:
    if bias is None:
        return None
    b = np.asarray(bias)
    if b.dtype != np.float32 or b.size != channels:
        raise QKernelError(f"{op}: a hybrid bias is {channels} float32 values, found {b.size} of dtype {b.dtype}")
    return b.reshape(-1)


def weight_row_sums(w: np.ndarray) -> np.ndarray:
    """``Σ_k w[..., c, k]`` as LiteRT's x86 build computes it (``SseReductionSumVector``), int64.

    Each block of 16 weights adds its 8 pair sums into 8 **int16** lanes (``_mm_maddubs_epi16``,
    ``_mm_add_epi16``: wrapping), a remaining block of 8 adds one weight per lane (SSE 4.1), the
    lanes are then summed in int32 and the last ``K mod 8`` weights added one by one. A lane
    wraps once it passes ±32767, which takes K > 2064 with weights of one sign: only then does
    this differ from the true sum (measured against ``BUILTIN_REF``).
    """
    k = w.shape[-1]
    n16 = k // 16 * 16
    lanes = w[..., :n16].astype(np.int64).reshape(*w.shape[:-1], -1, 8, 2).sum(axis=(-3, -1))
    tail = n16
    if k - n16 >= 8:
        lanes = lanes + w[..., n16:n16 + 8].astype(np.int64)
        tail = n16 + 8
    lanes = (lanes + 32768) % 65536 - 32768
    return lanes.sum(axis=-1) + w[..., tail:].astype(np.int64).sum(axis=-1)


def int_matmul(q: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Exact ``q[M, K] @ w[C, K].T`` for int8 operands, as int64 (float64 BLAS is exact below 2**53)."""
    k = q.shape[-1]
    if k * 128 * 128 < 2**53:
        return np.matmul(q.astype(np.float64), np.swapaxes(w, -1, -2).astype(np.float64)).astype(np.int64)
    return np.matmul(q.astype(np.int64), np.swapaxes(w, -1, -2).astype(np.int64))


def fully_connected_hybrid(x: np.ndarray, weight: np.ndarray, weight_scales: Any, bias: np.ndarray | None = None,
                           *, activation: str = "none", asymmetric_quantize_inputs: bool = False,
                           keep_num_dims: bool = False) -> np.ndarray:
    """FULLY_CONNECTED with float32 ``x`` (``[..., K]``), int8 ``weight`` ``[C_out, K]``, float32 output.

    Rows are the input flattened to ``[-1, K]``; the result is ``[rows, C_out]``, or
    ``[..., C_out]`` with ``keep_num_dims``. Arithmetic in the module docstring.
    """
    op = "fully_connected_hybrid"
    x = _rows(x, op)
    w = _check_weight(weight, 2, op)
    c_out, k = w.shape
    if k == 0 or x.size % k or (keep_num_dims and x.shape[-1] != k):
        raise QKernelError(f"{op}: input of shape {x.shape} does not split into rows of K={k}")
    check_no_int8_min(w, op)
    ws = _weight_scales(weight_scales, c_out, op)
    b = _float_bias(bias, c_out, op)
    rows = x.reshape(-1, k)
    out_shape = (*x.shape[:-1], c_out) if keep_num_dims else (rows.shape[0], c_out)
    base = np.zeros((rows.shape[0], c_out), _F32) if b is None else np.broadcast_to(b, (rows.shape[0], c_out))
    if not np.any(rows):   # LiteRT's IsZeroVector shortcut: no product at all
        return float_activation(base.copy(), activation, op).reshape(out_shape)
    if asymmetric_quantize_inputs:
        q, s_in, zp = asymmetric_quantize_rows(rows)
    else:
        (q, s_in), zp = symmetric_quantize_rows(rows), None
    acc = int_matmul(q, w)
    if zp is not None:
        acc -= zp.astype(np.int64)[:, None] * weight_row_sums(w)[None, :]
    if ws.size == 1:
        scale = (s_in * ws[0]).astype(_F32)[:, None]
    else:
        scale = (ws[None, :] * s_in[:, None]).astype(_F32)
    y = (base + (acc.astype(_F32) * scale).astype(_F32)).astype(_F32)
    return float_activation(y, activation, op).reshape(out_shape)


def _ext5(shape: tuple) -> tuple:
    return (1,) * (5 - len(shape)) + tuple(shape)


def batch_matmul_hybrid(lhs: np.ndarray, rhs: np.ndarray, rhs_scales: Any, *, adj_x: bool = False,
                        adj_y: bool = False, asymmetric_quantize_inputs: bool = False) -> np.ndarray:
    """BATCH_MATMUL with a float32 ``lhs`` ``[..., M, K]`` and an int8 ``rhs`` ``[..., K, N]``
    (``adj_x`` / ``adj_y`` transpose their last two axes); float32 output ``[..., M, N]``.

    ``rhs_scales``: one scale, or one per output column N. LiteRT's ``EvalHybrid`` ->
    ``reference_ops::BatchMatMul`` (the only BATCH_MATMUL kernel, ``BUILTIN_REF`` or not):
    every row of the lhs is quantized (symmetric, or asymmetric), the integer dot product
    ``total`` corrected by the zero point **in float32**, ``total = int(f32(total) -
    f32(rowsum · zp))``, then ``out = f32(scale · total)`` with ``scale = s_in[row]`` (per tensor,
    ``s_w`` folded in) or ``f32(s_in[row] · s_w[n])``.

    LiteRT's batch loop advances the per-row scales and zero points by ``M`` for each broadcast
    batch index separately, not by the flat batch number: with more than one lhs batch axis of
    size > 1 (e.g. ``[2, 3, M, K]``), batch ``(b1, b2)`` reads the scales of rows
    ``(b1 + b2)·M ...``. This function does the same, so the results stay identical.
    """
    op = "batch_matmul_hybrid"
    x = _rows(lhs, op)
    w = np.asarray(rhs)
    if w.dtype != np.int8 or not (2 <= x.ndim <= 5 and 2 <= w.ndim <= 5):
        raise QKernelError(f"{op}: expected a float32 lhs and an int8 rhs of rank 2..5, found {x.dtype} "
                           f"{x.shape} and {w.dtype} {w.shape}")
    xs = np.swapaxes(x, -1, -2) if adj_x else x            # [..., M, K]: the rows to quantize
    ws = w if adj_y else np.swapaxes(w, -1, -2)            # [..., N, K]: one row per output column
    if w.ndim > 2 and x.ndim > 2 and w.shape[-3] == 1:     # LiteRT folds a unit rhs batch axis into lhs rows
        if adj_x:   # measured: LiteRT's fold then mixes rows of different batches for a rank-4 lhs
            raise QKernelError(f"{op}: adj_x with an rhs of shape {w.shape} (unit axis -3) takes LiteRT's shape "
                               "folding on the untransposed lhs, which is not reproduced; transpose the lhs "
                               "explicitly (adj_x=False)")
        xs = xs.reshape(*xs.shape[:-3], xs.shape[-3] * xs.shape[-2], xs.shape[-1])
        ws = ws.reshape(*ws.shape[:-3], *ws.shape[-2:])
    xs, ws = np.ascontiguousarray(xs), np.ascontiguousarray(ws)
    m, k = xs.shape[-2:]
    n = ws.shape[-2]
    if ws.shape[-1] != k:
        raise QKernelError(f"{op}: lhs {x.shape} and rhs {w.shape} disagree on the contracted axis "
                           f"(adj_x={adj_x}, adj_y={adj_y})")
    sw = _weight_scales(rhs_scales, n, op)
    in5, w5 = _ext5(xs.shape)[:3], _ext5(ws.shape)[:3]   # the batch axes of LiteRT's 5-D extension
    if any(a != b and 1 not in (a, b) for a, b in zip(in5, w5)):
        raise QKernelError(f"{op}: batch axes of {x.shape} and {w.shape} do not broadcast")
    bdims = tuple(max(a, b) for a, b in zip(in5, w5))
    rows = xs.reshape(-1, k)
    if asymmetric_quantize_inputs:
        q, s_in, zp = asymmetric_quantize_rows(rows)
    else:
        (q, s_in), zp = symmetric_quantize_rows(rows), np.zeros(rows.shape[0], np.int32)
    if sw.size == 1:
        s_in = (s_in * sw[0]).astype(_F32)
    q5 = q.reshape(*in5, m, k)
    w5_all = ws.reshape(*w5, n, k)
    row_sums = weight_row_sums(w5_all).reshape(-1)
    n_summed = w5[1] * w5[2] * n        # LiteRT sums the rows of dims 1..2 only
    out = np.empty((*bdims, m, n), _F32)
    for b0 in range(bdims[0]):
        for b1 in range(bdims[1]):
            for b2 in range(bdims[2]):
                bi = tuple(b if d > 1 else 0 for b, d in zip((b0, b1, b2), in5))
                bw = tuple(b if d > 1 else 0 for b, d in zip((b0, b1, b2), w5))
                r0 = sum(bi) * m                      # LiteRT's per-axis advance (docstring)
                c0 = sum(bw) * n
                if asymmetric_quantize_inputs and c0 + n > n_summed:
                    raise QKernelError(f"{op}: LiteRT reads row sums it never computed for rhs {w.shape} "
                                       "(batch axis 0 of the 5-D extension > 1); use a symmetric input")
                total = int_matmul(q5[bi], w5_all[bw]).astype(_F32)
                corr = (row_sums[c0:c0 + n].astype(_F32)[None, :] *
                        zp[r0:r0 + m].astype(_F32)[:, None]).astype(_F32)
                total = (total - corr).astype(_F32)
                sf = s_in[r0:r0 + m]
                scale = sf[:, None] if sw.size == 1 else (sf[:, None] * sw[None, :]).astype(_F32)
                out[b0, b1, b2] = (scale * total).astype(_F32)
    m_out = x.shape[-1] if adj_x else x.shape[-2]
    return out.reshape(*np.broadcast_shapes(x.shape[:-2], w.shape[:-2]), m_out, n)


def embedding_lookup_hybrid(ids: np.ndarray, table: np.ndarray, scales: Any) -> np.ndarray:
    """EMBEDDING_LOOKUP of an int8 ``table`` ``[rows, ...]`` with a float32 output: row ``ids[i]``
    times its scale (one scale, or one per row: ``quantized_dimension`` 0), ``out = f32(q · s)``.

    The zero point must be 0 (LiteRT's Prepare); an id outside ``[0, rows)`` is refused, as LiteRT
    fails the invocation. GATHER has no such form: its output type is its input type.
    """
    op = "embedding_lookup_hybrid"
    t = np.asarray(table)
    idx = np.asarray(ids)
    if t.dtype != np.int8 or t.ndim < 2:
        raise QKernelError(f"{op}: the table must be int8 of rank >= 2, found {t.dtype} {t.shape}")
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        raise QKernelError(f"{op}: ids must be a 1-D integer array (int32 in LiteRT), found {idx.dtype} {idx.shape}")
    s = _weight_scales(scales, t.shape[0], op)
    if idx.size and (idx.min() < 0 or idx.max() >= t.shape[0]):
        raise QKernelError(f"{op}: id {int(idx.min() if idx.min() < 0 else idx.max())} is outside the table's "
                           f"{t.shape[0]} rows (LiteRT: 'Embedding Lookup: index out of bounds')")
    rows = t[idx].astype(_F32)
    row_scale = s[0] if s.size == 1 else s[idx].reshape(-1, *([1] * (t.ndim - 1)))
    return (rows * row_scale).astype(_F32)
