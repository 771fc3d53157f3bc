"""``nn.lp_normalization``: ``x / ||x||_p`` along ``axis`` (ONNX LpNormalization, p = 1 or 2).

A row whose norm is 0 is all zeros and stays all zeros (ONNX Runtime's kernel too), instead of
the NaNs that 0/0 would give."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def lp_normalization(op, x):
    axis, p = op.attr("axis"), op.attr("p")
    norm = np.abs(x).sum(axis=axis, keepdims=True) if p == 1 else np.sqrt(np.square(x).sum(axis=axis, keepdims=True))
    safe = np.where(norm == 0, np.ones_like(norm), norm)
    return (x / safe).astype(x.dtype, copy=False)


KERNELS = {nn.LP_NORMALIZATION: lp_normalization}
