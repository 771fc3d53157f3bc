"""16x8 TRANSPOSE_CONV (int16 input and output, int8 weights) against LiteRT's BUILTIN_REF, bit for bit.

LiteRT's reference kernel is a template on the bias type: an int64 accumulator and the 64-bit
MBQM unless the op's ``quantized_bias_type`` is INT32 (then int32 and the 32-bit MBQM). Both are
compared, with and without a bias, per channel and per tensor, SAME and VALID, output sizes grown
or cropped, and the refusals (zero points, an int32 bias without the option)."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from .qk_oracle import ACTIVATIONS, OP, T, assert_same, hsettings, log_uniform, nchw, nhwc, run_op, seeds
from .test_qk_conv_fc import ACT, _weights
from .test_qk_int16_linear import int16_data
from quantir.backends.tflite import Padding
from quantir.backends.tflite.schema import TensorType, TransposeConvOptions
from quantir.runtime.qkernels import QKernelError
from quantir.runtime.qkernels._common import AccumulatorOverflowError
from quantir.runtime.qkernels.transpose_conv import prepare_transpose_conv, transpose_conv, transpose_conv_input_hw

pytestmark = pytest.mark.oracle
I16 = np.int16


def _litert(x, wt, bias, s_in, w_scales, s_out, strides, padding, out_hw, act="none", bias_option=None,
            zp_in=0, zp_out=0):
    n, c_in = x.shape[:2]
    c_out, _, kh, kw = wt.shape
    inputs = [T((4,), np.int32, data=np.array([n, *out_hw, c_out], np.int32)),
              T((c_out, kh, kw, c_in), scale=w_scales, zero_point=0, data=wt.transpose(0, 2, 3, 1)),
              T((n, *x.shape[2:], c_in), I16, scale=s_in, zero_point=zp_in)]
    if bias is not None:
        bias_scales = (np.float64(s_in) * np.asarray(w_scales, np.float64)).astype(np.float32)
        inputs.append(T((c_out,), bias.dtype.type, scale=bias_scales, zero_point=0, data=bias))
    option = {} if bias_option is None else {"quantized_bias_type": bias_option}
    options = TransposeConvOptions(padding=Padding.SAME if padding == "same" else Padding.VALID,
                                   stride_h=strides[0], stride_w=strides[1], fused_activation_function=ACT[act],
                                   **option)
    (y,) = run_op(OP.TRANSPOSE_CONV, inputs, [T((n, *out_hw, c_out), I16, scale=s_out, zero_point=zp_out)],
                  [nhwc(x)], options)
    return nchw(y)


@hsettings(150)
@given(data=st.data(), n=st.integers(1, 2), c_in=st.integers(1, 5), c_out=st.integers(1, 5),
       h=st.integers(1, 5), w=st.integers(1, 5), kh=st.integers(1, 4), kw=st.integers(1, 4),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)), padding=st.sampled_from(["same", "valid"]),
       extra=st.tuples(st.integers(-2, 2), st.integers(-2, 2)), act=st.sampled_from(ACTIVATIONS),
       bias=st.sampled_from(["int64", "int32", "none", "none-int32-option"]), per_tensor=st.booleans(),
       spread=st.sampled_from(["full", "small"]), seed=seeds)
def test_transpose_conv_16x8_matches_litert(data, n, c_in, c_out, h, w, kh, kw, stride, padding, extra, act, bias,
                                            per_tensor, spread, seed):
    rng = np.random.default_rng(seed)
    s_in = data.draw(log_uniform(1e-5, 1e-1))
    w_scales = (data.draw(log_uniform(1e-4, 1e-1)) * 10 ** rng.uniform(0, 2, c_out)).astype(np.float32)
    if per_tensor:
        w_scales = w_scales[:1]
    taps = c_in * -(-kh // stride[0]) * -(-kw // stride[1])
    s_out = float(np.float32(s_in * float(w_scales.max()) * np.sqrt(taps) * data.draw(log_uniform(1.0, 3e4))))
    x = int16_data(rng, (n, c_in, h, w), spread)
    wt = _weights(rng, (c_out, c_in, kh, kw))
    b = None
    if bias in ("int64", "int32"):
        b = rng.integers(-2**20, 2**20, size=c_out).astype(np.int64 if bias == "int64" else np.int32)
    option = TensorType.INT32 if bias in ("int32", "none-int32-option") else None
    natural = (stride[0] * (h - 1) + kh, stride[1] * (w - 1) + kw) if padding == "valid" else \
        (stride[0] * h, stride[1] * w)
    out_hw = (max(1, natural[0] + extra[0]), max(1, natural[1] + extra[1]))
    assume(transpose_conv_input_hw(padding, out_hw, (kh, kw), stride) == (h, w))
    p = prepare_transpose_conv(s_in, w_scales, s_out, 0, act, channels=c_out, storage=I16)
    # no bias with the INT32 option: LiteRT's accumulator is int32, which an empty int32 bias selects here
    kernel_bias = np.zeros(c_out, np.int32) if bias == "none-int32-option" else b
    try:
        got = transpose_conv(x, wt, kernel_bias, input_zero_point=0, strides=stride, output_hw=out_hw,
                             padding=padding, **p.as_kwargs())
    except AccumulatorOverflowError:   # full-range int16 in an int32 accumulator: undefined in LiteRT
        assert option is not None
        return
    except QKernelError as e:          # the 64-bit MBQM's limits (a result past int32, a shift past 7)
        assert "multiply_by_quantized_multiplier_int64" in str(e), e
        return
    assert got.dtype == I16
    expected = _litert(x, wt, b, s_in, w_scales, s_out, stride, padding, out_hw, act, option)
    assert_same("TRANSPOSE_CONV (16x8)", got, expected)


def test_transpose_conv_16x8_refuses_what_litert_refuses():
    x = np.ones((1, 1, 2, 2), I16)
    wt = np.ones((1, 1, 2, 2), np.int8)
    with pytest.raises(QKernelError, match="zero point 0"):
        prepare_transpose_conv(0.01, [0.01], 0.1, 3, storage=I16)
    with pytest.raises(QKernelError, match="zero point 0"):
        prepare_transpose_conv(0.01, [0.01], 0.1, 0, storage=I16, input_zero_point=5)
    for zp_in, zp_out in ((5, 0), (0, 3)):
        with pytest.raises(RuntimeError):
            _litert(x, wt, None, 0.01, [0.01], 0.1, (2, 2), "valid", (4, 4), zp_in=zp_in, zp_out=zp_out)


def test_transpose_conv_16x8_int32_bias_needs_quantized_bias_type():
    """Without the INT32 option LiteRT reads an int32 bias buffer as int64 (half as many values, the
    next tensor's bytes): not the int32 result. The exporter writes the option."""
    rng = np.random.default_rng(3)
    x = int16_data(rng, (1, 2, 3, 3), "small")
    wt = rng.integers(-127, 128, size=(3, 2, 2, 2)).astype(np.int8)
    b = np.array([1000, -2000, 3000], np.int32)
    p = prepare_transpose_conv(1e-3, [1e-2], 1e-3, 0, storage=I16, channels=3)
    got = transpose_conv(x, wt, b, input_zero_point=0, strides=(2, 2), output_hw=(6, 6), padding="valid",
                         **p.as_kwargs())
    with_option = _litert(x, wt, b, 1e-3, [1e-2], 1e-3, (2, 2), "valid", (6, 6), bias_option=TensorType.INT32)
    assert_same("TRANSPOSE_CONV (16x8)", got, with_option)
    without = _litert(x, wt, b, 1e-3, [1e-2], 1e-3, (2, 2), "valid", (6, 6))   # runs, and misreads the bias
    assert not np.array_equal(without, with_option)
