"""RESHAPE, TRANSPOSE, SQUEEZE, EXPAND_DIMS (from either layout) and dynamic batch dims."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .tfl_graph import OP, Graph, as_nchw_source, compare, hsettings, int8_data, litert, op_names, seeds
from quantir.backends.tflite import (Conv2DOptions, FullyConnectedOptions, Padding, ReshapeOptions, SqueezeOptions,
                                     TransposeOptions)

pytestmark = pytest.mark.oracle
litert()

S, Z = 0.05, -7


@st.composite
def shape4(draw, lo=1, hi=4):
    return tuple(draw(st.lists(st.integers(lo, hi), min_size=4, max_size=4)))


@hsettings(40)
@given(shape=shape4(), data=st.data(), how=st.sampled_from(["tensor", "options", "runtime"]), nchw=st.booleans(),
       seed=seeds)
def test_reshape(shape, data, how, nchw, seed):
    total = int(np.prod(shape))
    divisors = [d for d in range(1, total + 1) if total % d == 0]
    first = data.draw(st.sampled_from(divisors))
    new_shape = data.draw(st.sampled_from([(first, total // first), (total,), (first, -1), (-1, 1, first)]))
    out_shape = tuple(total // int(np.prod([d for d in new_shape if d != -1])) if d == -1 else d for d in new_shape)
    g = Graph()
    x = g.input("x", shape, S, Z)
    feeds = [int8_data(np.random.default_rng(seed), shape)]
    if nchw:
        x = as_nchw_source(g, x, shape, S, Z)
    y = g.act("y", out_shape, S, Z)
    if how == "tensor":
        g.op(OP.RESHAPE, [x, g.const("shape", np.array(new_shape, np.int32))], [y])
    elif how == "options":
        g.op(OP.RESHAPE, [x], [y], ReshapeOptions(new_shape=new_shape))
    else:  # a shape fed at run time: the import relies on the declared output shape
        g.op(OP.RESHAPE, [x, g.input("shape", (len(new_shape),), dtype=np.int32)], [y])
        feeds.append(np.array(new_shape, np.int32))
    compare(g.finish([y]), feeds)


@hsettings(25)
@given(shape=shape4(), perm=st.permutations(range(4)), nchw=st.booleans(), seed=seeds)
def test_transpose(shape, perm, nchw, seed):
    g = Graph()
    x = g.input("x", shape, S, Z)
    if nchw:
        x = as_nchw_source(g, x, shape, S, Z)
    y = g.act("y", tuple(shape[p] for p in perm), S, Z)
    g.op(OP.TRANSPOSE, [x, g.const("perm", np.array(perm, np.int32))], [y], TransposeOptions())
    result = compare(g.finish([y]), [int8_data(np.random.default_rng(seed), shape)])
    # TRANSPOSE itself moves no data; the output alone is transposed, unless its layout is already
    # the TFLite one (plus the transpose into the pool)
    layout = tuple((0, 2, 3, 1)[p] if nchw else p for p in perm)
    assert op_names(result).count("nn.transpose") == nchw + (layout != (0, 1, 2, 3))


def test_transpose_changing_quantization_is_kept_as_a_transpose():
    g = Graph()
    x = g.input("x", (1, 2, 3, 4), S, Z)
    y = g.act("y", (1, 4, 2, 3), S, Z + 1)
    g.op(OP.TRANSPOSE, [x, g.const("perm", np.array([0, 3, 1, 2], np.int32))], [y], TransposeOptions())
    result = compare(g.finish([y]), [int8_data(np.random.default_rng(0), (1, 2, 3, 4))])
    assert op_names(result).count("nn.transpose") == 1 and "nn.identity" not in op_names(result)


@hsettings(25)
@given(shape=shape4(1, 2), data=st.data(), nchw=st.booleans(), seed=seeds)
def test_squeeze(shape, data, nchw, seed):
    ones = [a for a, d in enumerate(shape) if d == 1]
    dims = data.draw(st.one_of(st.just([]), st.lists(st.sampled_from(ones), unique=True, min_size=1)) if ones
                     else st.just([]))
    dims = [a - 4 if data.draw(st.booleans()) else a for a in dims]
    gone = {a % 4 for a in dims} if dims else set(ones)
    g = Graph()
    x = g.input("x", shape, S, Z)
    if nchw:
        x = as_nchw_source(g, x, shape, S, Z)
    y = g.act("y", tuple(d for a, d in enumerate(shape) if a not in gone), S, Z)
    g.op(OP.SQUEEZE, [x], [y], SqueezeOptions(squeeze_dims=dims))
    compare(g.finish([y]), [int8_data(np.random.default_rng(seed), shape)])


@hsettings(15)
@given(shape=shape4(), axis=st.integers(-5, 4), nchw=st.booleans(), seed=seeds)
def test_expand_dims(shape, axis, nchw, seed):
    g = Graph()
    x = g.input("x", shape, S, Z)
    if nchw:
        x = as_nchw_source(g, x, shape, S, Z)
    out = list(shape)
    out.insert(axis % 5, 1)
    y = g.act("y", out, S, Z)
    g.op(OP.EXPAND_DIMS, [x, g.const("axis", np.array([axis], np.int32))], [y])
    compare(g.finish([y]), [int8_data(np.random.default_rng(seed), shape)])


@pytest.mark.parametrize("batch", [1, 3])
def test_dynamic_batch_stays_dynamic(batch):
    """conv -> reshape [-1, K] -> FC with a -1 batch in every shape_signature."""
    rng = np.random.default_rng(batch)
    g = Graph()
    x = g.input("x", (1, 4, 4, 2), 0.04, 3, signature=(-1, 4, 4, 2))
    c = g.act("c", (1, 2, 2, 3), 0.1, -2, signature=(-1, 2, 2, 3))
    w_scales = np.array([0.01, 0.02, 0.015], np.float32)
    g.op(OP.CONV_2D, [x, g.const("w", int8_data(rng, (3, 3, 3, 2), -127, 127), w_scales),
                      g.const("b", rng.integers(-500, 500, 3).astype(np.int32), 0.04 * w_scales)], [c],
         Conv2DOptions(padding=Padding.SAME, stride_h=2, stride_w=2))
    f = g.act("f", (1, 12), 0.1, -2, signature=(-1, 12))
    g.op(OP.RESHAPE, [c, g.const("shape", np.array([-1, 12], np.int32))], [f])
    y = g.act("y", (1, 5), 0.2, 4, signature=(-1, 5))
    g.op(OP.FULLY_CONNECTED, [f, g.const("fw", int8_data(rng, (5, 12), -127, 127), 0.01), -1], [y],
         FullyConnectedOptions())
    result = compare(g.finish([y]), [int8_data(rng, (batch, 4, 4, 2))])
    fn = result.module.main
    assert fn.arguments[0].type.shape == (None, 4, 4, 2)
    assert fn.outputs[0].type.shape == (None, 5)
