"""int16x8 kernels against LiteRT's BUILTIN_REF, bit for bit: FULLY_CONNECTED, BATCH_MATMUL, ADD, SUB, MUL,
MEAN, QUANTIZE, DEQUANTIZE, CONCATENATION and GATHER on int16 activations (symmetric, zero point 0)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .qk_oracle import ACTIVATIONS, OP, T, assert_same, hsettings, log_uniform, run_op, seeds
from quantir.backends.tflite import (ActivationFunctionType, AddOptions, ConcatenationOptions, FullyConnectedOptions,
                                     MulOptions, ReducerOptions, SubOptions)
from quantir.backends.tflite.schema import BatchMatMulOptions, QuantizeOptions, TensorType
from quantir.runtime import qkernels as qk
from quantir.runtime.qkernels.add import AddParams, AddPotParams

pytestmark = pytest.mark.oracle

ACT = {"none": ActivationFunctionType.NONE, "relu": ActivationFunctionType.RELU,
       "relu6": ActivationFunctionType.RELU6, "relu_n1_to_1": ActivationFunctionType.RELU_N1_TO_1}
ALL_Q16 = np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256)   # every int16 value
I16 = np.int16


def int16_data(rng: np.random.Generator, shape, spread: str = "full") -> np.ndarray:
    """int16 data: full range with ~5% at each end, or small (|q| < 300, as a well-scaled residual)."""
    if spread == "small":
        return rng.integers(-300, 301, size=shape).astype(I16)
    x = rng.integers(-32768, 32768, size=shape)
    u = rng.random(size=shape)
    x[u < 0.05] = -32768
    x[u > 0.95] = 32767
    return x.astype(I16)


@st.composite
def broadcast_shapes(draw):
    """Two shapes of rank 2-4 that broadcast (equal, per-channel, per-row, scalar-like, rank-different)."""
    rank = draw(st.integers(2, 4))
    full = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    c = full[-1]
    other = draw(st.sampled_from([full, (1,) * (rank - 1) + (c,), full[:-1] + (1,), (1,), (c,), full[1:]]))
    return (full, other) if draw(st.booleans()) else (other, full)


# ---------------------------------------------------------------------------- FULLY_CONNECTED


@hsettings(220)
@given(data=st.data(), lead=st.sampled_from([(3,), (2, 5), (1, 4, 3), (2, 2, 2)]), k=st.integers(1, 40),
       c_out=st.integers(1, 6), act=st.sampled_from(ACTIVATIONS), per_channel=st.booleans(),
       bias=st.sampled_from(["int64", "int64-big", "int32", "none"]), spread=st.sampled_from(["full", "small"]),
       keep=st.booleans(), seed=seeds)
def test_fully_connected_16x8_matches_litert(data, lead, k, c_out, act, per_channel, bias, spread, keep, seed):
    rng = np.random.default_rng(seed)
    s_in = data.draw(log_uniform(1e-5, 1e-1))
    w_scales = (data.draw(log_uniform(1e-4, 1e-1)) * 10 ** rng.uniform(0, 2, c_out)).astype(np.float32)
    if not per_channel:
        w_scales = w_scales[:1]
    # the output scale puts the largest accumulator anywhere from far inside to far past int16
    s_out = float(np.float32(s_in * float(w_scales.max()) * np.sqrt(k) * data.draw(log_uniform(1.0, 3e4))))
    x = int16_data(rng, (*lead, k), spread)
    w = rng.integers(-127, 128, size=(c_out, k)).astype(np.int8)
    bias_type = "int32" if bias == "int32" else "int64"
    b = None
    if bias != "none":
        # a realistic bias lands within a few times the output range; "big" ones need int64 storage
        # when s_in·s_w is tiny (past that LiteRT's double -> int32 cast is undefined)
        reach = int(min(2**40, 1e5 * s_out / (s_in * float(w_scales.min()))))
        hi = max(2, reach if bias == "int64-big" else min(reach, 2**20))
        b = rng.integers(-hi, hi, size=c_out).astype(np.int64 if bias_type == "int64" else np.int32)
    try:
        p = qk.prepare_fully_connected(s_in, w_scales, s_out, 0, act, channels=c_out, storage=I16,
                                       bias_type=bias_type)
    except qk.QKernelError as e:   # an activation bound past int32 at a tiny output scale: LiteRT refuses too
        assert "past int32" in str(e), e
        p = None
    bias_scales = (np.float64(s_in) * w_scales.astype(np.float64)).astype(np.float32)
    bias_t = None if b is None else T((c_out,), b.dtype.type, scale=bias_scales, data=b)
    bias_option = TensorType.INT32 if bias_type == "int32" else TensorType.FLOAT32
    options = FullyConnectedOptions(fused_activation_function=ACT[act], keep_num_dims=keep,
                                    quantized_bias_type=bias_option)
    out_shape = (*lead, c_out) if keep else (int(np.prod(lead)), c_out)
    args = ([T(x.shape, I16, s_in), T(w.shape, np.int8, w_scales, data=w), bias_t], [T(out_shape, I16, s_out)], [x],
            options)
    if p is None:
        with pytest.raises(RuntimeError, match="no_integer_overflow_from_quantization"):
            run_op(OP.FULLY_CONNECTED, *args)
        return
    got = qk.fully_connected(x, w, b, input_zero_point=0, **p.as_kwargs())
    (expected,) = run_op(OP.FULLY_CONNECTED, *args)
    assert_same("FULLY_CONNECTED (16x8)", got, expected.reshape(got.shape))


def test_fully_connected_16x8_refuses_what_litert_refuses():
    x = np.zeros((2, 8), I16)
    w = np.ones((3, 8), np.int8)
    for kwargs in ({"input_zero_point": 1}, {"output_zero_point": 2}):
        zp_out = kwargs.get("output_zero_point", 0)
        with pytest.raises(qk.QKernelError, match="zero point 0"):
            qk.prepare_fully_connected(0.01, 0.02, 0.5, zp_out, storage=I16,
                                       input_zero_point=kwargs.get("input_zero_point", 0))
        with pytest.raises(RuntimeError):   # and LiteRT fails to prepare the same model
            run_op(OP.FULLY_CONNECTED, [T(x.shape, I16, 0.01, kwargs.get("input_zero_point", 0)),
                                        T(w.shape, np.int8, 0.02, data=w), None],
                   [T((2, 3), I16, 0.5, zp_out)], [x])


def test_fully_connected_16x8_int32_bias_needs_quantized_bias_type():
    """Without quantized_bias_type=INT32, LiteRT reads an int32 bias tensor as int64 (garbage): the IR
    always declares its bias type, so an int32 bias is only valid with the option; with it, int32 math."""
    rng = np.random.default_rng(3)
    x, w = int16_data(rng, (2, 8)), rng.integers(-127, 128, size=(3, 8)).astype(np.int8)
    b = np.array([1000, -2000, 5], np.int32)
    p = qk.prepare_fully_connected(0.01, 0.02, 0.5, 0, storage=I16, bias_type="int32")
    got = qk.fully_connected(x, w, b, input_zero_point=0, **p.as_kwargs())
    biased = [T(x.shape, I16, 0.01), T(w.shape, np.int8, 0.02, data=w), T((3,), np.int32, 0.0002, data=b)]
    (with_option,) = run_op(OP.FULLY_CONNECTED, biased, [T((2, 3), I16, 0.5)], [x],
                            FullyConnectedOptions(quantized_bias_type=TensorType.INT32))
    assert_same("FULLY_CONNECTED (16x8)", got, with_option)
    (without,) = run_op(OP.FULLY_CONNECTED, biased, [T((2, 3), I16, 0.5)], [x], FullyConnectedOptions())
    assert not np.array_equal(without, with_option)   # the int32 data misread as int64
    with pytest.raises(qk.QKernelError, match="int64 or int32"):
        qk.prepare_fully_connected(0.01, 0.02, 0.5, 0, storage=I16, bias_type="int16")


def test_fully_connected_16x8_int32_accumulator_overflow_is_refused():
    x = np.full((1, 4096), 32767, I16)
    w = np.full((1, 4096), 127, np.int8)
    p = qk.prepare_fully_connected(0.01, 0.02, 0.5, 0, storage=I16, bias_type="int32")
    with pytest.raises(qk.AccumulatorOverflowError):
        qk.fully_connected(x, w, np.zeros(1, np.int32), input_zero_point=0, **p.as_kwargs())


# ---------------------------------------------------------------------------- BATCH_MATMUL

BMM_SHAPES = [((2, 3, 5), (2, 5, 4)), ((1, 4, 6, 8), (1, 4, 8, 6)), ((3, 2, 7, 16), (1, 1, 16, 5)), ((4, 9), (9, 3)),
              ((2, 12, 64), (2, 64, 12))]


@hsettings(220)
@given(shapes=st.sampled_from(BMM_SHAPES), adj=st.sampled_from([(False, False), (True, False), (False, True)]),
       s_a=log_uniform(1e-5, 1e-1), s_b=log_uniform(1e-5, 1e-1), headroom=log_uniform(1.0, 1e5),
       spread=st.sampled_from(["full", "small"]), seed=seeds)
def test_batch_matmul_int16_matches_litert(shapes, adj, s_a, s_b, headroom, spread, seed):
    (sa, sb), (adj_x, adj_y) = shapes, adj
    sa = (*sa[:-2], sa[-1], sa[-2]) if adj_x else sa
    sb = (*sb[:-2], sb[-1], sb[-2]) if adj_y else sb
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, sa, spread), int16_data(rng, sb, spread)
    s_out = float(np.float32(s_a * s_b * headroom * 10))
    p = qk.prepare_batch_matmul(s_a, s_b, s_out, 0, storage=I16)
    got = qk.batch_matmul(a, b, lhs_zero_point=0, rhs_zero_point=0, adj_x=adj_x, adj_y=adj_y, **p.as_kwargs())
    (expected,) = run_op(OP.BATCH_MATMUL, [T(sa, I16, s_a), T(sb, I16, s_b)], [T(got.shape, I16, s_out)], [a, b],
                         BatchMatMulOptions(adj_x=adj_x, adj_y=adj_y))
    assert_same("BATCH_MATMUL (int16)", got, expected)


def test_batch_matmul_int16_refuses_nonzero_zero_points():
    a = np.zeros((2, 3), I16)
    with pytest.raises(qk.QKernelError, match="zero point 0"):
        qk.prepare_batch_matmul(0.1, 0.1, 0.1, 4, storage=I16)
    p = qk.prepare_batch_matmul(0.1, 0.1, 0.1, 0, storage=I16)
    with pytest.raises(qk.QKernelError, match="zero point 0"):
        qk.batch_matmul(a, a.T.copy(), lhs_zero_point=3, rhs_zero_point=0, **p.as_kwargs())
    with pytest.raises(RuntimeError, match="zero_point"):
        run_op(OP.BATCH_MATMUL, [T((2, 3), I16, 0.1, 3), T((3, 2), I16, 0.1)], [T((2, 2), I16, 0.1)],
               [a, a.T.copy()], BatchMatMulOptions())


# ---------------------------------------------------------------------------- ADD / SUB


@st.composite
def add_scales(draw):
    """General scales (any ratio LiteRT accepts), or powers of two (the POT kernel), sometimes off by 1e-4."""
    if draw(st.booleans()):
        s1, s2 = draw(log_uniform(1e-5, 1e-1)), draw(log_uniform(1e-5, 1e-1))
        ratio = draw(log_uniform(2.0**-15 * 1.001, 30.0))   # mo = 1 / (2**15 · ratio) < 1
        return s1, s2, float(np.float32(2 * max(s1, s2) * ratio))
    eo = draw(st.integers(-16, -3))
    e1, e2 = eo - draw(st.integers(0, 6)), eo
    if draw(st.booleans()):
        e1, e2 = e2, e1
    nudge = draw(st.sampled_from([1.0, 1.0, 1.0 + 1e-4]))   # within CheckedLog2's 1e-3: still "POT"
    return float(np.float32(2.0**e1 * nudge)), float(np.float32(2.0**e2)), float(np.float32(2.0**eo))


@hsettings(240)
@given(shapes=broadcast_shapes(), scales=add_scales(), act=st.sampled_from(ACTIVATIONS), seed=seeds,
       subtract=st.booleans(), pot_option=st.sampled_from([True, True, False]))
def test_add_sub_int16_match_litert(shapes, scales, act, seed, subtract, pot_option):
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, shapes[0]), int16_data(rng, shapes[1])
    s1, s2, so = scales
    prepare, kernel, code, options, name = ((qk.prepare_sub, qk.sub, OP.SUB, SubOptions, "SUB") if subtract else
                                            (qk.prepare_add, qk.add, OP.ADD, AddOptions, "ADD"))
    p = prepare(s1, s2, so, 0, act, storage=I16, pot_scale_int16=pot_option)
    pot = isinstance(p, AddPotParams)
    if pot and not subtract and a.shape != b.shape:   # LiteRT's POT ADD has no broadcasting: refused
        with pytest.raises(qk.QKernelError, match="does not broadcast"):
            kernel(a, b, input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())
        return
    got = kernel(a, b, input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    (expected,) = run_op(code, [T(a.shape, I16, s1), T(b.shape, I16, s2)], [T(out_shape, I16, so)], [a, b],
                         options(fused_activation_function=ACT[act], pot_scale_int16=pot_option))
    assert_same(f"{name} (int16 {'POT' if pot else 'general'})", got, expected)


def test_add_int16_chooses_the_pot_kernel_like_litert():
    assert isinstance(qk.prepare_add(2**-10, 2**-12, 2**-10, 0, storage=I16), AddPotParams)
    assert isinstance(qk.prepare_add(2**-10 * 1.0005, 2**-12, 2**-10, 0, storage=I16), AddPotParams)
    assert isinstance(qk.prepare_add(2**-10 * 1.01, 2**-12, 2**-10, 0, storage=I16), AddParams)
    assert isinstance(qk.prepare_add(2**-10, 2**-12, 2**-10, 0, storage=I16, pot_scale_int16=False), AddParams)
    assert qk.prepare_add(0.01, 0.02, 0.05, 0, storage=I16).left_shift == 15


def test_add_sub_int16_refuse_what_litert_refuses():
    a = np.zeros((2, 3), I16)
    with pytest.raises(qk.QKernelError, match="zero point 0"):
        qk.prepare_add(0.01, 0.01, 0.02, 0, storage=I16, input_zero_points=(1, 0))
    # POT: both inputs finer than the output (input1_shift == 0 || input2_shift == 0 fails) or one coarser
    for s1, s2 in ((2**-12, 2**-12), (2**-8, 2**-10)):
        with pytest.raises(qk.QKernelError, match="input1_shift == 0"):
            qk.prepare_sub(s1, s2, 2**-10, 0, storage=I16)
        with pytest.raises(RuntimeError):
            run_op(OP.SUB, [T((2, 3), I16, s1), T((2, 3), I16, s2)], [T((2, 3), I16, 2**-10)], [a, a], SubOptions())


# ---------------------------------------------------------------------------- MUL


@hsettings(220)
@given(shapes=broadcast_shapes(), s1=log_uniform(1e-4, 1e-1), s2=log_uniform(1e-4, 1e-1),
       headroom=log_uniform(1.01, 1e5), act=st.sampled_from(ACTIVATIONS), seed=seeds)
def test_mul_int16_matches_litert(shapes, s1, s2, headroom, act, seed):
    rng = np.random.default_rng(seed)
    a, b = int16_data(rng, shapes[0]), int16_data(rng, shapes[1])
    so = float(np.float32(s1 * s2 * headroom))
    p = qk.prepare_mul(s1, s2, so, 0, act, storage=I16)
    got = qk.mul(a, b, input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    (expected,) = run_op(OP.MUL, [T(a.shape, I16, s1), T(b.shape, I16, s2)], [T(out_shape, I16, so)], [a, b],
                         MulOptions(fused_activation_function=ACT[act]))
    assert_same("MUL (int16)", got, expected)


@hsettings(12)
@given(scales=add_scales(), s_mul=log_uniform(1e-4, 1e-1), headroom=log_uniform(1.01, 1e4),
       broadcast=st.booleans(), subtract=st.booleans(), seed=seeds)
def test_large_int16_add_sub_mul_match_litert(scales, s_mul, headroom, broadcast, subtract, seed):
    """Arrays of 65,536 elements or more take other paths: the inputs' rescaling looked up in the
    function of every int16 value, and the requantization compiled (when numba is installed)."""
    rng = np.random.default_rng(seed)
    a = int16_data(rng, (2, 300, 120))
    b = int16_data(rng, (1, 300, 1) if broadcast else (2, 300, 120))
    s1, s2, so = scales
    prepare, kernel, code, options = ((qk.prepare_sub, qk.sub, OP.SUB, SubOptions) if subtract else
                                      (qk.prepare_add, qk.add, OP.ADD, AddOptions))
    p = prepare(s1, s2, so, 0, "none", storage=I16, pot_scale_int16=False)
    got = kernel(a, b, input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())
    (expected,) = run_op(code, [T(a.shape, I16, s1), T(b.shape, I16, s2)], [T(a.shape, I16, so)], [a, b],
                         options(pot_scale_int16=False))
    assert_same("ADD/SUB (int16, large)", got, expected)
    so = float(np.float32(s_mul * s_mul * headroom))
    p = qk.prepare_mul(s_mul, s_mul, so, 0, "relu", storage=I16)
    got = qk.mul(a, b, input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())
    (expected,) = run_op(OP.MUL, [T(a.shape, I16, s_mul), T(b.shape, I16, s_mul)], [T(a.shape, I16, so)], [a, b],
                         MulOptions(fused_activation_function=ACT["relu"]))
    assert_same("MUL (int16, large)", got, expected)


def test_mul_int16_refuses_an_overflowing_left_shift():
    """s1·s2/s_out > 1 shifts the int32 product left first; past int32 that is undefined in LiteRT."""
    p = qk.prepare_mul(0.1, 0.1, 0.001, 0, storage=I16)
    big = np.full((1, 2), 32767, I16)
    with pytest.raises(qk.QKernelError, match="overflows int32"):
        qk.mul(big, big, input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())


def test_mul_int16_refuses_zero_points():
    with pytest.raises(qk.QKernelError, match="zero point 0"):
        qk.prepare_mul(0.1, 0.1, 0.1, 0, storage=I16, input_zero_points=(0, 2))
    a = np.ones((2, 2), I16)
    with pytest.raises(RuntimeError):
        run_op(OP.MUL, [T((2, 2), I16, 0.1, 2), T((2, 2), I16, 0.1)], [T((2, 2), I16, 0.1)], [a, a], MulOptions())


# ---------------------------------------------------------------------------- MEAN


@hsettings(200)
@given(data=st.data(), rank=st.integers(2, 4), last=st.booleans(), keepdims=st.booleans(),
       s_in=log_uniform(1e-5, 1e-1), ratio=log_uniform(0.05, 20.0), seed=seeds)
def test_mean_int16_matches_litert(data, rank, last, keepdims, s_in, ratio, seed):
    shape = tuple(data.draw(st.integers(1, 6)) for _ in range(rank))
    axes = [rank - 1] if last or rank == 2 else list(range(1, rank - 1))   # last axis, or the spatial axes
    rng = np.random.default_rng(seed)
    x = int16_data(rng, shape, data.draw(st.sampled_from(["full", "small"])))
    s_out = float(np.float32(s_in * ratio))
    n = int(np.prod([shape[a] for a in axes]))
    p = qk.prepare_mean(s_in, 0, s_out, 0, count=n, storage=I16)
    got = qk.mean(x, axes=axes, keepdims=keepdims, **p.as_kwargs())
    (expected,) = run_op(OP.MEAN, [T(shape, I16, s_in), T((len(axes),), np.int32, data=np.array(axes, np.int32))],
                         [T(got.shape, I16, s_out)], [x], ReducerOptions(keep_dims=keepdims))
    assert_same("MEAN (int16)", got, expected)


def test_mean_int16_refuses_zero_points():
    with pytest.raises(qk.QKernelError, match="zero point 0"):
        qk.prepare_mean(0.1, 4, 0.1, 0, count=3, storage=I16)
    x = np.ones((2, 3), I16)
    with pytest.raises(RuntimeError, match="zero_point"):
        run_op(OP.MEAN, [T((2, 3), I16, 0.1, 4), T((1,), np.int32, data=np.array([1], np.int32))],
               [T((2,), I16, 0.1)], [x], ReducerOptions())


# ---------------------------------------------------------------------------- QUANTIZE / DEQUANTIZE


@hsettings(200)
@given(kind=st.sampled_from(["int8->int16", "int16->int8", "int16->int16"]), s_in=log_uniform(1e-5, 1.0),
       ratio=log_uniform(1e-4, 1e4), zp8=st.integers(-128, 127))
def test_requantize_int16_matches_litert(kind, s_in, ratio, zp8):
    """Every input value of the source type; int16 ends symmetric (zp 0), int8 ends any zero point."""
    s_out = float(np.float32(s_in * ratio))
    src, dst = {"int8->int16": (np.int8, I16), "int16->int8": (I16, np.int8), "int16->int16": (I16, I16)}[kind]
    q = np.arange(-128, 128, dtype=np.int8).reshape(16, 16) if src is np.int8 else ALL_Q16
    zp_in, zp_out = (zp8 if src is np.int8 else 0), (zp8 if dst is np.int8 else 0)
    p = qk.prepare_requantize(s_in, s_out)
    got = qk.requantize(q, input_zero_point=zp_in, output_zero_point=zp_out, out_dtype=dst, **p.as_kwargs())
    (expected,) = run_op(OP.QUANTIZE, [T(q.shape, src, s_in, zp_in)], [T(q.shape, dst, s_out, zp_out)], [q],
                         QuantizeOptions())
    assert_same(f"QUANTIZE ({kind})", got, expected)


@hsettings(200)
@given(scale=log_uniform(1e-6, 1.0), seed=seeds)
def test_quantize_float_to_int16_matches_litert(scale, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-40000, 40000, 300) * scale,            # beyond the range: saturation
                        (np.arange(-200, 200) + 0.5) * scale,               # ties
                        rng.standard_normal(300) * 3000 * scale]).astype(np.float32).reshape(10, -1)
    got = qk.quantize(x, scale=scale, zero_point=0, dtype=I16)
    (expected,) = run_op(OP.QUANTIZE, [T(x.shape, np.float32)], [T(x.shape, I16, scale)], [x], QuantizeOptions())
    assert_same("QUANTIZE (float->int16)", got, expected)


@hsettings(200)
@given(scale=log_uniform(1e-6, 10.0))
def test_dequantize_int16_matches_litert(scale):
    got = qk.dequantize(ALL_Q16, scale=scale, zero_point=0)
    (expected,) = run_op(OP.DEQUANTIZE, [T(ALL_Q16.shape, I16, scale)], [T(ALL_Q16.shape, np.float32)], [ALL_Q16])
    assert_same("DEQUANTIZE (int16)", got.view(np.int32), expected.view(np.int32))


def test_dequantize_int16_refuses_a_zero_point():
    with pytest.raises(qk.QKernelError, match="zero point 0"):
        qk.dequantize(ALL_Q16, scale=0.1, zero_point=3)
    with pytest.raises(RuntimeError, match="zero_point"):
        run_op(OP.DEQUANTIZE, [T(ALL_Q16.shape, I16, 0.1, 3)], [T(ALL_Q16.shape, np.float32)], [ALL_Q16])


# ---------------------------------------------------------------------------- data movement


@hsettings(200)
@given(data=st.data(), rank=st.integers(2, 4), n_inputs=st.integers(1, 3), scale=log_uniform(1e-5, 1.0), seed=seeds)
def test_concatenation_int16_matches_litert(data, rank, n_inputs, scale, seed):
    rng = np.random.default_rng(seed)
    base = [data.draw(st.integers(1, 4)) for _ in range(rank)]
    axis = data.draw(st.integers(0, rank - 1))
    shapes = [tuple(base[:axis] + [data.draw(st.integers(1, 4))] + base[axis + 1:]) for _ in range(n_inputs)]
    xs = [int16_data(rng, s) for s in shapes]
    qk.prepare_concatenation([(scale, 0)] * n_inputs, scale, 0, storage=I16)
    got = qk.concatenation(xs, axis=axis)
    (expected,) = run_op(OP.CONCATENATION, [T(s, I16, scale) for s in shapes], [T(got.shape, I16, scale)], xs,
                         ConcatenationOptions(axis=axis))
    assert_same("CONCATENATION (int16)", got, expected)


def test_concatenation_int16_scale_and_zero_point_rules():
    """LiteRT's int16 CONCATENATION does not compare scales: it copies raw values (misreading an input
    of another scale). quantir refuses unequal scales; nonzero zero points fail LiteRT's Prepare."""
    x = np.array([[1000, -2000]], I16)
    (raw,) = run_op(OP.CONCATENATION, [T((1, 2), I16, 0.1), T((1, 2), I16, 0.2)], [T((1, 4), I16, 0.1)], [x, x],
                    ConcatenationOptions(axis=1))
    assert raw.tolist() == [[1000, -2000, 1000, -2000]]   # the 0.2-scaled input was not rescaled
    with pytest.raises(qk.QKernelError, match="cannot rescale"):
        qk.prepare_concatenation([(0.1, 0), (0.2, 0)], 0.1, 0, storage=I16)
    with pytest.raises(qk.QKernelError, match="zero point 0"):
        qk.prepare_concatenation([(0.1, 5), (0.1, 5)], 0.1, 5, storage=I16)
    with pytest.raises(RuntimeError, match="zero_point"):
        run_op(OP.CONCATENATION, [T((1, 2), I16, 0.1, 5), T((1, 2), I16, 0.1, 5)], [T((1, 4), I16, 0.1, 5)], [x, x],
               ConcatenationOptions(axis=1))


