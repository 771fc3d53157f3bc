"""``nn.trilu``: zero the elements of the last two dims below (``upper``) or above diagonal ``k``."""
from __future__ import annotations

import numpy as np

from ...ir.dialects import nn


def trilu(op, x, k=None):
    diag = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    return np.triu(x, diag) if op.attr("upper") else np.tril(x, diag)


KERNELS = {nn.TRILU: trilu}
