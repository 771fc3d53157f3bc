"""int16x8 CONV_2D and DEPTHWISE_CONV_2D against LiteRT's BUILTIN_REF, bit for bit: int16 activations
(zero point 0), int8 per-channel weights, int64 (or, for CONV_2D, int32) bias, 64-bit MBQM."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from .qk_oracle import ACTIVATIONS, OP, T, assert_same, hsettings, log_uniform, nchw, nhwc, run_op, seeds
from .test_qk_int16_linear import ACT, I16, int16_data
from quantir.backends.tflite import Conv2DOptions, DepthwiseConv2DOptions, Padding
from quantir.backends.tflite.schema import TensorType
from quantir.runtime import qkernels as qk

pytestmark = pytest.mark.oracle


@st.composite
def scales16(draw, channels: int, k: int):
    """s_in, per-channel weight scales (spread up to 100x) and an output scale that puts the largest
    accumulator anywhere from far inside to far past the int16 range."""
    rng = np.random.default_rng(draw(seeds))
    s_in = draw(log_uniform(1e-5, 1e-1))
    w_scales = (draw(log_uniform(1e-4, 1e-1)) * 10 ** rng.uniform(0, 2, channels)).astype(np.float32)
    s_out = float(np.float32(s_in * float(w_scales.max()) * np.sqrt(k) * draw(log_uniform(1.0, 3e4))))
    return s_in, w_scales, s_out


def _bias(rng, kind: str, c_out: int, s_in: float, w_scales: np.ndarray, s_out: float) -> np.ndarray:
    """A realistic bias (within a few times the output range), or a "big" one past int32 (int64 only)."""
    reach = int(min(2**40, 1e5 * s_out / (s_in * float(w_scales.min()))))
    hi = max(2, reach if kind == "int64-big" else min(reach, 2**20))
    return rng.integers(-hi, hi, size=c_out).astype(np.int32 if kind == "int32" else np.int64)


def _bias_scales(s_in, w_scales):
    return (np.float64(s_in) * w_scales.astype(np.float64)).astype(np.float32)


@hsettings(90)
@given(data=st.data(), n=st.integers(1, 2), groups=st.sampled_from([1, 1, 2]), cg_in=st.integers(1, 4),
       cg_out=st.integers(1, 4), h=st.integers(1, 9), w=st.integers(1, 9), kh=st.integers(1, 3), kw=st.integers(1, 3),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), dil=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.sampled_from(["same", "valid"]), act=st.sampled_from(ACTIVATIONS), per_tensor=st.booleans(),
       bias=st.sampled_from(["int64", "int64-big", "int32"]), spread=st.sampled_from(["full", "small"]), seed=seeds)
def test_conv2d_16x8_matches_litert(data, n, groups, cg_in, cg_out, h, w, kh, kw, stride, dil, padding, act, per_tensor,
                                    bias, spread, seed):
    assume(padding == "same" or (h >= (kh - 1) * dil[0] + 1 and w >= (kw - 1) * dil[1] + 1))
    rng = np.random.default_rng(seed)
    c_in, c_out = groups * cg_in, groups * cg_out
    s_in, w_scales, s_out = data.draw(scales16(c_out, cg_in * kh * kw))
    if per_tensor:
        w_scales = w_scales[:1]
    x = int16_data(rng, (n, c_in, h, w), spread)
    wt = rng.integers(-127, 128, size=(c_out, cg_in, kh, kw)).astype(np.int8)
    b = _bias(rng, bias, c_out, s_in, w_scales, s_out)
    pads = qk.tflite_pads(padding, (h, w), (kh, kw), stride, dil)
    try:
        p = qk.prepare_conv2d(s_in, w_scales, s_out, 0, act, channels=c_out, storage=I16)
    except qk.QKernelError as e:   # a RELU6 bound past int32 at a tiny output scale: LiteRT refuses too
        assert "past int32" in str(e), e
        return
    got = qk.conv2d(x, wt, b, input_zero_point=0, strides=stride, pads=pads, dilations=dil, groups=groups,
                    **p.as_kwargs())
    assert got.dtype == np.int16
    options = Conv2DOptions(padding=Padding.SAME if padding == "same" else Padding.VALID, stride_h=stride[0],
                            stride_w=stride[1], dilation_h_factor=dil[0], dilation_w_factor=dil[1],
                            fused_activation_function=ACT[act],
                            quantized_bias_type=TensorType.INT32 if bias == "int32" else TensorType.FLOAT32)
    oh, ow = got.shape[2:]
    (expected,) = run_op(OP.CONV_2D, [
        T((n, h, w, c_in), I16, s_in),
        T((c_out, kh, kw, cg_in), np.int8, w_scales, data=wt.transpose(0, 2, 3, 1)),
        T((c_out,), b.dtype.type, _bias_scales(s_in, w_scales), data=b),
    ], [T((n, oh, ow, c_out), I16, s_out)], [nhwc(x)], options)
    assert_same("CONV_2D (16x8)", got, nchw(expected))


@hsettings(80)
@given(data=st.data(), n=st.integers(1, 2), c_in=st.integers(1, 5), mult=st.integers(1, 3), h=st.integers(1, 9),
       w=st.integers(1, 9), kh=st.integers(1, 4), kw=st.integers(1, 4),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), dil=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.sampled_from(["same", "valid"]), act=st.sampled_from(ACTIVATIONS), per_tensor=st.booleans(),
       bias=st.sampled_from(["int64", "int64-big", "none"]), spread=st.sampled_from(["full", "small"]), seed=seeds)
def test_depthwise_conv2d_16x8_matches_litert(data, n, c_in, mult, h, w, kh, kw, stride, dil, padding, act,
                                              per_tensor, bias, spread, seed):
    assume(padding == "same" or (h >= (kh - 1) * dil[0] + 1 and w >= (kw - 1) * dil[1] + 1))
    rng = np.random.default_rng(seed)
    c_out = c_in * mult
    s_in, w_scales, s_out = data.draw(scales16(c_out, kh * kw))
    if per_tensor:
        w_scales = w_scales[:1]
    x = int16_data(rng, (n, c_in, h, w), spread)
    wt = rng.integers(-127, 128, size=(c_out, 1, kh, kw)).astype(np.int8)
    b = None if bias == "none" else _bias(rng, bias, c_out, s_in, w_scales, s_out)
    pads = qk.tflite_pads(padding, (h, w), (kh, kw), stride, dil)
    try:
        p = qk.prepare_conv2d(s_in, w_scales, s_out, 0, act, channels=c_out, storage=I16)
    except qk.QKernelError as e:
        assert "past int32" in str(e), e
        return
    got = qk.depthwise_conv2d(x, wt, b, input_zero_point=0, strides=stride, pads=pads, dilations=dil,
                              **p.as_kwargs())
    if c_in > 1:   # groups == C_in through conv2d dispatches to the same kernel
        np.testing.assert_array_equal(got, qk.conv2d(x, wt, b, input_zero_point=0, strides=stride, pads=pads,
                                                     dilations=dil, groups=c_in, **p.as_kwargs()))
    options = DepthwiseConv2DOptions(padding=Padding.SAME if padding == "same" else Padding.VALID,
                                     stride_h=stride[0], stride_w=stride[1], depth_multiplier=mult,
                                     dilation_h_factor=dil[0], dilation_w_factor=dil[1],
                                     fused_activation_function=ACT[act])
    oh, ow = got.shape[2:]
    # LiteRT's kernel needs the bias tensor; ours treats None as zeros
    bias_t = T((c_out,), np.int64, _bias_scales(s_in, w_scales), data=np.zeros(c_out, np.int64) if b is None else b)
    (expected,) = run_op(OP.DEPTHWISE_CONV_2D, [
        T((n, h, w, c_in), I16, s_in),
        T((1, kh, kw, c_out), np.int8, w_scales, axis=3, data=wt.reshape(c_out, kh, kw).transpose(1, 2, 0)[None]),
        bias_t,
    ], [T((n, oh, ow, c_out), I16, s_out)], [nhwc(x)], options)
    assert_same("DEPTHWISE_CONV_2D (16x8)", got, nchw(expected))


def _pointwise(x_values, bias, s_out, op=OP.CONV_2D):
    """A 1x1 conv (or depthwise) with one channel, weight 1, s_in = s_w = 1: acc = x + bias."""
    x = np.asarray(x_values, dtype=I16).reshape(1, 1, 1, -1)
    wt = np.ones((1, 1, 1, 1), np.int8)
    b = np.asarray([bias], np.int64)
    p = qk.prepare_conv2d(1.0, [1.0], s_out, 0, channels=1, storage=I16)
    got = qk.conv2d(x, wt, b, input_zero_point=0, **p.as_kwargs())
    w_t = T((1, 1, 1, 1), np.int8, [1.0], data=wt.reshape(1, 1, 1, 1), axis=0 if op == OP.CONV_2D else 3)
    options = Conv2DOptions(padding=Padding.VALID) if op == OP.CONV_2D else DepthwiseConv2DOptions(
        padding=Padding.VALID)
    (expected,) = run_op(op, [T((1, 1, x.size, 1), I16, 1.0), w_t, T((1,), np.int64, [1.0], data=b)],
                         [T((1, 1, x.size, 1), I16, s_out)], [nhwc(x)], options)
    assert_same("CONV_2D (16x8)" if op == OP.CONV_2D else "DEPTHWISE_CONV_2D (16x8)", got, nchw(expected))
    return got.reshape(-1).tolist()


@pytest.mark.parametrize("op", [OP.CONV_2D, OP.DEPTHWISE_CONV_2D])
def test_conv_16x8_hand_checked_vectors(op):
    # m = 1/2: M = 2**30, shift 0 -> M16 = 2**14, (acc·2**14 + 2**14) >> 15 = floor((acc + 1) / 2):
    # ties round up (towards +inf), not away from zero as the double-precision FULLY_CONNECTED does
    assert _pointwise([1, -1, 3, -3, 5, -5, 2, -2, 32767, -32768], 0, 2.0, op) == \
        [1, 0, 2, -1, 3, -2, 1, -1, 16384, -16384]
    # a bias past int32 (int64 storage) at m = 2**-19 (M16 = 2**14, shift -18: floor(acc/2**19 + 1/2)):
    # acc = 3·2**32 - 2**18 is the tie 24575.5 and rounds up; one step of acc below it rounds down
    assert _pointwise([0, -1, 1, -2**14, 2**14], 3 * 2**32 - 2**18, 2.0**19, op) == \
        [24576, 24575, 24576, 24575, 24576]
    # the 15-bit cut: m = 0.99999 has M > 0x7FFF0000, so M16 = 0x7FFF (x·32767/32768), whereas the
    # 31-bit multiplier would give 30000 for acc = 30001
    assert _pointwise([30001, -30001, 1, 16384], 0, float(np.float32(1 / 0.99999)), op) == \
        [30000, -30000, 1, 16384]


def test_conv_16x8_refuses_what_litert_refuses():
    x = np.zeros((1, 1, 2, 2), I16)
    for kwargs, field in [(dict(input_zero_point=1), "input"), (dict(output_zero_point=1), "output")]:
        args = dict(input_zero_point=0, output_zero_point=0) | kwargs
        with pytest.raises(qk.QKernelError, match="zero point 0"):
            qk.prepare_conv2d(0.01, [0.01], 0.5, args["output_zero_point"], storage=I16,
                              input_zero_point=args["input_zero_point"])
        for op, options, axis in [(OP.CONV_2D, Conv2DOptions(padding=Padding.VALID), 0),
                                  (OP.DEPTHWISE_CONV_2D, DepthwiseConv2DOptions(padding=Padding.VALID), 3)]:
            with pytest.raises(RuntimeError, match="zero_point"):
                run_op(op, [T((1, 2, 2, 1), I16, 0.01, args["input_zero_point"]),
                            T((1, 1, 1, 1), np.int8, [0.01], data=np.ones((1, 1, 1, 1), np.int8), axis=axis),
                            T((1,), np.int64, [1e-4], data=np.zeros(1, np.int64))],
                       [T((1, 2, 2, 1), I16, 0.5, args["output_zero_point"])], [x.reshape(1, 2, 2, 1)], options)
    # DEPTHWISE_CONV_2D takes only an int64 bias for int16 (CONV_2D also int32, with quantized_bias_type)
    with pytest.raises(RuntimeError, match="kTfLiteInt64|Int64|INT64"):
        run_op(OP.DEPTHWISE_CONV_2D, [T((1, 2, 2, 1), I16, 0.01),
                                      T((1, 1, 1, 1), np.int8, [0.01], data=np.ones((1, 1, 1, 1), np.int8), axis=3),
                                      T((1,), np.int32, [1e-4], data=np.zeros(1, np.int32))],
               [T((1, 2, 2, 1), I16, 0.5)], [x.reshape(1, 2, 2, 1)], DepthwiseConv2DOptions(padding=Padding.VALID))
    with pytest.raises(qk.QKernelError, match="only an int64 bias"):
        qk.depthwise_conv2d(x, np.ones((1, 1, 1, 1), np.int8), np.zeros(1, np.int32), input_zero_point=0,
                            **qk.prepare_conv2d(0.01, [0.01], 0.5, 0, storage=I16).as_kwargs())
    # a multiplier of 128 or more: past the 64-bit MBQM's shift range [-31, 7]
    with pytest.raises(qk.QKernelError, match="shift"):
        qk.conv2d(x, np.ones((1, 1, 1, 1), np.int8), np.zeros(1, np.int64), input_zero_point=0,
                  **qk.prepare_conv2d(1.0, [1.0], 1 / 200, 0, storage=I16).as_kwargs())


def test_conv_16x8_int32_bias_needs_quantized_bias_type():
    """CONV_2D reads an int32 bias as int32 only when quantized_bias_type says INT32; without it LiteRT
    takes the int64 path and misreads the buffer, so the exporter writes int64."""
    rng = np.random.default_rng(0)
    x = int16_data(rng, (1, 3, 4, 4))
    wt = rng.integers(-127, 128, size=(2, 3, 1, 1)).astype(np.int8)
    b = rng.integers(-2**20, 2**20, size=2).astype(np.int32)
    p = qk.prepare_conv2d(1e-3, [1e-2, 2e-2], 0.5, 0, channels=2, storage=I16)
    got = qk.conv2d(x, wt, b, input_zero_point=0, **p.as_kwargs())
    model = ([T((1, 4, 4, 3), I16, 1e-3), T((2, 1, 1, 3), np.int8, [1e-2, 2e-2], data=wt.transpose(0, 2, 3, 1)),
              T((2,), np.int32, [1e-5, 2e-5], data=b)], [T((1, 4, 4, 2), I16, 0.5)], [nhwc(x)])
    (with_option,) = run_op(OP.CONV_2D, *model, Conv2DOptions(padding=Padding.VALID,
                                                              quantized_bias_type=TensorType.INT32))
    assert_same("CONV_2D (16x8)", got, nchw(with_option))
    (without,) = run_op(OP.CONV_2D, *model, Conv2DOptions(padding=Padding.VALID))
    assert not np.array_equal(without, with_option)


def test_conv_16x8_refuses_an_accumulator_past_the_64bit_mbqm():
    p = qk.prepare_conv2d(1.0, [1.0], 2.0**20, 0, channels=1, storage=I16)
    x = np.zeros((1, 1, 1, 1), I16)
    with pytest.raises(qk.QKernelError, match="2\\*\\*47|x"):
        qk.conv2d(x, np.ones((1, 1, 1, 1), np.int8), np.asarray([2**50], np.int64), input_zero_point=0,
                  **p.as_kwargs())


@hsettings(20)
@given(rank=st.integers(1, 4), seed=seeds)
def test_pad_int16_matches_litert(rank, seed):
    """PAD on int16 (zero point 0): how a 16x8 conv with explicit (non-SAME) pads is exported."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 5, size=rank))
    widths = rng.integers(0, 3, size=(rank, 2))
    x = int16_data(rng, shape)
    value = qk.prepare_pad(0.01, 0, 0.01, 0)
    got = qk.pad(x, pads=[tuple(w) for w in widths], value=value)
    (expected,) = run_op(OP.PAD, [T(shape, I16, 0.01), T((rank, 2), np.int32, data=widths.astype(np.int32))],
                         [T(got.shape, I16, 0.01)], [x])
    assert_same("PAD (int16)", got, expected)
