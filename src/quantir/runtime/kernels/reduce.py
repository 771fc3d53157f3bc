"""Reductions as a table: ``nn.reduce_*`` and ``nn.arg_max``/``arg_min``. Reductions over
an empty set give ONNX's identities (0 for sums, 1 for prod, -inf/+inf for max/min)."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_reduce import reduced_axes


def _extreme(dtype, high: bool):
    if dtype.kind == "b":
        return high
    if dtype.kind == "f":
        return np.inf if high else -np.inf
    info = np.iinfo(dtype)
    return info.max if high else info.min


def _log_sum_exp(x, axes, keepdims):
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdims))
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axes)


REDUCERS = {
    "mean": lambda x, ax, kd: np.mean(x, axis=ax, keepdims=kd),
    "sum": lambda x, ax, kd: np.sum(x, axis=ax, keepdims=kd, dtype=x.dtype),
    "max": lambda x, ax, kd: np.max(x, axis=ax, keepdims=kd, initial=_extreme(x.dtype, False)),
    "min": lambda x, ax, kd: np.min(x, axis=ax, keepdims=kd, initial=_extreme(x.dtype, True)),
    "prod": lambda x, ax, kd: np.prod(x, axis=ax, keepdims=kd, dtype=x.dtype),
    "l1": lambda x, ax, kd: np.sum(np.abs(x), axis=ax, keepdims=kd, dtype=x.dtype),
    "l2": lambda x, ax, kd: np.sqrt(np.sum(np.square(x), axis=ax, keepdims=kd, dtype=x.dtype)),
    "sum_square": lambda x, ax, kd: np.sum(np.square(x), axis=ax, keepdims=kd, dtype=x.dtype),
    "log_sum": lambda x, ax, kd: np.log(np.sum(x, axis=ax, keepdims=kd, dtype=x.dtype)),
    "log_sum_exp": _log_sum_exp,
}


def _reducer(fn):
    def kernel(op, x):
        axes = reduced_axes(x.ndim, op.opdef.attr_values(op))
        if not axes:
            return x
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(fn(x, axes, bool(op.attr("keepdims")))).astype(x.dtype, copy=False)
    return kernel


def _arg(fn):
    def kernel(op, x):
        axis = op.attr("axis") % x.ndim
        if op.attr("select_last_index"):
            flipped = np.flip(x, axis=axis)
            idx = x.shape[axis] - 1 - fn(flipped, axis=axis)
        else:
            idx = fn(x, axis=axis)
        idx = idx.astype(np.int64)
        return np.expand_dims(idx, axis) if op.attr("keepdims") else idx
    return kernel


KERNELS = {
    **{nn.REDUCE[kind]: _reducer(fn) for kind, fn in REDUCERS.items()},
    nn.ARG_MAX: _arg(np.argmax),
    nn.ARG_MIN: _arg(np.argmin),
}
