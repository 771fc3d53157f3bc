"""int16x8 activation kernels (SOFTMAX, LOGISTIC, TANH, GELU, RSQRT, LEAKY_RELU) against LiteRT ``BUILTIN_REF``.

Per op: 200 hypothesis examples on rank 2-4 tensors with input scales of transformer activations
(absolute maximum 1 to 200 over 32767), sweeps of all 65,536 int16 inputs (SOFTMAX: as one row and
as 256 rows), and the parameter checks of each Prepare, each beside LiteRT's own answer.
HARD_SWISH, L2_NORMALIZATION and LOG_SOFTMAX have no int16 kernel in LiteRT: that is checked too, so
a LiteRT that gains one fails here.
"""
import functools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .qk_oracle import OP, T, assert_same, hsettings, log_uniform, run_op, seeds
from quantir.backends.tflite import L2NormOptions, LeakyReluOptions, SoftmaxOptions
from quantir.backends.tflite.schema import GeluOptions, LogSoftmaxOptions
from quantir.runtime import qkernels as qk
from quantir.runtime.qkernels._lut16 import checked_log2, prepare_sigmoid_family, sigmoid_table_uint16

pytestmark = pytest.mark.oracle

ALL16 = np.arange(-32768, 32768, dtype=np.int16)          # every int16 value
TRANSFORMER_SCALES = log_uniform(1 / 32767, 200 / 32767)  # amax 1 .. 200 over the int16 grid
Q15 = 1 / 32768


@st.composite
def shapes(draw):
    rank = draw(st.integers(2, 4))
    return tuple(draw(st.integers(1, 3)) for _ in range(rank - 1)) + (draw(st.integers(1, 48)),)


