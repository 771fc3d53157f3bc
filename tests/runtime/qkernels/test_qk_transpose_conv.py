"""TRANSPOSE_CONV against LiteRT's reference kernel, bit for bit, and the models it refuses."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from .qk_oracle import ACTIVATIONS, OP, T, assert_same, hsettings, int8_data, nchw, nhwc, run_op, seeds, zero_points
from .test_qk_conv_fc import ACT, _weights, quant_setup
from quantir.backends.tflite import Padding
from quantir.backends.tflite.schema import TransposeConvOptions
from quantir.runtime.qkernels import QKernelError
from quantir.runtime.qkernels._common import AccumulatorOverflowError
from quantir.runtime.qkernels.transpose_conv import prepare_transpose_conv, transpose_conv, transpose_conv_input_hw

pytestmark = pytest.mark.oracle


def _litert(x, wt, bias, s_in, zp_in, w_scales, s_out, zp_out, strides, padding, out_hw, act="none"):
    """LiteRT's TRANSPOSE_CONV on NCHW data: inputs (output_shape, OHWI weights, NHWC input[, bias])."""
    n, c_in = x.shape[:2]
    c_out, _, kh, kw = wt.shape
    out_shape = np.array([n, *out_hw, c_out], np.int32)
    inputs = [T((4,), np.int32, data=out_shape),
              T((c_out, kh, kw, c_in), scale=w_scales, zero_point=0, data=wt.transpose(0, 2, 3, 1)),
              T((n, *x.shape[2:], c_in), scale=s_in, zero_point=zp_in)]
    if bias is not None:
        bias_scales = (np.float64(s_in) * np.asarray(w_scales, np.float64)).astype(np.float32)
        inputs.append(T((c_out,), np.int32, scale=bias_scales, zero_point=0, data=bias))
    options = TransposeConvOptions(padding=Padding.SAME if padding == "same" else Padding.VALID,
                                   stride_h=strides[0], stride_w=strides[1], fused_activation_function=ACT[act])
    (y,) = run_op(OP.TRANSPOSE_CONV, inputs, [T((n, *out_hw, c_out), scale=s_out, zero_point=zp_out)], [nhwc(x)],
                  options)
    return nchw(y)


@hsettings(120)
@given(data=st.data(), n=st.integers(1, 2), c_in=st.integers(1, 5), c_out=st.integers(1, 5),
       h=st.integers(1, 6), w=st.integers(1, 6), kh=st.integers(1, 4), kw=st.integers(1, 4),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), padding=st.sampled_from(["same", "valid"]),
       extra=st.tuples(st.integers(-2, 2), st.integers(-2, 2)), act=st.sampled_from(ACTIVATIONS),
       zp_in=zero_points, zp_out=zero_points, seed=seeds, with_bias=st.booleans(), per_tensor=st.booleans())
def test_transpose_conv_matches_litert(data, n, c_in, c_out, h, w, kh, kw, stride, padding, extra, act, zp_in,
                                       zp_out, seed, with_bias, per_tensor):
    """Any output size (the natural one, cropped or grown by up to two pixels), both paddings, strides
    1-3, fused activations, per-channel and per-tensor weights, with and without bias."""
    rng = np.random.default_rng(seed)
    s_in, w_scales, s_out = data.draw(quant_setup(c_out))
    if per_tensor:
        w_scales = w_scales[:1]
    x = int8_data(rng, (n, c_in, h, w))
    wt = _weights(rng, (c_out, c_in, kh, kw))
    bias = rng.integers(-2**16, 2**16, size=c_out).astype(np.int32) if with_bias else None
    natural = (stride[0] * (h - 1) + kh, stride[1] * (w - 1) + kw) if padding == "valid" else \
        (stride[0] * h, stride[1] * w)
    out_hw = (max(1, natural[0] + extra[0]), max(1, natural[1] + extra[1]))
    assume(transpose_conv_input_hw(padding, out_hw, (kh, kw), stride) == (h, w))   # refused below
    p = prepare_transpose_conv(s_in, w_scales, s_out, zp_out, act, channels=c_out)
    got = transpose_conv(x, wt, bias, input_zero_point=zp_in, strides=stride, output_hw=out_hw, padding=padding,
                         **p.as_kwargs())
    expected = _litert(x, wt, bias, s_in, zp_in, w_scales, s_out, zp_out, stride, padding, out_hw, act)
    assert_same("TRANSPOSE_CONV", got, expected)


