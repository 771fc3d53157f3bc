"""Numerics primitives, composed like the LiteRT reference kernels, against the LiteRT interpreter.

Each test builds a one-op int8 model by hand, runs it with ``BUILTIN_REF`` and compares
bit for bit with the composition of quantir.numerics functions. Skips when
``ai_edge_litert`` is not installed.
"""
import numpy as np
import pytest

from quantir.numerics import (
    add_sub_multipliers,
    asymmetric_qparams,
    bias_qparams,
    conv_multiplier,
    dequantize,
    fully_connected_per_tensor_multiplier,
    mean_multiplier,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier,
    quantize_multiplier_smaller_than_one_exp,
    quantize_tflite,
    requantize_multiplier,
)

from ._compose import l2_normalization_int8, softmax_int8
from ._litert import Model, Op, Tensor, options, run_reference, schema

pytestmark = pytest.mark.oracle

BO, OP = schema.BuiltinOptions, schema.BuiltinOperator
RNG = np.random.default_rng(20260807)
F = np.float32


def _int8(shape):
    return RNG.integers(-128, 128, size=shape).astype(np.int8)


@pytest.mark.parametrize("input_scale, beta", [(0.1, 1.0), (1 / 16, 1.0), (0.02, 1.0), (0.5, 0.7), (0.0037, 2.0)])
def test_softmax_reference_kernel(input_scale, beta):
    x = _int8((16, 10))
    x[0] = 5  # equal logits
    x[1, :] = -128
    x[1, 3] = 127  # one dominant logit: everything else below diff_min for large scales
    model = Model(
        tensors=[Tensor((16, 10), np.int8, input_scale, 3), Tensor((16, 10), np.int8, 1 / 256, -128)],
        ops=[Op(OP.SOFTMAX, [0], [1], BO.SoftmaxOptions, options("SoftmaxOptionsT", beta=beta))],
        inputs=[0], outputs=[1])
    expected = run_reference(model, x)
    got = softmax_int8(x, F(input_scale), F(beta))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("zp", [0, -7, 100])
def test_l2_normalization_reference_kernel(zp):
    x = _int8((32, 7))
    x[0] = zp  # all-zero row: acc = 0 takes the (INT32_MAX, 0) branch
    x[1] = zp
    x[1, 2] = zp + 1 if zp < 127 else zp - 1  # acc = 1
    model = Model(
        tensors=[Tensor((32, 7), np.int8, 0.05, zp), Tensor((32, 7), np.int8, 1 / 128, 0)],
        ops=[Op(OP.L2_NORMALIZATION, [0], [1], BO.L2NormOptions, options("L2NormOptionsT"))],
        inputs=[0], outputs=[1])
    np.testing.assert_array_equal(l2_normalization_int8(x, zp), run_reference(model, x))


def test_quantize_float_to_int8_reference_kernel():
    scale, zp = asymmetric_qparams(-1.0, 3.0)
    x = np.concatenate([
        (np.arange(-70, 200) + 0.5).astype(np.float32) * scale,  # near ties
        RNG.uniform(-1.5, 3.5, 500).astype(np.float32),
        # Out of range but inside int32 after division. Beyond int32 the C float->int cast
        # is undefined (x86 gives INT32_MIN, so -1e9 comes out as 127); we saturate instead.
        np.array([0.25, -0.25, 0.75, -0.75, 1e6, -1e6], np.float32),
    ]).astype(np.float32)
    model = Model(
        tensors=[Tensor(x.shape, np.float32), Tensor(x.shape, np.int8, scale, zp)],
        ops=[Op(OP.QUANTIZE, [0], [1], BO.QuantizeOptions, options("QuantizeOptionsT"))],
        inputs=[0], outputs=[1])
    np.testing.assert_array_equal(quantize_tflite(x, scale, zp), run_reference(model, x))


def test_requantize_int8_reference_kernel():
    s_in, zp_in, s_out, zp_out = F(0.0173), -5, F(0.0411), 9
    x = np.arange(-128, 128, dtype=np.int8)
    big_m, shift = quantize_multiplier(requantize_multiplier(s_in, s_out))
    expected = np.clip(multiply_by_quantized_multiplier(x.astype(np.int64) - zp_in, big_m, shift) + zp_out, -128, 127)
    model = Model(
        tensors=[Tensor(x.shape, np.int8, s_in, zp_in), Tensor(x.shape, np.int8, s_out, zp_out)],
        ops=[Op(OP.QUANTIZE, [0], [1], BO.QuantizeOptions, options("QuantizeOptionsT"))],
        inputs=[0], outputs=[1])
    np.testing.assert_array_equal(expected, run_reference(model, x))


