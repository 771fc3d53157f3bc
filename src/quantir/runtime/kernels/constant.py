"""``arith.constant``: the array held by the ``value`` attribute (by reference, never copied)."""
from __future__ import annotations

import numpy as np

from ...ir.attributes import DenseElementsAttr, DenseResourceAttr, FloatAttr, IntegerAttr
from ...ir.dialects import arith
from ...ir.dialects.nn_base import element_dtype


def constant(op):
    value = op.attributes["value"]
    if isinstance(value, (DenseElementsAttr, DenseResourceAttr)):
        if value.array is None:
            raise ValueError(f"constant {op.results[0].name_hint or ''} has an elided dense_resource blob")
        return value.array
    if isinstance(value, (IntegerAttr, FloatAttr)):
        return np.array(value.value, dtype=element_dtype(value.type))
    raise TypeError(f"arith.constant with a {type(value).__name__} value")


KERNELS = {arith.CONSTANT: constant}