def int16_data(seed: int, shape, spread: int) -> np.ndarray:
    """int16 values within ±spread, about 5% of them at each end of the int16 range."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-spread, spread + 1, size=shape)
    u = rng.random(size=shape)
    x[u < 0.05] = -32768
    x[u > 0.95] = 32767
    return x.astype(np.int16)


spreads = st.sampled_from([32767, 8000, 1000, 100])


def one_op(code, x, s_in, s_out, options=None, zp_in=0, zp_out=0):
    (y,) = run_op(code, [T(x.shape, np.int16, scale=s_in, zero_point=zp_in)],
                  [T(x.shape, np.int16, scale=s_out, zero_point=zp_out)], [x], options)
    return y


# ---------------------------------------------------------------------------
# SOFTMAX


@hsettings(200)
@given(shape=shapes(), s_in=TRANSFORMER_SCALES, beta=st.sampled_from([1.0, 1.0, 0.5, 2.0]), spread=spreads,
       seed=seeds, ties=st.booleans())
def test_softmax_int16_matches_litert(shape, s_in, beta, spread, seed, ties):
    x = int16_data(seed, shape, spread)
    if ties:
        x.reshape(-1, shape[-1])[0, :] = x.reshape(-1)[0]   # a row of equal logits
    p = qk.prepare_softmax(s_in, beta, storage=np.int16)
    expected = one_op(OP.SOFTMAX, x, s_in, Q15, SoftmaxOptions(beta=beta))
    assert_same("SOFTMAX int16", qk.softmax(x, **p.as_kwargs()), expected)


def test_softmax_int16_values():
    # Two equal logits: 1/2 each (16384 of 32768); logits 10 apart (s_in 0.01, q 1000 apart):
    # 1/(1 + e^-10) and e^-10/(1 + e^-10) = 1.49 steps. LiteRT's tables are good to about a step.
    p = qk.prepare_softmax(0.01, storage=np.int16)
    y = qk.softmax(np.array([[5, 5], [1000, 0]], np.int16), **p.as_kwargs())
    assert abs(int(y[0, 0]) - 16384) <= 1 and y[0, 0] == y[0, 1]
    exact = 32768 * np.array([1, np.exp(-10)]) / (1 + np.exp(-10))
    assert np.abs(y[1] - exact).max() <= 1


def test_softmax_int16_refuses_what_litert_refuses():
    x = np.zeros((1, 4), np.int16)
    for s_out, zp_out in ((1 / 32768 * 1.01, 0), (1 / 256, 0), (1 / 32768, 3)):
        with pytest.raises(qk.QKernelError, match="int16 output must be quantized with scale 1/32768"):
            qk.prepare_softmax(0.01, 1.0, s_out, zp_out, storage=np.int16)
        with pytest.raises(RuntimeError, match="SOFTMAX"):
            one_op(OP.SOFTMAX, x, 0.01, s_out, SoftmaxOptions(beta=1.0), zp_out=zp_out)
    # 0.05% off 1/32768 is within LiteRT's TF_LITE_ENSURE_NEAR: both accept it
    qk.prepare_softmax(0.01, 1.0, 1 / 32768 * 1.0005, storage=np.int16)
    one_op(OP.SOFTMAX, x, 0.01, 1 / 32768 * 1.0005, SoftmaxOptions(beta=1.0))
    with pytest.raises(qk.QKernelError, match="input zero point must be 0"):
        qk.prepare_softmax(0.01, storage=np.int16, input_zero_point=1)
    with pytest.raises(RuntimeError, match="SOFTMAX"):
        one_op(OP.SOFTMAX, x, 0.01, Q15, SoftmaxOptions(beta=1.0), zp_in=1)


@pytest.mark.parametrize("s_in", [1 / 32767, 20 / 32767, 200 / 32767])
@pytest.mark.parametrize("rows", [1, 256])
def test_softmax_int16_every_input(s_in, rows):
    """All 65,536 int16 values: one row (every value against the maximum 32767) and 256 rows of 256."""
    x = ALL16.reshape(rows, -1)
    p = qk.prepare_softmax(s_in, storage=np.int16)
    assert_same("SOFTMAX int16 (all inputs)", qk.softmax(x, **p.as_kwargs()),
                one_op(OP.SOFTMAX, x, s_in, Q15, SoftmaxOptions(beta=1.0)))


@pytest.mark.parametrize("s_in", [1e-12, 1e-9, 0.5, 5.0])
def test_softmax_int16_any_positive_input_scale(s_in):
    """LiteRT takes any input scale: tiny ones flatten every row (multiplier 0 or all within a step),
    up to 5 the largest difference (65535) still fits the rescaling's int32."""
    x = np.array([[-32768, -20000, 0, 100, 32767, 32700]], np.int16)
    p = qk.prepare_softmax(s_in, storage=np.int16)
    assert_same("SOFTMAX int16 (extreme input scales)", qk.softmax(x, **p.as_kwargs()),
                one_op(OP.SOFTMAX, x, s_in, Q15, SoftmaxOptions(beta=1.0)))


def test_softmax_int16_refuses_a_rescaling_that_overflows():
    """At s_in·beta = 10 the difference times 2**16 passes int32 (undefined in C; LiteRT's output is
    then not a softmax): quantir refuses the row instead of inventing integers."""
    x = np.array([[-32768, 0, 32767]], np.int16)
    with pytest.raises(qk.QKernelError, match="overflows int32"):
        qk.softmax(x, **qk.prepare_softmax(10.0, storage=np.int16).as_kwargs())
    y = one_op(OP.SOFTMAX, x, 10.0, Q15, SoftmaxOptions(beta=1.0))
    assert y.astype(np.int64).sum() < 32768 * 0.9 or y[0, 0] > 0   # not the one-hot softmax of these logits


@pytest.mark.parametrize("shape", [(9,), (2, 1, 3, 2, 7), (1, 2, 1, 2, 2, 9)])
def test_softmax_int16_any_rank(shape):
    """Older LiteRT sources refuse int16 SOFTMAX above rank 4; ai-edge-litert 2.3.0 runs it on the last axis."""
    x = int16_data(7, shape, 3000)
    p = qk.prepare_softmax(0.003, storage=np.int16)
    assert_same("SOFTMAX int16 (rank 1, 5, 6)", qk.softmax(x, **p.as_kwargs()),
                one_op(OP.SOFTMAX, x, 0.003, Q15, SoftmaxOptions(beta=1.0)))


# ---------------------------------------------------------------------------
# LOGISTIC and TANH (fixed point on LiteRT's sigmoid table)

