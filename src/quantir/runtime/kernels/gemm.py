"""``nn.gemm``: ``alpha * op(A) @ op(B) + beta * C`` with one float BLAS call."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def gemm(op, a, b, c=None):
    alpha, beta = op.attr("alpha"), op.attr("beta")
    if op.attr("trans_a"):
        a = a.T
    if op.attr("trans_b"):
        b = b.T
    y = np.matmul(a, b)
    if alpha != 1.0:
        y *= y.dtype.type(alpha)
    if c is not None and beta != 0.0:
        y += c if beta == 1.0 else c * c.dtype.type(beta)
    return y


KERNELS = {nn.GEMM: gemm}
