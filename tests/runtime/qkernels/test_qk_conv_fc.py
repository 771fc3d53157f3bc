"""CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED against LiteRT, bit for bit."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from .qk_oracle import ACTIVATIONS, OP, T, assert_same, hsettings, int8_data, log_uniform, nchw, nhwc, run_op, seeds, \
    zero_points
from quantir.backends.tflite import ActivationFunctionType, Conv2DOptions, DepthwiseConv2DOptions, \
    FullyConnectedOptions, Padding
from quantir.runtime import qkernels as qk

pytestmark = pytest.mark.oracle

ACT = {"none": ActivationFunctionType.NONE, "relu": ActivationFunctionType.RELU,
       "relu6": ActivationFunctionType.RELU6, "relu_n1_to_1": ActivationFunctionType.RELU_N1_TO_1}


@st.composite
def quant_setup(draw, channels: int):
    """Input/weight/output scales: per-channel weight scales spanning up to 1e3, the largest
    channel multiplier log-uniform in [1e-7, 1] (so near 1, ordinary, and tiny/flushed)."""
    s_in = draw(log_uniform(1e-3, 1.0))
    w_base = draw(log_uniform(1e-4, 1e-1))
    spread = draw(st.sampled_from([1.0, 10.0, 1e3]))
    rng = np.random.default_rng(draw(seeds))
    w_scales = (w_base * spread ** rng.random(channels)).astype(np.float32)
    top = draw(log_uniform(1e-7, 1.0))
    s_out = float(np.float32(s_in * float(w_scales.max()) / top))
    return s_in, w_scales, s_out


def _weights(rng, shape):
    w = int8_data(rng, shape, -127, 127)
    w[rng.random(shape) < 0.01] = -128  # LiteRT's kernels accept -128 too
    return w


def _bias(rng, n, big: bool):
    hi = 2**30 if big else 2**16
    return rng.integers(-hi, hi, size=n).astype(np.int32)


@hsettings(100)
@given(data=st.data(), n=st.integers(1, 2), c_in=st.integers(1, 6), c_out=st.integers(1, 6),
       h=st.integers(1, 10), w=st.integers(1, 10), kh=st.integers(1, 4), kw=st.integers(1, 4),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), dil=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.sampled_from(["same", "valid"]), act=st.sampled_from(ACTIVATIONS),
       zp_in=zero_points, zp_out=zero_points, seed=seeds, big_bias=st.booleans(), per_tensor=st.booleans())
def test_conv2d_matches_litert(data, n, c_in, c_out, h, w, kh, kw, stride, dil, padding, act, zp_in, zp_out, seed,
                               big_bias, per_tensor):
    assume(padding == "same" or (h >= (kh - 1) * dil[0] + 1 and w >= (kw - 1) * dil[1] + 1))
    rng = np.random.default_rng(seed)
    s_in, w_scales, s_out = data.draw(quant_setup(c_out))
    if per_tensor:
        w_scales = w_scales[:1]
    x = int8_data(rng, (n, c_in, h, w))
    wt = _weights(rng, (c_out, c_in, kh, kw))
    bias = _bias(rng, c_out, big_bias)
    pads = qk.tflite_pads(padding, (h, w), (kh, kw), stride, dil)
    p = qk.prepare_conv2d(s_in, w_scales, s_out, zp_out, act, channels=c_out)
    got = qk.conv2d(x, wt, bias, input_zero_point=zp_in, strides=stride, pads=pads, dilations=dil, **p.as_kwargs())

    bias_scales = (np.float64(s_in) * w_scales.astype(np.float64)).astype(np.float32)
    options = Conv2DOptions(padding=Padding.SAME if padding == "same" else Padding.VALID, stride_h=stride[0],
                            stride_w=stride[1], dilation_h_factor=dil[0], dilation_w_factor=dil[1],
                            fused_activation_function=ACT[act])
    oh, ow = got.shape[2:]
    (expected,) = run_op(OP.CONV_2D, [
        T((n, h, w, c_in), scale=s_in, zero_point=zp_in),
        T((c_out, kh, kw, c_in), scale=w_scales, zero_point=0, data=wt.transpose(0, 2, 3, 1)),
        T((c_out,), np.int32, scale=bias_scales, zero_point=0, data=bias),
    ], [T((n, oh, ow, c_out), scale=s_out, zero_point=zp_out)], [nhwc(x)], options)
    assert_same("CONV_2D", got, nchw(expected))


@hsettings(25)
@given(data=st.data(), groups=st.integers(2, 3), cg_in=st.integers(2, 3), cg_out=st.integers(1, 3),
       hw=st.integers(3, 7), k=st.integers(1, 3), act=st.sampled_from(ACTIVATIONS), zp_in=zero_points,
       zp_out=zero_points, seed=seeds)
def test_grouped_conv2d_matches_litert(data, groups, cg_in, cg_out, hw, k, act, zp_in, zp_out, seed):
    rng = np.random.default_rng(seed)
    c_in, c_out = groups * cg_in, groups * cg_out
    s_in, w_scales, s_out = data.draw(quant_setup(c_out))
    x = int8_data(rng, (1, c_in, hw, hw))
    wt = _weights(rng, (c_out, cg_in, k, k))
    bias = _bias(rng, c_out, False)
    pads = qk.tflite_pads("same", (hw, hw), (k, k))
    p = qk.prepare_conv2d(s_in, w_scales, s_out, zp_out, act)
    got = qk.conv2d(x, wt, bias, input_zero_point=zp_in, pads=pads, groups=groups, **p.as_kwargs())
    bias_scales = (np.float64(s_in) * w_scales.astype(np.float64)).astype(np.float32)
    (expected,) = run_op(OP.CONV_2D, [
        T((1, hw, hw, c_in), scale=s_in, zero_point=zp_in),
        T((c_out, k, k, cg_in), scale=w_scales, data=wt.transpose(0, 2, 3, 1)),
        T((c_out,), np.int32, scale=bias_scales, data=bias),
    ], [T((1, hw, hw, c_out), scale=s_out, zero_point=zp_out)], [nhwc(x)],
        Conv2DOptions(padding=Padding.SAME, fused_activation_function=ACT[act]))
    assert_same("CONV_2D (grouped)", got, nchw(expected))


@hsettings(80)
@given(data=st.data(), n=st.integers(1, 2), c_in=st.integers(1, 6), mult=st.integers(1, 3), h=st.integers(1, 10),
       w=st.integers(1, 10), kh=st.integers(1, 4), kw=st.integers(1, 4),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), dil=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.sampled_from(["same", "valid"]), act=st.sampled_from(ACTIVATIONS), zp_in=zero_points,
       zp_out=zero_points, seed=seeds, big_bias=st.booleans(), with_bias=st.booleans())
def test_depthwise_conv2d_matches_litert(data, n, c_in, mult, h, w, kh, kw, stride, dil, padding, act, zp_in, zp_out,
                                         seed, big_bias, with_bias):
    assume(padding == "same" or (h >= (kh - 1) * dil[0] + 1 and w >= (kw - 1) * dil[1] + 1))
    rng = np.random.default_rng(seed)
    c_out = c_in * mult
    s_in, w_scales, s_out = data.draw(quant_setup(c_out))
    x = int8_data(rng, (n, c_in, h, w))
    wt = _weights(rng, (c_out, 1, kh, kw))
    bias = _bias(rng, c_out, big_bias) if with_bias else None
    pads = qk.tflite_pads(padding, (h, w), (kh, kw), stride, dil)
    p = qk.prepare_conv2d(s_in, w_scales, s_out, zp_out, act)
    got = qk.depthwise_conv2d(x, wt, bias, input_zero_point=zp_in, strides=stride, pads=pads, dilations=dil,
                              **p.as_kwargs())
    # groups == C_in through conv2d dispatches to the same kernel
    same = qk.conv2d(x, wt, bias, input_zero_point=zp_in, strides=stride, pads=pads, dilations=dil, groups=c_in,
                     **p.as_kwargs())
    np.testing.assert_array_equal(got, same)

    bias_scales = (np.float64(s_in) * w_scales.astype(np.float64)).astype(np.float32)
    options = DepthwiseConv2DOptions(padding=Padding.SAME if padding == "same" else Padding.VALID,
                                     stride_h=stride[0], stride_w=stride[1], depth_multiplier=mult,
                                     dilation_h_factor=dil[0], dilation_w_factor=dil[1],
                                     fused_activation_function=ACT[act])
    oh, ow = got.shape[2:]
    # LiteRT's int8 depthwise kernel needs the bias tensor; ours treats None as zeros.
    bias_t = T((c_out,), np.int32, scale=bias_scales, data=bias if with_bias else np.zeros(c_out, np.int32))
    (expected,) = run_op(OP.DEPTHWISE_CONV_2D, [
        T((n, h, w, c_in), scale=s_in, zero_point=zp_in),
        T((1, kh, kw, c_out), scale=w_scales, axis=3, data=wt.reshape(c_out, kh, kw).transpose(1, 2, 0)[None]),
        bias_t,
    ], [T((n, oh, ow, c_out), scale=s_out, zero_point=zp_out)], [nhwc(x)], options)
    assert_same("DEPTHWISE_CONV_2D", got, nchw(expected))


def _fc_model(x, wt, bias, s_in, w_scales, s_out, zp_in, zp_out, act, resolver):
    n, k = x.shape
    c_out = wt.shape[0]
    bias_scales = (np.float32(s_in) * w_scales).astype(np.float32) if w_scales.size == 1 else \
        (np.float64(s_in) * w_scales.astype(np.float64)).astype(np.float32)
    (expected,) = run_op(OP.FULLY_CONNECTED, [
        T((n, k), scale=s_in, zero_point=zp_in),
        T((c_out, k), scale=w_scales, data=wt),
        T((c_out,), np.int32, scale=bias_scales, data=bias) if bias is not None else None,
    ], [T((n, c_out), scale=s_out, zero_point=zp_out)], [x],
        FullyConnectedOptions(fused_activation_function=ACT[act]), resolver=resolver)
    return expected


@hsettings(80)
@given(data=st.data(), n=st.integers(1, 4), k=st.integers(1, 300), c_out=st.integers(1, 12),
       act=st.sampled_from(ACTIVATIONS), zp_in=zero_points, zp_out=zero_points, seed=seeds, big_bias=st.booleans(),
       per_channel=st.booleans(), with_bias=st.booleans())
def test_fully_connected_matches_litert(data, n, k, c_out, act, zp_in, zp_out, seed, big_bias, per_channel,
                                        with_bias):
    rng = np.random.default_rng(seed)
    s_in, w_scales, s_out = data.draw(quant_setup(c_out))
    if not per_channel or c_out == 1:
        w_scales = w_scales[:1]
    x = int8_data(rng, (n, k))
    wt = _weights(rng, (c_out, k))
    bias = _bias(rng, c_out, big_bias) if with_bias else None
    p = qk.prepare_fully_connected(s_in, w_scales, s_out, zp_out, act, channels=c_out)
    fixed = qk.fully_connected(x, wt, bias, input_zero_point=zp_in, **p.as_kwargs())
    ref_float = qk.fully_connected(x, wt, bias, input_zero_point=zp_in, reference_float=True, **p.as_kwargs())
    # BUILTIN_REF runs the double path in both granularities (per tensor too, unlike numerics.md
    # §2.3 says: measured in ai-edge-litert 2.x, see qnn_ops.fully_connected).
    assert_same("FULLY_CONNECTED (ref)", ref_float,
                _fc_model(x, wt, bias, s_in, w_scales, s_out, zp_in, zp_out, act, "reference"))
    # Optimized kernels (no XNNPACK): fixed point in both granularities.
    assert_same("FULLY_CONNECTED (optimized)", fixed,
                _fc_model(x, wt, bias, s_in, w_scales, s_out, zp_in, zp_out, act, "optimized"))


def test_fully_connected_per_tensor_weight_zero_point():
    # LiteRT's per-tensor int8 FC still applies a weight zero point (backward compatibility).
    rng = np.random.default_rng(7)
    x, wt = int8_data(rng, (3, 40)), int8_data(rng, (5, 40))
    p = qk.prepare_fully_connected(0.05, 0.01, 0.2, -7, "relu")
    got = qk.fully_connected(x, wt, None, input_zero_point=11, weight_zero_point=-9, **p.as_kwargs())
    (expected,) = run_op(OP.FULLY_CONNECTED, [
        T((3, 40), scale=0.05, zero_point=11), T((5, 40), scale=0.01, zero_point=-9, data=wt), None,
    ], [T((3, 5), scale=0.2, zero_point=-7)], [x], FullyConnectedOptions(fused_activation_function=ACT["relu"]))
    assert_same("FULLY_CONNECTED (ref)", got, expected)


def test_fully_connected_bias_scale_rule_matches_litert():
    with pytest.raises(qk.QKernelError, match="bias scale"):
        qk.prepare_fully_connected(0.05, 0.01, 0.001, 0, bias_scale=0.05 * 0.01 * 1.5)
    with pytest.raises(RuntimeError):
        run_op(OP.FULLY_CONNECTED, [
            T((1, 4), scale=0.05), T((2, 4), scale=0.01, data=np.ones((2, 4), np.int8)),
            T((2,), np.int32, scale=0.05 * 0.01 * 1.5, data=np.zeros(2, np.int32)),
        ], [T((1, 2), scale=0.001)], [np.zeros((1, 4), np.int8)])