@hsettings(200)
@given(data=st.data(), rank=st.integers(2, 3), seed=seeds)
def test_gather_int16_matches_litert(data, rank, seed):
    from quantir.backends.tflite.schema import GatherOptions
    rng = np.random.default_rng(seed)
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(rank))
    axis = data.draw(st.integers(0, rank - 1))
    x = int16_data(rng, shape)
    idx = rng.integers(0, shape[axis], size=data.draw(st.integers(1, 6))).astype(np.int32)
    got = qk.gather(x, idx, axis=axis)
    (expected,) = run_op(OP.GATHER, [T(shape, I16, 0.01), T(idx.shape, np.int32, data=idx)],
                         [T(got.shape, I16, 0.01)], [x], GatherOptions(axis=axis))
    assert_same("GATHER (int16)", got, expected)


def test_squared_difference_has_no_int16_kernel_in_litert():
    """LiteRT's SQUARED_DIFFERENCE has no int16 path (an int16 LayerNorm uses SUB then MUL)."""
    x = np.ones((2, 3), I16)
    with pytest.raises(RuntimeError, match="SquaredDifference"):
        run_op(OP.SQUARED_DIFFERENCE, [T((2, 3), I16, 0.1), T((2, 3), I16, 0.1)], [T((2, 3), I16, 0.1)], [x, x])


