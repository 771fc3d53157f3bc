"""``nn.tile``: repeat the input ``repeats[i]`` times along dim ``i``."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn

KERNELS = {nn.TILE: lambda op, x: np.tile(x, tuple(op.attr("repeats")))}
