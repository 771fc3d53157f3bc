"""``nn.softmax`` and ``nn.log_softmax`` along ``axis``, shifted by the max for stability."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def softmax(op, x):
    axis = op.attr("axis")
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(op, x):
    axis = op.attr("axis")
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


KERNELS = {nn.SOFTMAX: softmax, nn.LOG_SOFTMAX: log_softmax}
