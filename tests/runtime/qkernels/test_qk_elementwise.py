"""Element-wise int8 kernels against LiteRT: ADD, SUB, MUL, activations, LUT ops, QUANTIZE, DEQUANTIZE."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from .qk_oracle import ACTIVATIONS, OP, T, assert_same, hsettings, int8_data, log_uniform, run_op, seeds, zero_points
from quantir.backends.tflite import ActivationFunctionType, AddOptions, LeakyReluOptions, MulOptions, SubOptions
from quantir.backends.tflite.schema import QuantizeOptions
from quantir.runtime import qkernels as qk

pytestmark = pytest.mark.oracle

ACT = {"none": ActivationFunctionType.NONE, "relu": ActivationFunctionType.RELU,
       "relu6": ActivationFunctionType.RELU6, "relu_n1_to_1": ActivationFunctionType.RELU_N1_TO_1}
ALL_Q = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16)  # every int8 value


@st.composite
def broadcast_shapes(draw):
    """Two NHWC shapes that broadcast: equal, per-channel, per-pixel, scalar-like, rank-different."""
    n, h, w, c = draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 6))
    full = (n, h, w, c)
    other = draw(st.sampled_from([full, (1, 1, 1, c), (n, h, w, 1), (1,), (c,), (h, 1, c), (n, 1, w, c)]))
    return (full, other) if draw(st.booleans()) else (other, full)


def _binary(code, options, a, b, sa, za, sb, zb, so, zo):
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    (expected,) = run_op(code, [T(a.shape, scale=sa, zero_point=za), T(b.shape, scale=sb, zero_point=zb)],
                         [T(out_shape, scale=so, zero_point=zo)], [a, b], options)
    return expected


@st.composite
def add_scales(draw):
    s1, s2 = draw(log_uniform(1e-3, 1.0)), draw(log_uniform(1e-3, 1.0))
    # mo = 1 / (2**20 · ratio): from just below 1 down to ~1e-8
    ratio = draw(log_uniform(2.0**-20 * 1.001, 100.0))
    return s1, s2, float(np.float32(2 * max(s1, s2) * ratio))


@hsettings(100)
@given(shapes=broadcast_shapes(), scales=add_scales(), z1=zero_points, z2=zero_points, zo=zero_points,
       act=st.sampled_from(ACTIVATIONS), seed=seeds, subtract=st.booleans())
def test_add_sub_match_litert(shapes, scales, z1, z2, zo, act, seed, subtract):
    rng = np.random.default_rng(seed)
    a, b = int8_data(rng, shapes[0]), int8_data(rng, shapes[1])
    s1, s2, so = scales
    if subtract:
        p = qk.prepare_sub(s1, s2, so, zo, act)
        got = qk.sub(a, b, input1_zero_point=z1, input2_zero_point=z2, **p.as_kwargs())
        expected = _binary(OP.SUB, SubOptions(fused_activation_function=ACT[act]), a, b, s1, z1, s2, z2, so, zo)
        assert_same("SUB", got, expected)
    else:
        p = qk.prepare_add(s1, s2, so, zo, act)
        got = qk.add(a, b, input1_zero_point=z1, input2_zero_point=z2, **p.as_kwargs())
        expected = _binary(OP.ADD, AddOptions(fused_activation_function=ACT[act]), a, b, s1, z1, s2, z2, so, zo)
        assert_same("ADD", got, expected)


def test_add_rejects_output_multiplier_of_one_or_more():
    # LiteRT aborts the process (TFLITE_CHECK) here, so it is not run.
    with pytest.raises(qk.QKernelError, match="output multiplier"):
        qk.prepare_add(0.5, 0.25, 2.0**-20, 0)
    with pytest.raises(qk.QKernelError, match="output multiplier"):
        qk.prepare_sub(0.5, 0.25, 2.0**-21, 0)


@hsettings(60)
@given(shapes=broadcast_shapes(), s1=log_uniform(1e-3, 1.0), s2=log_uniform(1e-3, 1.0), z1=zero_points,
       z2=zero_points, zo=zero_points, ratio=log_uniform(1e-6, 1e3), act=st.sampled_from(ACTIVATIONS), seed=seeds)
def test_mul_matches_litert(shapes, s1, s2, z1, z2, zo, ratio, act, seed):
    rng = np.random.default_rng(seed)
    a, b = int8_data(rng, shapes[0]), int8_data(rng, shapes[1])
    so = float(np.float32(s1 * s2 * 255 / ratio))  # multipliers from ~4e-9 to ~4e3 / 65025
    p = qk.prepare_mul(s1, s2, so, zo, act)
    got = qk.mul(a, b, input1_zero_point=z1, input2_zero_point=z2, **p.as_kwargs())
    assert_same("MUL", got, _binary(OP.MUL, MulOptions(fused_activation_function=ACT[act]), a, b, s1, z1, s2, z2,
                                    so, zo))


@pytest.mark.parametrize("kind", ["relu", "relu6", "relu_n1_to_1", "relu_0_to_1"])
@hsettings(15)
@given(s_in=log_uniform(1e-3, 1.0), ratio=log_uniform(0.05, 20.0), zp_in=zero_points, zp_out=zero_points)
def test_relu_family_matches_litert(kind, s_in, ratio, zp_in, zp_out):
    s_out = float(np.float32(s_in * ratio))
    p = qk.prepare_relu(kind, s_in, zp_in, s_out, zp_out)
    got = qk.relu(ALL_Q, **p.as_kwargs())
    code = {"relu": OP.RELU, "relu6": OP.RELU6, "relu_n1_to_1": OP.RELU_N1_TO_1, "relu_0_to_1": OP.RELU_0_TO_1}[kind]
    (expected,) = run_op(code, [T(ALL_Q.shape, scale=s_in, zero_point=zp_in)],
                         [T(ALL_Q.shape, scale=s_out, zero_point=zp_out)], [ALL_Q])
    assert_same(kind.upper(), got, expected)


@hsettings(40)
@given(s_in=log_uniform(1e-3, 1.0), ratio=log_uniform(0.05, 20.0), zp_in=zero_points, zp_out=zero_points,
       alpha=st.one_of(st.sampled_from([0.0, 0.01, 0.2, 1.0, -0.5]), st.floats(-2.0, 2.0)))
def test_leaky_relu_matches_litert(s_in, ratio, zp_in, zp_out, alpha):
    s_out = float(np.float32(s_in * ratio))
    p = qk.prepare_leaky_relu(s_in, zp_in, alpha, s_out, zp_out)
    got = qk.leaky_relu(ALL_Q, **p.as_kwargs())
    (expected,) = run_op(OP.LEAKY_RELU, [T(ALL_Q.shape, scale=s_in, zero_point=zp_in)],
                         [T(ALL_Q.shape, scale=s_out, zero_point=zp_out)], [ALL_Q], LeakyReluOptions(alpha=alpha))
    assert_same("LEAKY_RELU", got, expected)


@hsettings(50)
@given(s_in=log_uniform(1e-3, 2.0), ratio=log_uniform(1.0 / 60, 20.0), zp_in=zero_points, zp_out=zero_points)
def test_hard_swish_matches_litert(s_in, ratio, zp_in, zp_out):
    s_out = float(np.float32(s_in * ratio))
    assume(s_in / 128 / s_out < 1.0)
    p = qk.prepare_hard_swish(s_in, zp_in, s_out, zp_out)
    got = qk.hard_swish(ALL_Q, **p.as_kwargs())
    (expected,) = run_op(OP.HARD_SWISH, [T(ALL_Q.shape, scale=s_in, zero_point=zp_in)],
                         [T(ALL_Q.shape, scale=s_out, zero_point=zp_out)], [ALL_Q])
    assert_same("HARD_SWISH", got, expected)


def test_hard_swish_rejects_what_litert_rejects():
    with pytest.raises(qk.QKernelError, match="exponent"):
        qk.prepare_hard_swish(1.0, 0, 1.0 / 256, 0)
    with pytest.raises(RuntimeError):
        run_op(OP.HARD_SWISH, [T((4,), scale=1.0)], [T((4,), scale=1.0 / 256)], [np.zeros(4, np.int8)])


@hsettings(60)
@given(s_in=log_uniform(1e-3, 1.0), zp_in=zero_points, zp_out=zero_points, tanh=st.booleans(),
       s_out_tanh=st.sampled_from([1 / 128, 1 / 100, 0.05]))
def test_logistic_and_tanh_match_litert(s_in, zp_in, zp_out, tanh, s_out_tanh):
    if tanh:
        table = qk.prepare_tanh(s_in, zp_in, s_out_tanh, zp_out)
        got, code, s_out, name = qk.tanh(ALL_Q, table=table), OP.TANH, s_out_tanh, "TANH"
    else:
        table = qk.prepare_logistic(s_in, zp_in, 1 / 256, zp_out)
        got, code, s_out, name = qk.logistic(ALL_Q, table=table), OP.LOGISTIC, 1 / 256, "LOGISTIC"
    (expected,) = run_op(code, [T(ALL_Q.shape, scale=s_in, zero_point=zp_in)],
                         [T(ALL_Q.shape, scale=s_out, zero_point=zp_out)], [ALL_Q])
    assert_same(name, got, expected)


def test_logistic_rejects_output_scale_other_than_1_over_256():
    with pytest.raises(qk.QKernelError, match="1/256"):
        qk.prepare_logistic(0.1, 0, 1 / 255, -128)
    with pytest.raises(RuntimeError):
        run_op(OP.LOGISTIC, [T((4,), scale=0.1)], [T((4,), scale=1 / 255, zero_point=-128)], [np.zeros(4, np.int8)])


@hsettings(40)
@given(scale=log_uniform(1e-3, 1.0), zp=zero_points, seed=seeds, per_channel=st.booleans())
def test_quantize_float_to_int8_matches_litert(scale, zp, seed, per_channel):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-300, 300, 200) * scale,               # beyond the range: saturation
                        (np.arange(-130, 130) + 0.5) * scale,              # ties
                        rng.standard_normal(100) * 40 * scale]).astype(np.float32).reshape(4, -1)
    if per_channel:
        scales = (scale * np.array([1.0, 0.5, 3.0, 0.1])).astype(np.float32)
        zps = np.array([zp, 0, -zp // 2, 5])
        got = qk.quantize(x, scale=scales, zero_point=zps, axis=0)
        out_t = T(x.shape, scale=scales, zero_point=zps, axis=0)
    else:
        got = qk.quantize(x, scale=scale, zero_point=zp)
        out_t = T(x.shape, scale=scale, zero_point=zp)
    (expected,) = run_op(OP.QUANTIZE, [T(x.shape, np.float32)], [out_t], [x], QuantizeOptions())
    assert_same("QUANTIZE (float->int8)", got, expected)


@hsettings(40)
@given(s_in=log_uniform(1e-3, 1.0), ratio=log_uniform(1e-3, 1e3), zp_in=zero_points, zp_out=zero_points,
       out_dtype=st.sampled_from([np.int8, np.int8, np.uint8]))
def test_requantize_matches_litert(s_in, ratio, zp_in, zp_out, out_dtype):
    s_out = float(np.float32(s_in * ratio))
    if out_dtype is np.uint8:
        zp_out = zp_out + 128
    p = qk.prepare_requantize(s_in, s_out)
    got = qk.requantize(ALL_Q, input_zero_point=zp_in, output_zero_point=zp_out, out_dtype=out_dtype,
                        **p.as_kwargs())
    (expected,) = run_op(OP.QUANTIZE, [T(ALL_Q.shape, scale=s_in, zero_point=zp_in)],
                         [T(ALL_Q.shape, out_dtype, scale=s_out, zero_point=zp_out)], [ALL_Q], QuantizeOptions())
    assert_same("QUANTIZE (requantize)", got, expected)


@hsettings(20)
@given(scale=log_uniform(1e-4, 10.0), zp=zero_points)
def test_dequantize_matches_litert(scale, zp):
    got = qk.dequantize(ALL_Q, scale=scale, zero_point=zp)
    (expected,) = run_op(OP.DEQUANTIZE, [T(ALL_Q.shape, scale=scale, zero_point=zp)],
                         [T(ALL_Q.shape, np.float32)], [ALL_Q])
    assert_same("DEQUANTIZE", got.view(np.int32), expected.view(np.int32))  # bit patterns
