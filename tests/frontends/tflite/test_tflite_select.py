"""Reading MAXIMUM, MINIMUM, the comparisons, ARG_MAX and SHAPE from .tflite files that quantir did not
write: every bound tensor equal to LiteRT BUILTIN_REF's, whatever layout the input lives in."""
from __future__ import annotations

import numpy as np
import pytest

from quantir.backends.tflite.schema import ArgMaxOptions, Padding, Pool2DOptions, ShapeOptions
from quantir.backends.tflite.schema import TensorType as TFLType

from .tfl_graph import OP, Graph, as_nchw_source, compare, litert, op_names

SHAPE = (2, 4, 5, 3)   # NHWC
RNG = np.random.default_rng(7)


def _feeds(*shapes):
    return [RNG.integers(-128, 128, size=s, dtype=np.int8) for s in shapes]


@pytest.mark.parametrize("code", [OP.LESS, OP.GREATER_EQUAL, OP.EQUAL, OP.NOT_EQUAL, OP.MAXIMUM, OP.MINIMUM])
def test_an_element_wise_selection_on_an_nchw_source_matches_litert(code):
    litert()
    g = Graph()
    x = g.input("x", SHAPE, 0.05, 3)
    y = g.input("y", SHAPE, 0.05, 3)
    pooled = as_nchw_source(g, x, SHAPE, 0.05, 3)   # its IR form is NCHW: the op must follow it
    selecting = code in (OP.MAXIMUM, OP.MINIMUM)
    out = g.act("out", SHAPE, 0.05 if selecting else None, 3, dtype=np.int8 if selecting else np.bool_)
    g.op(code, [pooled, y], [out])
    result = compare(g.finish([out]), _feeds(SHAPE, SHAPE))
    assert f"qnn.{code.name.lower()}" in op_names(result)


@pytest.mark.parametrize("axis, index_type", [(3, TFLType.INT64), (1, TFLType.INT32), (-1, TFLType.INT32)])
def test_arg_max_over_a_tflite_axis_matches_litert(axis, index_type):
    litert()
    g = Graph()
    x = g.input("x", SHAPE, 0.1, -5)
    pooled = as_nchw_source(g, x, SHAPE, 0.1, -5)
    out_shape = SHAPE[:axis % 4] + SHAPE[axis % 4 + 1:]
    out = g.act("idx", out_shape, dtype=np.int64 if index_type is TFLType.INT64 else np.int32)
    g.op(OP.ARG_MAX, [pooled, g.const("axis", np.array([axis], np.int32))], [out],
         ArgMaxOptions(output_type=index_type))
    x_feed = _feeds(SHAPE)[0]
    x_feed[..., 1] = x_feed[..., 0]   # ties: the first index wins in both
    result = compare(g.finish([out]), [x_feed])
    assert "qnn.arg_max" in op_names(result)


@pytest.mark.parametrize("out_type", [TFLType.INT32, TFLType.INT64])
def test_shape_of_a_dynamic_batch_matches_litert(out_type):
    litert()
    g = Graph()
    x = g.input("x", (1, 4, 5, 3), 0.1, 0, signature=(-1, 4, 5, 3))
    pooled = g.act("pooled", (1, 4, 5, 3), 0.1, 0, signature=(-1, 4, 5, 3))   # an NCHW source, as above
    g.op(OP.MAX_POOL_2D, [x], [pooled], Pool2DOptions(padding=Padding.VALID, filter_width=1, filter_height=1))
    out = g.act("dims", (4,), dtype=np.int32 if out_type is TFLType.INT32 else np.int64)
    g.op(OP.SHAPE, [pooled], [out], ShapeOptions(out_type=out_type))
    result = compare(g.finish([out]), _feeds((3, 4, 5, 3)))
    assert "nn.shape" in op_names(result)
