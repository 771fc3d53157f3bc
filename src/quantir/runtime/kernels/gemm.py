"""``nn.gemm``: ``alpha * op(A) @ op(B) + beta * C`` with one float BLAS call."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn


def gemm(op, a, b, c=None):
    alpha, beta = op.attr("alpha"), op.attr("beta")
    if op.attr("trans_a"):
        a = a.T
    if op.attr("trans_b"):
        b = b.T
    # shapes computed at run time (a Reshape before the Gemm) are checked only here
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ShapeError(f"gemm{_label(op)}: op(A) {list(a.shape)} and op(B) {list(b.shape)} (trans_a "
                         f"{bool(op.attr('trans_a'))}, trans_b {bool(op.attr('trans_b'))}) must be 2-D "
                         f"matrices [M, K] and [K, N] with one K")
    y = np.matmul(a, b)
    if c is not None and beta != 0.0 and not _broadcasts_to(c.shape, y.shape):
        raise ShapeError(f"gemm{_label(op)}: C {list(c.shape)} does not broadcast to the result {list(y.shape)}")
    if alpha != 1.0:
        y *= y.dtype.type(alpha)
    if c is not None and beta != 0.0:
        y += c if beta == 1.0 else c * c.dtype.type(beta)
    return y


def _broadcasts_to(shape, target) -> bool:
    """Unidirectional broadcast (ONNX Gemm's C): each trailing dim is 1 or the target's."""
    return len(shape) <= len(target) and all(d in (1, t) for d, t in zip(reversed(shape), reversed(target)))


def _label(op) -> str:
    return f" (node '{op.label}')" if op.label else ""


KERNELS = {nn.GEMM: gemm}