SIGMOID_FAMILY = {"LOGISTIC": (OP.LOGISTIC, functools.partial(qk.prepare_logistic, storage=np.int16), qk.logistic),
                  "TANH": (OP.TANH, functools.partial(qk.prepare_tanh, storage=np.int16), qk.tanh)}


@pytest.mark.parametrize("name", sorted(SIGMOID_FAMILY))
@hsettings(200)
@given(shape=shapes(), s_in=st.one_of(TRANSFORMER_SCALES, st.sampled_from([2**-12, 2**-11, 2**-13])),
       spread=spreads, seed=seeds)
def test_logistic_tanh_int16_match_litert(name, shape, s_in, spread, seed):
    code, prepare, kernel = SIGMOID_FAMILY[name]
    x = int16_data(seed, shape, spread)
    assert_same(f"{name} int16", kernel(x, table=prepare(s_in, 0)), one_op(code, x, s_in, Q15))


@pytest.mark.parametrize("name", sorted(SIGMOID_FAMILY))
@pytest.mark.parametrize("s_in", [2**-12, 2**-11, 2**-12 * 1.0004, 3.0517578e-05, 200 / 32767, 1e-7, 0.5, 3.0])
def test_logistic_tanh_int16_every_input(name, s_in):
    """All 65,536 inputs at power-of-two scales (no multiplier; 2**-11 only for TANH), a scale that
    CheckedLog2 calls a power of two, transformer scales, and far-out ones (1e-7: a left shift of 31;
    3.0: q·M wraps int32, as LiteRT's arithmetic does)."""
    code, prepare, kernel = SIGMOID_FAMILY[name]
    s_in = float(np.float32(s_in))
    assert_same(f"{name} int16 (all inputs)", kernel(ALL16, table=prepare(s_in, 0)), one_op(code, ALL16, s_in, Q15))


def test_logistic_tanh_int16_values():
    # s_in = 2**-12 (x = q/4096, up to 8): both within 2 steps of 1/32768 of the real functions
    x = np.array([0, 4096, -4096, 20000, 32767], np.int16)
    real = x / 4096.0
    y = qk.logistic(x, table=qk.prepare_logistic(2**-12, 0, storage=np.int16))
    assert np.abs(y - 32768 / (1 + np.exp(-real))).max() <= 2
    y = qk.tanh(x, table=qk.prepare_tanh(2**-12, 0, storage=np.int16))
    assert np.abs(y - 32768 * np.tanh(real)).max() <= 2


def test_sigmoid_family_input_rescaling():
    # power-of-two input scales need no multiplier (2**-11 only for TANH); others get
    # M = trunc(s·4096·3·2**n), just above 32767/2
    assert prepare_sigmoid_family("logistic", 2**-12, 0, Q15, 0, (0,)).input_multiplier == 0
    assert prepare_sigmoid_family("tanh", 2**-11, 0, Q15, 0, (0, 1)).input_multiplier == 0
    assert prepare_sigmoid_family("logistic", 2**-11, 0, Q15, 0, (0,)).input_multiplier > 0
    p = prepare_sigmoid_family("logistic", 0.001, 0, Q15, 0, (0,))
    assert 16383.5 < p.input_multiplier < 32768 and p.input_multiplier == int(0.001 * 12288 * 2**p.input_left_shift)


def test_sigmoid_table_is_sigmoid_in_q0_16():
    t = sigmoid_table_uint16()
    exact = 65536 / (1 + np.exp(-np.arange(256) / 24))
    assert t[0] == 32768 and t[-1] == 65535 and np.all(np.diff(t) >= 0)
    assert np.abs(t - exact).max() < 1.2   # a fitted table: a few entries sit a step above rounding


def test_checked_log2_tolerance():
    assert checked_log2(2**-15) == (True, -15)
    assert checked_log2(2**-15 * 1.0005) == (True, -15)     # within 1e-3 in log2
    assert checked_log2(2**-15 * 1.001)[0] is False


