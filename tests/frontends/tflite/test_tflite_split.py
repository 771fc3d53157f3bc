"""A .tflite SPLIT or SPLIT_V reads back as one nn.slice per output, bit-exact with LiteRT's reference
kernels, whether its input lives in the TFLite layout or (after a pool) in NCHW."""
from __future__ import annotations

import numpy as np
import pytest

from quantir.backends.tflite import Padding, Pool2DOptions
from quantir.backends.tflite.schema import SplitOptions, SplitVOptions
from quantir.errors import ModelFormatError, UnsupportedOpError
from quantir.frontends.tflite import import_tflite

from .tfl_graph import OP, Graph, compare

RNG = np.random.default_rng(4)
SHAPE = (2, 4, 6, 8)


def _graph(axis: int, n: int, pooled: bool, out_scale=0.05, signature=()):
    g = Graph()
    x = g.input("x", SHAPE, 0.05, 3, signature=signature)
    src = x
    if pooled:   # MAX_POOL_2D leaves its result in NCHW: the split axis must follow the layout
        src = g.act("p", SHAPE, 0.05, 3)
        g.op(OP.MAX_POOL_2D, [x], [src], Pool2DOptions(padding=Padding.SAME, stride_h=1, stride_w=1,
                                                      filter_height=2, filter_width=2))
    chunk = list(SHAPE)
    chunk[axis % 4] //= n
    outs = [g.act(f"y{i}", tuple(chunk), out_scale, 3) for i in range(n)]
    g.op(OP.SPLIT, [g.const("axis", np.array([axis], np.int32)), src], outs, SplitOptions(num_splits=n))
    return g.finish(outs)


@pytest.mark.parametrize("axis,n", [(3, 2), (3, 4), (1, 2), (2, 3), (-1, 8), (0, 2)])
@pytest.mark.parametrize("pooled", [False, True])
def test_split_matches_litert(axis, n, pooled):
    x = RNG.integers(-128, 128, SHAPE, dtype=np.int8)
    imported = compare(_graph(axis, n, pooled), [x])
    assert sum(op.opdef.name == "nn.slice" for op in imported.module.main.ops) == n


@pytest.mark.parametrize("axis,sizes", [(3, [3, 5]), (3, [2, -1, 1]), (1, [1, 3]), (2, [-1, 1, 1, 1])])
@pytest.mark.parametrize("pooled", [False, True])
def test_split_v_matches_litert(axis, sizes, pooled):
    g = Graph()
    x = g.input("x", SHAPE, 0.05, 3)
    src = x
    if pooled:
        src = g.act("p", SHAPE, 0.05, 3)
        g.op(OP.MAX_POOL_2D, [x], [src], Pool2DOptions(padding=Padding.SAME, stride_h=1, stride_w=1,
                                                      filter_height=2, filter_width=2))
    real = [s if s != -1 else SHAPE[axis] - (sum(sizes) + 1) for s in sizes]
    outs = [g.act(f"y{i}", tuple(k if d == axis else n for d, n in enumerate(SHAPE)), 0.05, 3)
            for i, k in enumerate(real)]
    g.op(OP.SPLIT_V, [src, g.const("sizes", np.array(sizes, np.int32)), g.const("axis", np.array(axis, np.int32))],
         outs, SplitVOptions(num_splits=len(sizes)))
    compare(g.finish(outs), [RNG.integers(-128, 128, SHAPE, dtype=np.int8)])


def test_split_into_unequal_chunks_is_a_format_error():
    g = Graph()
    x = g.input("x", SHAPE, 0.05, 3)
    outs = [g.act(f"y{i}", (2, 4, 6, 3), 0.05, 3) for i in range(3)]
    g.op(OP.SPLIT, [g.const("axis", np.array([3], np.int32)), x], outs, SplitOptions(num_splits=3))
    with pytest.raises(ModelFormatError, match="axis 3 of size 8 does not split into 3 equal chunks"):
        import_tflite(g.finish(outs))


def test_split_of_a_dynamic_axis_is_refused_by_name():
    with pytest.raises(UnsupportedOpError, match="SPLIT of the dynamic axis 0"):
        import_tflite(_graph(0, 2, False, signature=(-1, 4, 6, 8)))
