"""``nn.pad``: constant, reflect, edge or wrap padding; negative pads crop first."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from ...ir.dialects.nn_index import pad_amounts
from .limits import check_allocation, result_what


def pad(op, x):
    amounts = pad_amounts(x.ndim, op.opdef.attr_values(op))
    x = x[tuple(slice(max(0, -b), d - max(0, -a)) for d, (b, a) in zip(x.shape, amounts))]
    widths = [(max(0, b), max(0, a)) for b, a in amounts]
    check_allocation(result_what(op), (d + b + a for d, (b, a) in zip(x.shape, widths)), x.dtype)
    mode = op.attr("mode")
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=x.dtype.type(op.attr("constant_value")))
    for axis, (d, (b, a)) in enumerate(zip(x.shape, widths)):
        if d == 0 and b + a:   # nothing to reflect, repeat or wrap (ONNX Runtime refuses it too)
            raise ShapeError(f"{op.describe()}: cannot use '{mode}' mode to pad axis {axis} of size 0 "
                             f"(input shape {list(x.shape)}); only 'constant' mode pads an empty axis")
    return np.pad(x, widths, mode=mode)


KERNELS = {nn.PAD: pad}