def test_logistic_tanh_int16_output_checks():
    x = np.zeros(4, np.int16)
    # LOGISTIC wants exactly 1/32768; TANH accepts CheckedLog2's tolerance (both sides agree)
    near = 1 / 32768 * 1.0005
    with pytest.raises(qk.QKernelError, match="exactly 1/32768"):
        qk.prepare_logistic(0.001, 0, near, 0, storage=np.int16)
    with pytest.raises(RuntimeError, match="LOGISTIC"):
        one_op(OP.LOGISTIC, x, 0.001, near)
    qk.prepare_tanh(0.001, 0, near, 0, storage=np.int16)
    one_op(OP.TANH, x, 0.001, near)
    for name, (code, prepare, _) in SIGMOID_FAMILY.items():
        with pytest.raises(qk.QKernelError, match="1/32768"):
            prepare(0.001, 0, 2**-14, 0)
        with pytest.raises(RuntimeError, match=name):
            one_op(code, x, 0.001, 2**-14)
        with pytest.raises(qk.QKernelError, match="input zero point must be 0"):
            prepare(0.001, 2, Q15, 0)
        with pytest.raises(RuntimeError, match=name):
            one_op(code, x, 0.001, Q15, zp_in=2)


# ---------------------------------------------------------------------------
# GELU (interpolated 513-entry table)


@hsettings(200)
@given(shape=shapes(), s_in=TRANSFORMER_SCALES, ratio=log_uniform(0.05, 20.0), approximate=st.booleans(),
       zps=st.one_of(st.just((0, 0)), st.tuples(st.integers(-500, 500), st.integers(-500, 500))),
       spread=spreads, seed=seeds)
def test_gelu_int16_matches_litert(shape, s_in, ratio, approximate, zps, spread, seed):
    """LiteRT's int16 GELU checks no zero point: the table only shifts its output range."""
    s_out = float(np.float32(s_in * ratio))
    x = int16_data(seed, shape, spread)
    table = qk.prepare_gelu(s_in, zps[0], s_out, zps[1], approximate=approximate, storage=np.int16)
    expected = one_op(OP.GELU, x, s_in, s_out, GeluOptions(approximate=approximate), *zps)
    assert_same("GELU int16", qk.gelu(x, table=table), expected)


@pytest.mark.parametrize("approximate", [False, True])
@pytest.mark.parametrize("s_in, s_out", [(1 / 32767, 1 / 32767), (8 / 32767, 6 / 32767), (200 / 32767, 100 / 32767)])
def test_gelu_int16_every_input(approximate, s_in, s_out):
    table = qk.prepare_gelu(s_in, 0, s_out, 0, approximate=approximate, storage=np.int16)
    expected = one_op(OP.GELU, ALL16, s_in, s_out, GeluOptions(approximate=approximate))
    got = qk.gelu(ALL16, table=table)
    assert_same("GELU int16 (all inputs)", got, expected)
    x = ALL16.astype(np.float64) * np.float32(s_in)
    if approximate:
        reference = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    else:
        reference = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    inside = np.abs(reference) < 32000 * np.float32(s_out)      # away from the saturated ends
    # The 513-entry table interpolates linearly over h = 128 input steps: a chord is off by at most
    # h²/8·max|GELU''| (= 2φ(0) ≈ 0.8), plus rounding. With wide input scales that is many output steps.
    bound = (128 * s_in) ** 2 / 8 * 0.8 / s_out + 2
    assert np.abs(got[inside] - reference[inside] / np.float32(s_out)).max() <= bound


# ---------------------------------------------------------------------------
# RSQRT


@hsettings(200)
@given(shape=shapes(), s_in=log_uniform(1e-7, 0.05), s_out=log_uniform(1e-4, 0.5), spread=spreads, seed=seeds)
def test_rsqrt_int16_matches_litert(shape, s_in, s_out, spread, seed):
    x = np.abs(int16_data(seed, shape, spread).astype(np.int32)).clip(0, 32767).astype(np.int16)
    p = qk.prepare_rsqrt(s_in, 0, s_out, 0, storage=np.int16)
    assert_same("RSQRT int16", qk.rsqrt(x, **p.as_kwargs()), one_op(OP.RSQRT, x, s_in, s_out))


