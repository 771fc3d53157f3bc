"""``nn.gather``: ``numpy.take`` along ``axis`` (negative indices count from the end).

On quantized data (the int8/int16 GATHER of a quantized module) a negative index is an error, as
in LiteRT's GATHER: the quantizer makes constant indices non-negative and lets run-time indices
through only for lookups in a constant table (token ids), which are non-negative by meaning.
``index_error`` words the out-of-range errors of the quantized GATHER, GatherElements and GatherND:
the op, the indices' name, the bad index and where it sits."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from ...ir.mapping import describe_value
from ...types import QuantizedType, TensorType


def quantized_data(op) -> bool:
    t = op.operands[0].type
    return isinstance(t, TensorType) and isinstance(t.element_type, QuantizedType)


def index_error(op, idx: np.ndarray, bad: np.ndarray, where: str, lo: int, hi: int) -> ShapeError:
    """``idx[bad]`` (a boolean mask) holds indices outside ``[lo, hi]``: say which op, which
    input, the first bad index and its position, and what a caller can do."""
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    value = int(idx[at])
    note = "; a quantized GATHER, as LiteRT's, refuses negative indices" if lo == 0 and value < 0 else ""
    return ShapeError(f"{op.describe()}: index {value} at {list(at)} of indices {describe_value(op.operands[1])} "
                      f"is out of range for {where} (valid: {lo} to {hi}){note}; check the values fed to the "
                      f"model (in a text model: token ids outside the vocabulary, or a sequence longer than "
                      f"the position table)")


def gather(op, data, indices):
    axis = op.attr("axis")
    idx = indices.astype(np.int64)
    n = data.shape[axis] if data.ndim else 0
    if quantized_data(op):
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            raise index_error(op, idx, bad, f"axis {axis} of size {n} of {describe_value(op.operands[0])}", 0, n - 1)
    elif idx.size and (idx.min() < -n or idx.max() >= n):   # ONNX Runtime refuses these too
        bad = int(idx.min() if idx.min() < -n else idx.max())
        raise ShapeError(f"gather: index {bad} is out of range for axis {axis} of size {n} (valid: {-n} to {n - 1})")
    return np.take(data, idx, axis=axis)


KERNELS = {nn.GATHER: gather}
