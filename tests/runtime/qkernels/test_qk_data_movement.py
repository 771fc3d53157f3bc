"""Data-movement kernels against LiteRT: GATHER, SPACE_TO_DEPTH, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND.

LiteRT runs them on NHWC (or NHC); each test also checks the NCHW form quantir's interpreter
calls against the transposed LiteRT result.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .qk_oracle import OP, T, assert_same, hsettings, int8_data, nchw, nhwc, run_op, seeds, zero_points
from quantir.backends.tflite.schema import GatherOptions, SpaceToDepthOptions
from quantir.runtime import qkernels as qk

pytestmark = pytest.mark.oracle


def channels_second(x: np.ndarray) -> np.ndarray:
    """NHWC -> NCHW, or NHC -> NCH."""
    return nchw(x) if x.ndim == 4 else np.ascontiguousarray(x.transpose(0, 2, 1))


def channels_last(x: np.ndarray) -> np.ndarray:
    return nhwc(x) if x.ndim == 4 else np.ascontiguousarray(x.transpose(0, 2, 1))


# -- GATHER --------------------------------------------------------------------------------------

@st.composite
def gather_cases(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    axis = draw(st.integers(0, rank - 1))
    batch_dims = draw(st.integers(0, axis))
    extra = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    index_shape = shape[:batch_dims] + tuple(extra)
    signed_axis = axis - rank if draw(st.booleans()) else axis
    return shape, signed_axis, batch_dims, index_shape


@hsettings(80)
@given(case=gather_cases(), index_dtype=st.sampled_from([np.int16, np.int32, np.int64]), zp=zero_points,
       seed=seeds, uint8=st.booleans())
def test_gather_matches_litert(case, index_dtype, zp, seed, uint8):
    shape, axis, batch_dims, index_shape = case
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if uint8 else np.int8
    x = int8_data(rng, shape)
    x = (x.astype(np.int16) + 128).astype(np.uint8) if uint8 else x
    zp = zp + 128 if uint8 else zp
    idx = rng.integers(0, shape[axis], size=index_shape).astype(index_dtype)
    qk.prepare_gather((0.05, zp), (0.05, zp))
    got = qk.gather(x, idx, axis=axis, batch_dims=batch_dims)
    # A scalar index goes in as a constant: the interpreter's set_tensor cannot feed a 0-d array.
    scalar = idx.ndim == 0
    index_t = T(index_shape, index_dtype, data=idx if scalar else None)
    (expected,) = run_op(OP.GATHER, [T(shape, dtype, scale=0.05, zero_point=zp), index_t],
                         [T(got.shape, dtype, scale=0.05, zero_point=zp)], [x] if scalar else [x, idx],
                         GatherOptions(axis=axis, batch_dims=batch_dims))
    assert_same("GATHER", got, expected)


def test_gather_refuses_what_litert_refuses():
    x = np.arange(6, dtype=np.int8).reshape(3, 2)
    with pytest.raises(qk.QKernelError, match=r"gather: index -1 is outside \[0, 3\) of axis 0; LiteRT accepts "
                                              "neither negative nor out-of-range indices"):
        qk.gather(x, np.array([0, -1], np.int32))
    with pytest.raises(qk.QKernelError, match=r"gather: index 2 is outside \[0, 2\) of axis 1"):
        qk.gather(x, np.array([2], np.int64), axis=1)
    for bad in (np.array([0, -1], np.int32), np.array([0, 3], np.int32)):
        with pytest.raises(RuntimeError):  # LiteRT's Eval fails on both
            run_op(OP.GATHER, [T((3, 2), scale=0.1), T((2,), np.int32)], [T((2, 2), scale=0.1)], [x, bad],
                   GatherOptions(axis=0))
    with pytest.raises(qk.QKernelError, match=r"gather: input 0 has scale 0.1 and zero point 0, the output 0.2"):
        qk.prepare_gather((0.1, 0), (0.2, 0))


def test_gather_with_batch_dims_pairs_leading_axes():
    x = np.arange(12, dtype=np.int8).reshape(2, 3, 2)           # [batch, axis, inner]
    idx = np.array([[2, 0], [1, 1]], np.int32)
    got = qk.gather(x, idx, axis=1, batch_dims=1)
    assert got.tolist() == [[[4, 5], [0, 1]], [[8, 9], [8, 9]]]


# -- SPACE_TO_DEPTH ------------------------------------------------------------------------------

@hsettings(60)
@given(n=st.integers(1, 2), oh=st.integers(1, 4), ow=st.integers(1, 4), c=st.integers(1, 5), b=st.integers(1, 4),
       zp=zero_points, seed=seeds)
def test_space_to_depth_matches_litert_in_both_layouts(n, oh, ow, c, b, zp, seed):
    x = int8_data(np.random.default_rng(seed), (n, oh * b, ow * b, c))
    qk.prepare_space_to_depth((0.02, zp), (0.02, zp))
    got = qk.space_to_depth_nhwc(x, block_size=b)
    (expected,) = run_op(OP.SPACE_TO_DEPTH, [T(x.shape, scale=0.02, zero_point=zp)],
                         [T(got.shape, scale=0.02, zero_point=zp)], [x], SpaceToDepthOptions(block_size=b))
    assert_same("SPACE_TO_DEPTH", got, expected)
    assert_same("SPACE_TO_DEPTH (NCHW)", qk.space_to_depth(nchw(x), block_size=b), nchw(expected))


@hsettings(15)
@given(c=st.integers(1, 3), b=st.integers(1, 3), seed=seeds)
def test_space_to_depth_nchw_is_onnx_space_to_depth(c, b, seed):
    from onnx import helper  # noqa: PLC0415 - ONNX only for this cross-check
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    x = int8_data(np.random.default_rng(seed), (1, c, 2 * b, 3 * b))
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=b)
    model = helper.make_model(helper.make_graph(
        [node], "s2d", [helper.make_tensor_value_info("x", 3, x.shape)],
        [helper.make_tensor_value_info("y", 3, None)]), opset_imports=[helper.make_opsetid("", 13)])
    (expected,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert np.array_equal(qk.space_to_depth(x, block_size=b), expected)


def test_space_to_depth_refuses_what_litert_refuses():
    with pytest.raises(qk.QKernelError, match="space_to_depth: height 3 and width 4 must be multiples of block_size 2"):
        qk.space_to_depth_nhwc(np.zeros((1, 3, 4, 1), np.int8), block_size=2)
    with pytest.raises(qk.QKernelError, match=r"space_to_depth: input must be NCHW \(rank 4\), found shape \(4, 4\)"):
        qk.space_to_depth(np.zeros((4, 4), np.int8), block_size=2)


# -- SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND -------------------------------------------------------

@st.composite
def space_batch_cases(draw):
    """(NHWC or NHC shape, block_shape, pads) with every padded spatial size a multiple of its block."""
    spatial = draw(st.integers(1, 2))
    block = [draw(st.integers(1, 3)) for _ in range(spatial)]
    sizes, pads = [], []
    for b in block:
        before, after = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        least = -(-(before + after + 1) // b)                  # ceil: at least one unpadded element
        padded = b * draw(st.integers(least, least + 2))
        sizes.append(padded - before - after)
        pads.append([before, after])
    shape = (draw(st.integers(1, 2)), *sizes, draw(st.integers(1, 4)))
    return shape, block, pads


@hsettings(70)
@given(case=space_batch_cases(), zp=zero_points, seed=seeds)
def test_space_to_batch_nd_matches_litert_in_both_layouts(case, zp, seed):
    shape, block, pads = case
    x = int8_data(np.random.default_rng(seed), shape)
    pad_value = qk.prepare_space_to_batch_nd((0.03, zp), (0.03, zp))
    got = qk.space_to_batch_nd_nhwc(x, block_shape=block, paddings=pads, pad_value=pad_value)
    (expected,) = run_op(OP.SPACE_TO_BATCH_ND, [T(shape, scale=0.03, zero_point=zp),
                                                T((len(block),), np.int32, data=np.array(block, np.int32)),
                                                T((len(block), 2), np.int32, data=np.array(pads, np.int32))],
                         [T(got.shape, scale=0.03, zero_point=zp)], [x])
    assert_same("SPACE_TO_BATCH_ND", got, expected)
    got_nchw = qk.space_to_batch_nd(channels_second(x), block_shape=block, paddings=pads, pad_value=pad_value)
    assert_same("SPACE_TO_BATCH_ND (NCHW)", got_nchw, channels_second(expected))


@hsettings(70)
@given(case=space_batch_cases(), zp=zero_points, seed=seeds)
def test_batch_to_space_nd_matches_litert_in_both_layouts(case, zp, seed):
    # The space_to_batch case read backwards: input [N·Πb, padded/b..., C], crops = the paddings.
    shape, block, crops = case
    padded = [s + a + b for s, (a, b) in zip(shape[1:-1], crops)]
    in_shape = (shape[0] * int(np.prod(block)), *[p // b for p, b in zip(padded, block)], shape[-1])
    x = int8_data(np.random.default_rng(seed), in_shape)
    qk.prepare_batch_to_space_nd((0.03, zp), (0.03, zp))
    got = qk.batch_to_space_nd_nhwc(x, block_shape=block, crops=crops)
    assert got.shape == shape
    (expected,) = run_op(OP.BATCH_TO_SPACE_ND, [T(in_shape, scale=0.03, zero_point=zp),
                                                T((len(block),), np.int32, data=np.array(block, np.int32)),
                                                T((len(block), 2), np.int32, data=np.array(crops, np.int32))],
                         [T(shape, scale=0.03, zero_point=zp)], [x])
    assert_same("BATCH_TO_SPACE_ND", got, expected)
    got_nchw = qk.batch_to_space_nd(channels_second(x), block_shape=block, crops=crops)
    assert_same("BATCH_TO_SPACE_ND (NCHW)", got_nchw, channels_second(expected))


def test_space_to_batch_pads_with_the_zero_point_and_batch_to_space_inverts_it():
    x = np.array([[1, 2], [3, 4]], np.int8).reshape(1, 1, 2, 2)   # NCHW
    s2b = qk.space_to_batch_nd(x, block_shape=[2, 2], paddings=[[1, 1], [0, 0]], pad_value=-7)
    assert s2b.shape == (4, 1, 2, 1)
    assert s2b[:, 0, :, 0].tolist() == [[-7, 3], [-7, 4], [1, -7], [2, -7]]
    back = qk.batch_to_space_nd(s2b, block_shape=[2, 2], crops=[[1, 1], [0, 0]])
    assert np.array_equal(back, x)


def test_space_batch_refuses_what_litert_refuses():
    with pytest.raises(qk.QKernelError, match="space_to_batch_nd: padded spatial size 3 .* is not a multiple of its "
                                              "block 2"):
        qk.space_to_batch_nd_nhwc(np.zeros((1, 3, 2, 1), np.int8), block_shape=[2, 2], paddings=[[0, 0], [0, 0]],
                                  pad_value=0)
    with pytest.raises(qk.QKernelError, match="batch_to_space_nd: batch 3 is not a multiple of the block product 4"):
        qk.batch_to_space_nd(np.zeros((3, 1, 2, 2), np.int8), block_shape=[2, 2], crops=[[0, 0], [0, 0]])
    with pytest.raises(qk.QKernelError, match=r"batch_to_space_nd: crops must be non-negative, found \[\[-1, 0\]\]"):
        qk.batch_to_space_nd(np.zeros((2, 1, 2), np.int8), block_shape=[2], crops=[[-1, 0]])
    with pytest.raises(qk.QKernelError, match="space_to_batch_nd: input 0 has scale 0.1 and zero point 3, the "
                                              "output 0.1 and 4"):
        qk.prepare_space_to_batch_nd((0.1, 3), (0.1, 4))
    with pytest.raises(RuntimeError):  # LiteRT's Prepare refuses differing parameters too
        run_op(OP.SPACE_TO_BATCH_ND, [T((1, 2, 2, 1), scale=0.1, zero_point=3),
                                      T((2,), np.int32, data=np.array([1, 1], np.int32)),
                                      T((2, 2), np.int32, data=np.zeros((2, 2), np.int32))],
               [T((1, 2, 2, 1), scale=0.1, zero_point=4)], [np.zeros((1, 2, 2, 1), np.int8)])