@hsettings(240)
@given(data=st.data(), op=st.sampled_from(["RESHAPE", "TRANSPOSE", "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V"]),
       rank=st.integers(2, 4), seed=seeds)
def test_data_movement_int16_matches_litert(data, op, rank, seed):
    """The IR moves int16 values with numpy (no arithmetic); LiteRT's int16 kernels copy them the same way."""
    from quantir.backends.tflite.schema import (ReshapeOptions, SliceOptions, SplitOptions, SplitVOptions,
                                                StridedSliceOptions, TransposeOptions)
    rng = np.random.default_rng(seed)
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(rank))
    x = int16_data(rng, shape)
    xt = T(shape, I16, 0.01)

    def i32(v):
        v = np.asarray(v, np.int32)
        return T(v.shape, np.int32, data=v)

    if op == "RESHAPE":
        new = tuple(rng.permutation(shape))
        expected_np = [x.reshape(new)]
        inputs, options = [xt, i32(new)], ReshapeOptions(new_shape=new)
    elif op == "TRANSPOSE":
        perm = rng.permutation(rank)
        expected_np = [x.transpose(perm)]
        inputs, options = [xt, i32(perm)], TransposeOptions()
    elif op == "SLICE":
        begin = [int(rng.integers(0, d)) for d in shape]
        size = [int(rng.integers(1, d - b + 1)) for d, b in zip(shape, begin)]
        expected_np = [x[tuple(slice(b, b + s) for b, s in zip(begin, size))]]
        inputs, options = [xt, i32(begin), i32(size)], SliceOptions()
    elif op == "STRIDED_SLICE":
        begin = [int(rng.integers(0, d)) for d in shape]
        end = [int(rng.integers(b + 1, d + 1)) for d, b in zip(shape, begin)]
        strides = [int(rng.integers(1, 3)) for _ in shape]
        expected_np = [x[tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides))]]
        inputs, options = [xt, i32(begin), i32(end), i32(strides)], StridedSliceOptions()
    else:
        axis = int(rng.integers(0, rank))
        if op == "SPLIT":
            n = int(shape[axis])
            expected_np = np.split(x, n, axis=axis)
            inputs, options = [i32(axis), xt], SplitOptions(num_splits=n)
        else:
            cut = int(rng.integers(0, shape[axis] + 1))
            sizes = [cut, shape[axis] - cut]
            expected_np = np.split(x, [cut], axis=axis)
            inputs, options = [xt, i32(sizes), i32(axis)], SplitVOptions(num_splits=2)
    outs = run_op(getattr(OP, op), inputs, [T(e.shape, I16, 0.01) for e in expected_np], [x], options)
    for got, expected in zip(expected_np, outs):
        assert_same(f"{op} (int16)", np.ascontiguousarray(got), expected)
