"""The calibration statistics the rounding uses: E[x x^T] for GPTQ, E[x_k^2] for a conv."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ...ir import Function
from ...ir.dialects import nn
from .sites import Site, _constant

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
