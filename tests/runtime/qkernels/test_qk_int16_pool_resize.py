"""int16 MAX_POOL_2D, AVERAGE_POOL_2D and RESIZE_NEAREST_NEIGHBOR against LiteRT's BUILTIN_REF, bit for bit.

LiteRT runs the int8 templates on ``int16_t`` (``reference_integer_ops::MaxPool``/``AveragePool``,
``reference_ops::ResizeNearestNeighbor``) and checks no zero point for int16 pools, so nonzero ones
are compared too; quantir's 16x8 models use zero point 0."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from .qk_oracle import ACTIVATIONS, OP, T, assert_same, hsettings, log_uniform, nchw, nhwc, run_op, seeds
from .test_qk_int16_linear import int16_data
from quantir.backends.tflite import ActivationFunctionType, Padding, Pool2DOptions
from quantir.backends.tflite.schema import ResizeNearestNeighborOptions
from quantir.runtime import qkernels as qk
from quantir.runtime.qkernels._common import AccumulatorOverflowError

pytestmark = pytest.mark.oracle

ACT = {"none": ActivationFunctionType.NONE, "relu": ActivationFunctionType.RELU,
       "relu6": ActivationFunctionType.RELU6, "relu_n1_to_1": ActivationFunctionType.RELU_N1_TO_1}
I16 = np.int16
zero_points16 = st.one_of(st.just(0), st.sampled_from([-32768, 32767]), st.integers(-32768, 32767))


@hsettings(120)
@given(n=st.integers(1, 2), c=st.integers(1, 4), h=st.integers(1, 9), w=st.integers(1, 9), kh=st.integers(1, 5),
       kw=st.integers(1, 5), stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       padding=st.sampled_from(["same", "valid"]), act=st.sampled_from(ACTIVATIONS),
       scale=log_uniform(1e-5, 1e-1), zp=zero_points16, spread=st.sampled_from(["full", "small"]), seed=seeds,
       maximum=st.booleans())
def test_pooling_int16_matches_litert(n, c, h, w, kh, kw, stride, padding, act, scale, zp, spread, seed, maximum):
    assume(padding == "same" or (h >= kh and w >= kw))
    x = int16_data(np.random.default_rng(seed), (n, c, h, w), spread)
    pads = qk.tflite_pads(padding, (h, w), (kh, kw), stride)
    prepare, kernel, code, name = ((qk.prepare_max_pool, qk.max_pool2d, OP.MAX_POOL_2D, "MAX_POOL_2D (int16)")
                                   if maximum else (qk.prepare_average_pool, qk.average_pool2d, OP.AVERAGE_POOL_2D,
                                                    "AVERAGE_POOL_2D (int16)"))
    try:
        p = prepare(scale, zp, scale, zp, act, storage=I16)
    except qk.QKernelError as e:   # a fused range outside int16 at this scale and zero point
        assert "range" in str(e), e
        return
    got = kernel(x, kernel=(kh, kw), strides=stride, pads=pads, **p.as_kwargs())
    assert got.dtype == I16
    options = Pool2DOptions(padding=Padding.SAME if padding == "same" else Padding.VALID, stride_h=stride[0],
                            stride_w=stride[1], filter_height=kh, filter_width=kw, fused_activation_function=ACT[act])
    oh, ow = got.shape[2:]
    (expected,) = run_op(code, [T((n, h, w, c), I16, scale=scale, zero_point=zp)],
                         [T((n, oh, ow, c), I16, scale=scale, zero_point=zp)], [nhwc(x)], options)
    assert_same(name, got, nchw(expected))


def test_max_pool_int16_all_padding_window_gives_the_int16_minimum():
    """A window that covers only padding (explicit pads, as the exporter's PADV2 + VALID form) starts at
    -32768 in LiteRT; with the clamp of no activation it stays there."""
    x = np.full((1, 1, 1, 1), 5, I16)
    p = qk.prepare_max_pool(0.01, 0, 0.01, 0, storage=I16)
    got = qk.max_pool2d(x, kernel=(1, 1), strides=(1, 1), pads=(1, 0, 0, 0), **p.as_kwargs())
    assert got[0, 0, :, 0].tolist() == [-32768, 5]


def test_pooling_int16_refusals():
    with pytest.raises(qk.QKernelError, match="must be equal"):
        qk.prepare_max_pool(0.1, 0, 0.2, 0, storage=I16)
    with pytest.raises(qk.QKernelError, match="must be in"):
        qk.prepare_average_pool(0.1, 40000, 0.1, 40000, storage=I16)
    with pytest.raises(AccumulatorOverflowError, match="int32 sum"):
        qk.average_pool2d(np.zeros((1, 1, 300, 300), I16), kernel=(300, 300), act_min=-32768, act_max=32767)
    with pytest.raises(qk.QKernelError, match="activation range"):   # an int16 array with the int8 clamp is fine,
        qk.max_pool2d(np.zeros((1, 1, 2, 2), np.int8), kernel=(2, 2), act_min=-32768, act_max=32767)  # not v.v.


FLAGS = [(False, False), (True, False), (False, True), (True, True)]


@hsettings(60)
@given(n=st.integers(1, 2), c=st.integers(1, 3), hw_in=st.tuples(st.integers(1, 9), st.integers(1, 9)),
       hw_out=st.tuples(st.integers(1, 19), st.integers(1, 19)), flags=st.sampled_from(FLAGS),
       scale=log_uniform(1e-5, 1e-1), seed=seeds)
def test_resize_nearest_int16_matches_litert(n, c, hw_in, hw_out, flags, scale, seed):
    x = int16_data(np.random.default_rng(seed), (n, c) + hw_in)
    got = qk.resize_nearest(x, size=hw_out, align_corners=flags[0], half_pixel_centers=flags[1])
    assert got.dtype == I16
    (y,) = run_op(OP.RESIZE_NEAREST_NEIGHBOR,
                  [T((n, *hw_in, c), I16, scale=scale), T((2,), np.int32, data=np.array(hw_out, np.int32))],
                  [T((n, *hw_out, c), I16, scale=scale)], [nhwc(x)],
                  ResizeNearestNeighborOptions(align_corners=flags[0], half_pixel_centers=flags[1]),
                  version=4)   # int16 needs version 4 (op_version.cc)
    assert_same("RESIZE_NEAREST_NEIGHBOR (int16)", got, nchw(y))


@pytest.mark.parametrize("zp,value", [(0, -32768), (0, 100), (7, -32768)])
def test_padv2_int16_matches_litert(zp, value):
    """PADV2 with an int16 constant (the exporter's padding before an int16 MAX_POOL_2D: -32768)."""
    from quantir.backends.tflite.schema import PadV2Options
    x = (np.arange(-6, 6, dtype=I16) * 5000).reshape(1, 2, 3, 2)
    pads = np.array([[0, 0], [1, 0], [0, 2], [0, 0]], np.int32)
    v = qk.prepare_pad(0.1, zp, 0.1, zp, constant=(value, 0.1, zp), storage=I16)
    got = qk.pad(x, pads=[tuple(p) for p in pads], value=v)
    (y,) = run_op(OP.PADV2, [T(x.shape, I16, scale=0.1, zero_point=zp), T((4, 2), np.int32, data=pads),
                             T((1,), I16, scale=0.1, zero_point=zp, data=np.array([value], I16))],
                  [T(got.shape, I16, scale=0.1, zero_point=zp)], [x], PadV2Options())
    assert_same("PADV2 (int16)", got, y)
    with pytest.raises(qk.QKernelError, match="constant value"):
        qk.prepare_pad(0.1, 0, 0.1, 0, constant=(-32768, 0.1, 0))   # int8 storage
