"""GELU, LOG_SOFTMAX, L2_NORMALIZATION and SUM integer kernels against LiteRT one-op models.

About a hundred hypothesis examples per op (``BUILTIN_REF`` unless a test names the optimized
resolver), plus exact values worked out by hand and the parameter checks of each Prepare.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .qk_oracle import OP, T, assert_same, hsettings, int8_data, log_uniform, run_op, seeds, zero_points
from quantir.backends.tflite import ActivationFunctionType, L2NormOptions, ReducerOptions
from quantir.backends.tflite.schema import GeluOptions, LogSoftmaxOptions
from quantir.runtime import qkernels as qk
from quantir.runtime.qkernels._lut import populate_lut

pytestmark = pytest.mark.oracle

ALL_Q = np.arange(-128, 128, dtype=np.int8)  # every int8 value: one model checks a whole table


@st.composite
def shapes(draw, max_rank: int = 4, max_last: int = 40):
    rank = draw(st.integers(1, max_rank))
    lead = tuple(draw(st.integers(1, 3)) for _ in range(rank - 1))
    return lead + (draw(st.integers(1, max_last)),)


# ---------------------------------------------------------------------------
# GELU


@hsettings(100)
@given(s_in=log_uniform(1e-3, 4.0), ratio=log_uniform(0.02, 50.0), zp_in=zero_points, zp_out=zero_points,
       approximate=st.booleans(), layout=st.sampled_from([(256,), (16, 16), (2, 4, 8, 4)]), seed=seeds,
       resolver=st.sampled_from(["reference", "reference", "optimized"]))
def test_gelu_matches_litert(s_in, ratio, zp_in, zp_out, approximate, layout, seed, resolver):
    """Both resolvers gather from the same table."""
    s_out = float(np.float32(s_in * ratio))
    x = np.random.default_rng(seed).permutation(ALL_Q).reshape(layout)
    table = qk.prepare_gelu(s_in, zp_in, s_out, zp_out, approximate=approximate)
    got = qk.gelu(x, table=table)
    (expected,) = run_op(OP.GELU, [T(x.shape, scale=s_in, zero_point=zp_in)],
                         [T(x.shape, scale=s_out, zero_point=zp_out)], [x], GeluOptions(approximate=approximate),
                         resolver=resolver)
    assert_same("GELU (tanh form)" if approximate else "GELU", got, expected)


def test_gelu_exact_values():
    # s = 0.1 in and out: q = 10 is x = 1, GELU(1) = 0.8413 -> 8; GELU(-1) = -0.1587 -> -1.59 -> -2;
    # GELU(3) = 2.9960 -> 30; GELU(-3) = -0.004 -> 0.
    table = qk.prepare_gelu(0.1, 0, 0.1, 0)
    assert qk.gelu(np.array([0, 10, -10, 30, -30], np.int8), table=table).tolist() == [0, 8, -2, 30, 0]
    # Far in the negative tail the tanh form is smaller: x = -3.6 (q = -72 at s = 0.05) gives
    # -3.6·Φ(-3.6) = -0.000573 (-0.57 steps of 0.001 -> -1) exactly, and -0.00044 (-> 0) in the tanh form.
    exact = qk.prepare_gelu(0.05, 0, 0.001, 0)
    tanh_form = qk.prepare_gelu(0.05, 0, 0.001, 0, approximate=True)
    assert (exact[-72 + 128], tanh_form[-72 + 128]) == (-1, 0)
    # zero points shift both sides: q_in = zp_in is x = 0, which maps to zp_out
    assert qk.prepare_gelu(0.02, -7, 0.01, 9)[-7 + 128] == 9


def _gelu_erf_in_double(x):
    """The exact form as older LiteRT wrote it: 0.5f·x·(1 + erf(x·M_SQRT1_2)) with erf in double."""
    x = np.asarray(x, np.float32)
    erf = np.array([math.erf(float(v) * 0.70710678118654752440) for v in x])
    return ((np.float32(0.5) * x).astype(np.float64) * (1.0 + erf)).astype(np.float32)


@pytest.mark.parametrize("s_in, zp_in, s_out, zp_out", [(0.01210184209048748, 43, 0.005307757295668125, -7),
                                                      (0.010896923951804638, 91, 0.007219579536467791, 89),
                                                      (0.020280536264181137, 58, 0.0057114954106509686, 77)])
def test_gelu_table_uses_the_float_erfc_form_litert_runs(s_in, zp_in, s_out, zp_out):
    """Parameters (found by a random search) where an ``erf``-in-double table differs from the
    float32 ``erfc`` one; LiteRT's table is the ``erfc`` one, and so is quantir's."""
    table = qk.prepare_gelu(s_in, zp_in, s_out, zp_out)
    assert not np.array_equal(table, populate_lut(_gelu_erf_in_double, s_in, zp_in, s_out, zp_out, "gelu"))
    (expected,) = run_op(OP.GELU, [T((256,), scale=s_in, zero_point=zp_in)],
                         [T((256,), scale=s_out, zero_point=zp_out)], [ALL_Q])
    assert_same("GELU (erfc vs erf tables)", qk.gelu(ALL_Q, table=table), expected)


@pytest.mark.parametrize("s_in, zp_in, s_out, zp_out", [(30.0, 3, 1e-30, -128), (1e3, -5, 1e-30, 127),
                                                      (1e30, 0, 1e-8, 0), (1e-3, 0, 1e-12, 0)])
def test_gelu_tables_saturate_like_litert_at_extreme_scales(s_in, zp_in, s_out, zp_out):
    """Entries of 1e33 output steps and more (past int64) saturate, as in LiteRT."""
    table = qk.prepare_gelu(s_in, zp_in, s_out, zp_out)
    (expected,) = run_op(OP.GELU, [T((256,), scale=s_in, zero_point=zp_in)],
                         [T((256,), scale=s_out, zero_point=zp_out)], [ALL_Q])
    assert_same("GELU (extreme scales)", qk.gelu(ALL_Q, table=table), expected)


def test_gelu_rejects_parameters_litert_cannot_tabulate():
    with pytest.raises(qk.QKernelError, match="output zero point must be in"):
        qk.prepare_gelu(0.1, 0, 0.1, 128)
    with pytest.raises(qk.QKernelError, match="output scale must be a positive finite float32, found 0.0"):
        qk.prepare_gelu(0.1, 0, 0.0, 0)
    with pytest.raises(qk.QKernelError, match="1/output scale overflows float32"):
        qk.prepare_gelu(0.1, 0, 1e-45, 0)


# ---------------------------------------------------------------------------
# LOG_SOFTMAX


@hsettings(100)
@given(shape=shapes(), s_in=st.one_of(log_uniform(1e-3, 2.0), log_uniform(8.0, 1e3)),   # from 32: capped multiplier
       z_in=zero_points, seed=seeds, ties=st.booleans())
def test_log_softmax_matches_litert(shape, s_in, z_in, seed, ties):
    x = int8_data(np.random.default_rng(seed), shape)
    if ties:
        x.reshape(-1, shape[-1])[0, :] = x.reshape(-1)[0]  # a row of equal logits
    p = qk.prepare_log_softmax(s_in)
    got = qk.log_softmax(x, **p.as_kwargs())
    (expected,) = run_op(OP.LOG_SOFTMAX, [T(shape, scale=s_in, zero_point=z_in)],
                         [T(shape, scale=16 / 256, zero_point=127)], [x], LogSoftmaxOptions())
    assert_same("LOG_SOFTMAX", got, expected)


@hsettings(40)
@given(shape=shapes(), s_in=st.one_of(log_uniform(1e-3, 2.0), log_uniform(8.0, 1e3)), z_in=zero_points, seed=seeds)
def test_log_softmax_lut_matches_the_default_resolver(shape, s_in, z_in, seed):
    x = int8_data(np.random.default_rng(seed), shape)
    p = qk.prepare_log_softmax(s_in, variant="lut")
    got = qk.log_softmax_lut(x, **p.as_kwargs())
    (expected,) = run_op(OP.LOG_SOFTMAX, [T(shape, scale=s_in, zero_point=z_in)],
                         [T(shape, scale=16 / 256, zero_point=127)], [x], LogSoftmaxOptions(), resolver="optimized")
    assert_same("LOG_SOFTMAX (lut)", got, expected)
    # the fixed-point kernel computes the same log-probabilities up to rounding
    reference = qk.log_softmax(x, **qk.prepare_log_softmax(s_in).as_kwargs())
    assert np.abs(reference.astype(int) - got.astype(int)).max() <= 1


def test_log_softmax_exact_values():
    p = qk.prepare_log_softmax(1.0)
    x = np.array([[0, 0], [3, 4], [127, -128]], np.int8)
    # log(1/2) = -0.693 = -11.09 steps of 1/16 -> 127 - 11 = 116; log σ(±1) = -0.313, -1.313 -> 122, 106;
    # a difference of 255 is far below diff_min (-15 at s_in = 1): -128, and the maximum alone is log 1 -> 127.
    assert qk.log_softmax(x, **p.as_kwargs()).tolist() == [[116, 116], [106, 122], [127, -128]]
    # the axis may be any: the same rows laid out as columns
    assert qk.log_softmax(np.ascontiguousarray(x.T), axis=0, **p.as_kwargs()).T.tolist() == [[116, 116], [106, 122],
                                                                                                [127, -128]]
    assert p.diff_min == -15 and p.input_left_shift == 27
    lut = qk.prepare_log_softmax(1.0, variant="lut")
    assert qk.log_softmax_lut(x, **lut.as_kwargs()).tolist() == [[116, 116], [106, 122], [127, -128]]


def test_log_softmax_rows_at_the_accumulator_limit():
    """4095 equal maxima still match LiteRT (log 1/4095 = -133 steps -> -6); from 4096 the Q12.19 sum of
    exponentials wraps in LiteRT (which then outputs -9 here) and quantir refuses the row."""
    p = qk.prepare_log_softmax(0.1)
    x = np.full((1, 4095), 5, np.int8)
    (expected,) = run_op(OP.LOG_SOFTMAX, [T(x.shape, scale=0.1)], [T(x.shape, scale=16 / 256, zero_point=127)], [x],
                         LogSoftmaxOptions())
    assert_same("LOG_SOFTMAX (4095 ties)", qk.log_softmax(x, **p.as_kwargs()), expected)
    assert np.all(expected == -6)
    with pytest.raises(qk.QKernelError, match="sum of exponentials reaches 4096 .* overflows at 4096"):
        qk.log_softmax(np.full((2, 4096), 5, np.int8), **p.as_kwargs())


def test_log_softmax_rejects_what_litert_rejects():
    with pytest.raises(qk.QKernelError, match="scale 16/256 and zero point 127"):
        qk.prepare_log_softmax(0.1, 16 / 256, 126)
    with pytest.raises(qk.QKernelError, match="scale 16/256 and zero point 127"):
        qk.prepare_log_softmax(0.1, 1 / 16.5, 127)
    with pytest.raises(qk.QKernelError, match="must be above 1"):
        qk.prepare_log_softmax(1e-9)
    for s_out, z_out in ((16 / 256, 126), (1 / 16.5, 127)):
        with pytest.raises(RuntimeError):
            run_op(OP.LOG_SOFTMAX, [T((1, 4), scale=0.1)], [T((1, 4), scale=s_out, zero_point=z_out)],
                   [np.zeros((1, 4), np.int8)], LogSoftmaxOptions())


# ---------------------------------------------------------------------------
# L2_NORMALIZATION (one kernel in both resolvers)


@hsettings(100)
@given(shape=shapes(max_last=64), s_in=log_uniform(1e-3, 10.0), z_in=zero_points, seed=seeds,
       special=st.sampled_from(["none", "zero_row", "unit_row", "extreme"]),
       resolver=st.sampled_from(["reference", "reference", "optimized"]))
def test_l2_normalization_matches_litert_any_rank(shape, s_in, z_in, seed, special, resolver):
    rng = np.random.default_rng(seed)
    x = int8_data(rng, shape)
    rows = x.reshape(-1, shape[-1])
    if special == "zero_row":      # Σ = 0: GetInvSqrtQuantizedMultiplierExp's (INT32_MAX, 0) branch
        rows[0] = z_in
    elif special == "unit_row":    # Σ = 1: the same branch, output ±128 clamped
        rows[0] = z_in
        rows[0, -1] = z_in + 1 if z_in < 127 else z_in - 1
    elif special == "extreme":     # the far end of the int8 range from the zero point
        rows[0] = -128 if z_in >= 0 else 127
    qk.prepare_l2_normalization(1 / 128, 0)
    got = qk.l2_normalization(x, input_zero_point=z_in)
    (expected,) = run_op(OP.L2_NORMALIZATION, [T(shape, scale=s_in, zero_point=z_in)],
                         [T(shape, scale=1 / 128, zero_point=0)], [x], L2NormOptions(), resolver=resolver)
    assert_same("L2_NORMALIZATION", got, expected)


def test_l2_normalization_long_rows_match_litert():
    """Rows whose Σ(q - zp)² passes 2**29 (the divide-by-4 loop of the inverse square root)."""
    rng = np.random.default_rng(3)
    x = np.where(rng.random((2, 9000)) < 0.5, -128, 127).astype(np.int8)
    x[1, ::3] = 0
    got = qk.l2_normalization(x, input_zero_point=-3)
    (expected,) = run_op(OP.L2_NORMALIZATION, [T(x.shape, scale=0.5, zero_point=-3)],
                         [T(x.shape, scale=1 / 128, zero_point=0)], [x], L2NormOptions())
    assert_same("L2_NORMALIZATION (long rows)", got, expected)


def test_l2_normalization_exact_values():
    # (3, 4) / 5 = (0.6, 0.8) -> 76.8, 102.4 steps of 1/128 -> 77, 102; the zero point comes off first.
    out = qk.l2_normalization(np.array([[13, 14], [10, 10]], np.int8), input_zero_point=10)
    assert out.tolist() == [[77, 102], [0, 0]]
    # NCHW: normalising over the channel axis is the same as channel-last
    x = np.array([[[[3]], [[4]]]], np.int8)   # N=1, C=2, H=W=1
    assert qk.l2_normalization(x, input_zero_point=0, axis=1).reshape(-1).tolist() == [77, 102]


def test_l2_normalization_rejects_what_litert_rejects():
    with pytest.raises(qk.QKernelError, match=r"int8 output must be \(1/128, 0\), found \(0.0078125, 1\)"):
        qk.prepare_l2_normalization(1 / 128, 1)
    with pytest.raises(qk.QKernelError, match="refuses a fused activation, found 'relu'"):
        qk.prepare_l2_normalization(1 / 128, 0, activation="relu")
    with pytest.raises(RuntimeError, match="activation"):
        run_op(OP.L2_NORMALIZATION, [T((1, 4), scale=0.1)], [T((1, 4), scale=1 / 128)], [np.zeros((1, 4), np.int8)],
               L2NormOptions(fused_activation_function=ActivationFunctionType.RELU))


def test_l2_normalization_of_rank_above_four_matches_litert():
    # LiteRT 2.3.0 has no rank limit here any more: the last axis of a rank-6 tensor
    x = int8_data(np.random.default_rng(5), (2, 1, 3, 2, 1, 7))
    (expected,) = run_op(OP.L2_NORMALIZATION, [T(x.shape, scale=0.1, zero_point=2)], [T(x.shape, scale=1 / 128)],
                         [x], L2NormOptions())
    assert_same("L2_NORMALIZATION (rank 6)", qk.l2_normalization(x, input_zero_point=2), expected)


# ---------------------------------------------------------------------------
# SUM


@st.composite
def reductions(draw):
    shape = draw(shapes(max_last=6))
    rank = len(shape)
    axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank))
    return shape, tuple(axes), draw(st.booleans())


def _sum_model(x, axes, keepdims, s_in, z_in, s_out, z_out, resolver):
    ax = {a % x.ndim for a in axes}
    out_shape = tuple(1 if i in ax else d for i, d in enumerate(x.shape) if keepdims or i not in ax)
    (expected,) = run_op(OP.SUM, [T(x.shape, scale=s_in, zero_point=z_in),
                                  T((len(axes),), np.int32, data=np.array(axes, np.int32))],
                         [T(out_shape, scale=s_out, zero_point=z_out)], [x], ReducerOptions(keep_dims=keepdims),
                         resolver=resolver)
    return expected


@hsettings(60)
@given(red=reductions(), s_in=log_uniform(1e-3, 1.0), ratio=log_uniform(0.05, 300.0), z_in=zero_points,
       z_out=zero_points, same=st.booleans(), seed=seeds)
def test_sum_optimized_matches_the_default_resolver(red, s_in, ratio, z_in, z_out, same, seed):
    shape, axes, keepdims = red
    x = int8_data(np.random.default_rng(seed), shape)
    s_out, z_out = (s_in, z_in) if same else (float(np.float32(s_in * ratio)), z_out)
    p = qk.prepare_sum(s_in, z_in, s_out, z_out)
    got = qk.reduce_sum(x, axes=axes, keepdims=keepdims, variant="optimized", **p.as_kwargs())
    assert_same("SUM (optimized)", got, _sum_model(x, axes, keepdims, s_in, z_in, s_out, z_out, "optimized"))
    # the fixed-point formula is the same sum up to rounding
    fixed = qk.reduce_sum(x, axes=axes, keepdims=keepdims, **p.as_kwargs())
    assert np.abs(fixed.astype(int) - got.astype(int)).max(initial=0) <= 1


@hsettings(40)
@given(red=reductions(), s_in=log_uniform(1e-3, 1.0), ratio=log_uniform(0.05, 300.0), z_in=zero_points,
       z_out=zero_points, seed=seeds)
def test_sum_builtin_ref_matches_litert(red, s_in, ratio, z_in, z_out, seed):
    shape, axes, keepdims = red
    x = int8_data(np.random.default_rng(seed), shape)
    s_out = float(np.float32(s_in * ratio))
    p = qk.prepare_sum(s_in, z_in, s_out, z_out)
    got = qk.reduce_sum(x, axes=axes, keepdims=keepdims, variant="builtin_ref", **p.as_kwargs())
    assert_same("SUM (builtin_ref)", got, _sum_model(x, axes, keepdims, s_in, z_in, s_out, z_out, "reference"))


def test_sum_exact_values_and_the_builtin_ref_bug():
    p = qk.prepare_sum(0.1, 0, 0.1, 0)
    x = np.array([[-1, -2, 3, 4], [100, 50, 0, 0]], np.int8)
    kw = dict(axes=1, keepdims=False, **p.as_kwargs())
    # the int8 sums are 4 and 150 (saturating to 127) ...
    assert qk.reduce_sum(x, **kw).tolist() == [4, 127]
    assert qk.reduce_sum(x, variant="optimized", **kw).tolist() == [4, 127]
    # ... BUILTIN_REF reads the bytes as uint8: 255 + 254 + 3 + 4 clamps to 255 (-1), 150 is stored as -106
    assert qk.reduce_sum(x, variant="builtin_ref", **kw).tolist() == [-1, -106]
    assert _sum_model(x, (1,), False, 0.1, 0, 0.1, 0, "reference").tolist() == [-1, -106]
    # zero points: Σ(q - zp_in) + zp_out = (4 - 4·5) + 5 = -11
    p5 = qk.prepare_sum(0.1, 5, 0.1, 5)
    assert qk.reduce_sum(x[:1], axes=1, keepdims=True, variant="optimized", **p5.as_kwargs()).tolist() == [[-11]]
