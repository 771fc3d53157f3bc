"""GPTQ: rounding a 2-D weight row by row against its input's E[x x^T]."""
from __future__ import annotations

import numpy as np

from .config import WeightOnlyConfig
from .rounding import MSE_RATIOS, Quantized, _params, _quantize_rows, _round, _sqnr


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