def test_dequantize_reference_kernel():
    x = np.arange(-128, 128, dtype=np.int8)
    model = Model(
        tensors=[Tensor(x.shape, np.int8, 0.0173, -5), Tensor(x.shape, np.float32)],
        ops=[Op(OP.DEQUANTIZE, [0], [1], BO.DequantizeOptions, options("DequantizeOptionsT"))],
        inputs=[0], outputs=[1])
    got = run_reference(model, x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(dequantize(x, F(0.0173), -5), got)  # bit-identical floats


@pytest.mark.parametrize("s1, s2, s_out", [(0.05, 0.1, 0.12), (0.02, 0.02, 0.03), (0.3, 0.007, 0.25)])
def test_add_reference_kernel(s1, s2, s_out):
    a, b = _int8((8, 32)), _int8((8, 32))
    zp1, zp2, zp_out = -3, 5, 2
    m1, m2, mo = add_sub_multipliers(F(s1), F(s2), F(s_out))
    (M1, sh1), (M2, sh2), (Mo, sho) = (quantize_multiplier_smaller_than_one_exp(m) for m in (m1, m2, mo))
    mul = multiply_by_quantized_multiplier_smaller_than_one_exp
    sa = mul((a.astype(np.int64) - zp1) << 20, M1, sh1)
    sb = mul((b.astype(np.int64) - zp2) << 20, M2, sh2)
    expected = np.clip(mul(sa + sb, Mo, sho) + zp_out, -128, 127)
    model = Model(
        tensors=[Tensor((8, 32), np.int8, s1, zp1), Tensor((8, 32), np.int8, s2, zp2),
                 Tensor((8, 32), np.int8, s_out, zp_out)],
        ops=[Op(OP.ADD, [0, 1], [2], BO.AddOptions, options("AddOptionsT"))],
        inputs=[0, 1], outputs=[2])
    np.testing.assert_array_equal(expected, run_reference(model, a, b))


@pytest.mark.parametrize("s_in, s_out, zp_in, zp_out", [(0.0173, 0.0173, 0, 0), (0.02, 0.011, -7, 4)])
def test_mean_reference_kernel(s_in, s_out, zp_in, zp_out):
    x = _int8((2, 7, 7, 5))
    big_m, shift = quantize_multiplier(requantize_multiplier(F(s_in), F(s_out)))
    folded, folded_shift = mean_multiplier(big_m, shift, 49)
    total = x.astype(np.int64).sum(axis=(1, 2)) - zp_in * 49
    expected = np.clip(multiply_by_quantized_multiplier(total, folded, folded_shift) + zp_out, -128, 127)
    model = Model(
        tensors=[Tensor((2, 7, 7, 5), np.int8, s_in, zp_in), Tensor((2,), np.int32, data=np.array([1, 2])),
                 Tensor((2, 5), np.int8, s_out, zp_out)],
        ops=[Op(OP.MEAN, [0, 1], [2], BO.ReducerOptions, options("ReducerOptionsT", keepDims=False))],
        inputs=[0], outputs=[2])
    np.testing.assert_array_equal(expected, run_reference(model, x))


def test_fully_connected_per_tensor_uses_float32_product():
    # Scales for which the FC rule double(f32(s_in·s_w))/s_out gives a different M than the
    # conv rule, and accumulators ±63789 where that changes the int8 output (71 vs 72).
    s_in, s_w, s_out = F(0.0029660186264663935), F(0.02958667278289795), F(0.07829169183969498)
    fc = quantize_multiplier(fully_connected_per_tensor_multiplier(s_in, s_w, s_out))
    assert fc == (1232406935, -9) != quantize_multiplier(conv_multiplier(s_in, s_w, s_out))
    zp_in, zp_out = -4, 3
    w = _int8((3, 16))
    w[w == -128] = -127
    bias = np.array([63789, -63789, 1234], dtype=np.int32)
    bias_scale, _ = bias_qparams(s_in, s_w)
    x = np.full((2, 16), zp_in, dtype=np.int8)
    x[1] = _int8(16)
    acc = (x.astype(np.int64) - zp_in) @ w.T.astype(np.int64) + bias
    expected = np.clip(multiply_by_quantized_multiplier(acc, *fc) + zp_out, -128, 127)
    assert expected[0, :2].tolist() == [71 + zp_out, -71 + zp_out]
    model = Model(
        tensors=[Tensor((2, 16), np.int8, s_in, zp_in), Tensor((3, 16), np.int8, s_w, 0, data=w),
                 Tensor((3,), np.int32, bias_scale, 0, data=bias), Tensor((2, 3), np.int8, s_out, zp_out)],
        ops=[Op(OP.FULLY_CONNECTED, [0, 1, 2], [3], BO.FullyConnectedOptions,
                options("FullyConnectedOptionsT"), version=4)],
        inputs=[0], outputs=[3])
    np.testing.assert_array_equal(expected, run_reference(model, x))
