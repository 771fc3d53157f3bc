"""``nn.cum_sum``: running sum along a run-time ``axis``; ``exclusive`` leaves out the element
itself (the first sum is 0), ``reverse`` sums from the end."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_base import normalize_axis


def cum_sum(op, x, axis):
    a = normalize_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim, "cum_sum axis")
    reverse, exclusive = op.attr("reverse"), op.attr("exclusive")
    v = np.flip(x, a) if reverse else x
    out = np.cumsum(v, axis=a, dtype=x.dtype)
    if exclusive:
        shifted = np.zeros_like(out)
        lead = [slice(None)] * x.ndim
        lag = [slice(None)] * x.ndim
        lead[a], lag[a] = slice(1, None), slice(0, -1)
        shifted[tuple(lead)] = out[tuple(lag)]
        out = shifted
    return np.flip(out, a) if reverse else out


KERNELS = {nn.CUM_SUM: cum_sum}
