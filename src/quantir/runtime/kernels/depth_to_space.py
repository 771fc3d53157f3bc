"""``nn.depth_to_space`` and ``nn.space_to_depth``: one generic block rearrangement —
reshape to 6-D, permute, reshape back — with the permutation per op and mode in a table."""
from __future__ import annotations

from ...ir.dialects import nn


def _d2s_shapes(n, c, h, w, b, mode):
    split = (n, b, b, c // (b * b), h, w) if mode == "DCR" else (n, c // (b * b), b, b, h, w)
    return split, (n, c // (b * b), h * b, w * b)


def _s2d_shapes(n, c, h, w, b, mode):
    return (n, c, h // b, b, w // b, b), (n, c * b * b, h // b, w // b)


# (op, mode) -> (6-D shape rule, permutation)
BLOCK_MOVES = {
    (nn.DEPTH_TO_SPACE, "DCR"): (_d2s_shapes, (0, 3, 4, 1, 5, 2)),
    (nn.DEPTH_TO_SPACE, "CRD"): (_d2s_shapes, (0, 1, 4, 2, 5, 3)),
    (nn.SPACE_TO_DEPTH, "DCR"): (_s2d_shapes, (0, 3, 5, 1, 2, 4)),
    (nn.SPACE_TO_DEPTH, "CRD"): (_s2d_shapes, (0, 1, 3, 5, 2, 4)),
}


def block_move(op, x):
    shapes, perm = BLOCK_MOVES[(op.opdef, op.attr("mode"))]
    split, final = shapes(*x.shape, op.attr("blocksize"), op.attr("mode"))
    return x.reshape(split).transpose(perm).reshape(final)


KERNELS = {nn.DEPTH_TO_SPACE: block_move, nn.SPACE_TO_DEPTH: block_move}