def test_transpose_conv_ppocr_shape_matches_litert():
    """The PP-OCR detector's upsampler: 2x2 kernel, stride 2, 24 channels, VALID."""
    rng = np.random.default_rng(7)
    x = int8_data(rng, (1, 24, 5, 7))
    wt = _weights(rng, (24, 24, 2, 2))
    bias = rng.integers(-5000, 5000, 24).astype(np.int32)
    w_scales = np.float32(0.002) * (1 + rng.random(24)).astype(np.float32)
    p = prepare_transpose_conv(0.05, w_scales, 0.08, -3, "relu", channels=24)
    got = transpose_conv(x, wt, bias, input_zero_point=-10, strides=(2, 2), output_hw=(10, 14), padding="valid",
                         **p.as_kwargs())
    assert_same("TRANSPOSE_CONV", got, _litert(x, wt, bias, 0.05, -10, w_scales, 0.08, -3, (2, 2), "valid",
                                                (10, 14), "relu"))


def _simple(c_in=2, c_out=3):
    rng = np.random.default_rng(0)
    return int8_data(rng, (1, c_in, 3, 3)), _weights(rng, (c_out, c_in, 2, 2))


def test_refuses_zero_stride_like_litert():
    x, wt = _simple()
    p = prepare_transpose_conv(0.1, 0.01, 0.2, 0, channels=3)
    with pytest.raises(QKernelError, match="strides must be positive"):
        transpose_conv(x, wt, input_zero_point=0, strides=(0, 2), output_hw=(6, 6), **p.as_kwargs())
    with pytest.raises(RuntimeError):
        _litert(x, wt, None, 0.1, 0, 0.01, 0.2, 0, (0, 2), "valid", (6, 6))


def test_refuses_channel_mismatch_like_litert():
    x, _ = _simple(c_in=2)
    _, wt = _simple(c_in=3)
    p = prepare_transpose_conv(0.1, 0.01, 0.2, 0, channels=3)
    with pytest.raises(QKernelError, match="input has 2 channels"):
        transpose_conv(x, wt, input_zero_point=0, strides=(2, 2), output_hw=(6, 6), **p.as_kwargs())
    with pytest.raises(RuntimeError):
        out_shape = np.array([1, 6, 6, 3], np.int32)
        run_op(OP.TRANSPOSE_CONV, [T((4,), np.int32, data=out_shape),
                                   T((3, 2, 2, 3), scale=0.01, data=wt.transpose(0, 2, 3, 1)),
                                   T((1, 3, 3, 2), scale=0.1)],
               [T((1, 6, 6, 3), scale=0.2)], [nhwc(x)], TransposeConvOptions(padding=Padding.VALID, stride_h=2,
                                                                             stride_w=2))


def test_refuses_output_size_that_does_not_invert_like_litert():
    """A 3x3 input with a 2x2 kernel, stride 2, VALID has outputs 6x6 or 7x7; 8x8 comes from a 4x4 input."""
    x, wt = _simple()
    p = prepare_transpose_conv(0.1, 0.01, 0.2, 0, channels=3)
    for ok in ((6, 6), (7, 7)):
        assert transpose_conv(x, wt, input_zero_point=0, strides=(2, 2), output_hw=ok, **p.as_kwargs()).shape[2:] == ok
    with pytest.raises(QKernelError, match="comes from a 4x4 input, not 3x3"):
        transpose_conv(x, wt, input_zero_point=0, strides=(2, 2), output_hw=(8, 8), **p.as_kwargs())
    with pytest.raises(RuntimeError, match="computed_input"):
        _litert(x, wt, None, 0.1, 0, 0.01, 0.2, 0, (2, 2), "valid", (8, 8))


def test_refuses_wrong_weight_scale_count():
    with pytest.raises(ValueError, match="2 weight scales for 3 output channels"):
        prepare_transpose_conv(0.1, [0.01, 0.02], 0.2, 0, channels=3)


def test_refuses_possible_int32_overflow():
    """Weights and inputs whose partial sums could leave int32: LiteRT's scratch buffer would overflow."""
    x = np.full((1, 4096, 1, 1), 127, np.int8)
    wt = np.full((1, 4096, 1, 1), 127, np.int8)
    bias = np.array([2**31 - 1], np.int32)
    p = prepare_transpose_conv(0.1, 0.01, 0.2, 0, channels=1)
    with pytest.raises(AccumulatorOverflowError, match="past int32"):
        transpose_conv(x, wt, bias, input_zero_point=-128, strides=(1, 1), output_hw=(1, 1), **p.as_kwargs())
