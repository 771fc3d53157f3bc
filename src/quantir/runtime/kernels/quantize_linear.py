"""``nn.quantize_linear``: ONNX QuantizeLinear on storage integers through
``numerics.quantize_onnx`` (float32 division, ties to even, zero point after rounding,
saturation to the zero point's type); per-tensor, per-axis or blocked."""
from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ...ir.dialects import nn
from ...ir.dialects.nn_base import element_dtype
from ...ir.dialects.nn_quant import quantization_layout
from ...numerics.quantize import quantize_onnx


def granularity(op, x, scale, zp):
    """``(kwargs for numerics, scale, zero point)`` for the scale's layout."""
    layout = quantization_layout(x.shape, scale.shape, op.attr("axis"), op.attr("block_size"))
    if layout == "tensor":
        return {"axis": None}, scale.reshape(()), zp.reshape(())
    kw = {"axis": op.attr("axis") % x.ndim}
    if layout == "block":
        kw["block_size"] = op.attr("block_size")
    return kw, scale, zp


def check_scale(op, scale) -> None:
    """A scale computed at run time (a constant one is refused at import) must be finite and positive."""
    s = np.asarray(scale)
    bad = ~(np.isfinite(s) & (s > 0))
    if bad.any():
        raise VerifyError(f"{op.describe()}: the scale must be finite and positive, found {s[bad].ravel()[0]}; "
                          f"the model's quantization parameters are corrupt")


def quantize_linear(op, x, scale, zp):
    check_scale(op, scale)
    kw, scale, zp = granularity(op, x, scale, zp)
    dtype = element_dtype(op.results[0].type)
    info = np.iinfo(dtype)
    return quantize_onnx(x, scale, zp, int(info.min), int(info.max), **kw).astype(dtype)


KERNELS = {nn.QUANTIZE_LINEAR: quantize_linear}
