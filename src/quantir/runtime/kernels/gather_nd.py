"""``nn.gather_nd``: the last dim of ``indices`` addresses the leading ``r`` dims of ``data``
after ``batch_dims`` shared batch dims (ONNX GatherND; negative indices count from the end)."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from ...ir.mapping import describe_value
from .gather import index_error
from .limits import check_allocation, result_what


def gather_nd(op, data, indices):
    b = op.attr("batch_dims")
    r = indices.shape[-1]
    batch = data.shape[:b]
    if indices.shape[:b] != batch:
        raise ShapeError(f"gather_nd: the batch dims of indices {indices.shape[:b]} and data {batch} differ")
    addressed = data.shape[b:b + r]
    rest = data.shape[b + r:]
    out_shape = indices.shape[:-1] + rest
    check_allocation(result_what(op), out_shape, data.dtype)
    nb = int(np.prod(batch, dtype=np.int64))
    idx = indices.astype(np.int64).reshape(nb, -1, r)
    sizes = np.asarray(addressed, dtype=np.int64)
    bad = (idx < -sizes) | (idx >= sizes)
    if bad.any():
        j = int(np.argwhere(bad)[0][-1])   # the addressed dim of the first bad index
        raise index_error(op, indices, bad.reshape(indices.shape),
                          f"addressed dim {b + j} of size {addressed[j]} of {describe_value(op.operands[0])}",
                          -int(addressed[j]), int(addressed[j]) - 1)
    idx = np.where(idx < 0, idx + sizes, idx)
    flat = data.reshape((nb,) + tuple(addressed) + tuple(rest))
    # one advanced index per addressed dim, broadcast with the batch number
    picked = flat[(np.arange(nb)[:, None], *(idx[..., j] for j in range(r)))]
    return picked.reshape(out_shape)


KERNELS = {nn.GATHER_ND: gather_nd}
