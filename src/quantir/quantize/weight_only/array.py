"""One float weight quantized: the rounding the configuration and the statistics call for."""
from __future__ import annotations

import numpy as np

from .config import WeightOnlyConfig
from .gptq import _gptq_weight
from .rounding import MSE_RATIOS, _CHUNK, Quantized, _groups, _params, _quantize_rows, _round, _sqnr, back_scale


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
