"""``nn.einsum``: ``numpy.einsum`` on the parsed equation, in the operands' element type.
Matmul-like equations never reach this kernel: the importer writes them as ``nn.matmul``."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_encoder import parse_einsum


def einsum(op, *inputs):
    spec = parse_einsum(op.attr("equation"), len(inputs))
    out = np.einsum(spec.spelled(), *inputs, optimize=len(inputs) > 2)
    return np.asarray(out, dtype=inputs[0].dtype)


KERNELS = {nn.EINSUM: einsum}