@pytest.mark.parametrize("s_in, s_out", [(1e-6, 0.01), (0.001, 0.001), (0.02, 2e-4)])
def test_rsqrt_int16_every_input(s_in, s_out):
    x = ALL16[ALL16 >= 0]
    got = qk.rsqrt(x, **qk.prepare_rsqrt(s_in, 0, s_out, 0, storage=np.int16).as_kwargs())
    assert_same("RSQRT int16 (all inputs)", got, one_op(OP.RSQRT, x, s_in, s_out))
    # 1/sqrt(x) falls: apart from the first segment (x = 0 is tabulated as the largest output and
    # then biased by its huge midpoint error), the interpolated table never rises by more than a step
    assert np.diff(got[128:].astype(np.int64)).max() <= 1


def test_rsqrt_int16_refusals():
    with pytest.raises(qk.QKernelError, match="output zero point must be 0"):
        qk.prepare_rsqrt(0.01, 0, 0.01, 1, storage=np.int16)
    with pytest.raises(RuntimeError, match="RSQRT"):
        one_op(OP.RSQRT, np.ones(4, np.int16), 0.01, 0.01, zp_out=1)
    x = np.array([3, -1, 5], np.int16)
    with pytest.raises(qk.QKernelError, match="negative"):
        qk.rsqrt(x, **qk.prepare_rsqrt(0.01, 0, 0.01, 0, storage=np.int16).as_kwargs())
    with pytest.raises(RuntimeError, match="Rsqrt is only defined for positive values"):
        one_op(OP.RSQRT, x, 0.01, 0.01)


# ---------------------------------------------------------------------------
# LEAKY_RELU


@hsettings(200)
@given(shape=shapes(), s_in=TRANSFORMER_SCALES, ratio=log_uniform(0.05, 20.0),
       alpha=st.sampled_from([0.01, 0.1, 0.2, -0.3, 0.0, 1.5]), spread=spreads, seed=seeds)
def test_leaky_relu_int16_matches_litert(shape, s_in, ratio, alpha, spread, seed):
    s_out = float(np.float32(s_in * ratio))
    x = int16_data(seed, shape, spread)
    p = qk.prepare_leaky_relu(s_in, 0, alpha, s_out, 0, storage=np.int16)
    expected = one_op(OP.LEAKY_RELU, x, s_in, s_out, LeakyReluOptions(alpha=alpha))
    assert_same("LEAKY_RELU int16", qk.leaky_relu(x, **p.as_kwargs()), expected)


@pytest.mark.parametrize("alpha", [0.01, -0.5])
def test_leaky_relu_int16_every_input(alpha):
    p = qk.prepare_leaky_relu(0.003, 0, alpha, 0.002, 0, storage=np.int16)
    expected = one_op(OP.LEAKY_RELU, ALL16, 0.003, 0.002, LeakyReluOptions(alpha=alpha))
    assert_same("LEAKY_RELU int16 (all inputs)", qk.leaky_relu(ALL16, **p.as_kwargs()), expected)


def test_leaky_relu_int16_zero_points():
    with pytest.raises(qk.QKernelError, match="input zero point must be 0"):
        qk.prepare_leaky_relu(0.01, 4, 0.1, 0.01, 0, storage=np.int16)
    with pytest.raises(RuntimeError, match="LEAKY_RELU"):
        one_op(OP.LEAKY_RELU, np.zeros(4, np.int16), 0.01, 0.01, LeakyReluOptions(alpha=0.1), zp_in=4)


# ---------------------------------------------------------------------------
# No int16 kernel in LiteRT


@pytest.mark.parametrize("code, options, s_out, message", [
    (OP.HARD_SWISH, None, 0.01, "Only float32, uint8 and int8 are supported"),
    (OP.LOG_SOFTMAX, LogSoftmaxOptions(), 16 / 256, "Only float32, uint8 and int8 are supported"),
    (OP.L2_NORMALIZATION, L2NormOptions(), Q15, "output->type == kTfLiteFloat32"),
])
def test_litert_has_no_int16_kernel(code, options, s_out, message):
    with pytest.raises(RuntimeError, match=message):
        one_op(code, np.ones((2, 4), np.int16), 0.01, s_out, options)
