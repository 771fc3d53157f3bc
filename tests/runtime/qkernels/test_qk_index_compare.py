"""Selection and comparison kernels against LiteRT: EQUAL ... GREATER_EQUAL, ARG_MAX, MAXIMUM, MINIMUM, SHAPE."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .qk_oracle import OP, T, assert_same, hsettings, int8_data, log_uniform, run_op, seeds, zero_points
from quantir.backends.tflite.schema import ArgMaxOptions, ShapeOptions, TensorType
from quantir.runtime import qkernels as qk
from quantir.runtime.qkernels.comparison import rescale_for_comparison

pytestmark = pytest.mark.oracle

COMPARISON_OPS = {"equal": OP.EQUAL, "not_equal": OP.NOT_EQUAL, "less": OP.LESS, "less_equal": OP.LESS_EQUAL,
                  "greater": OP.GREATER, "greater_equal": OP.GREATER_EQUAL}
INDEX_TYPES = {np.int32: TensorType.INT32, np.int64: TensorType.INT64}


@st.composite
def broadcast_shapes(draw):
    """Two shapes that broadcast: equal, per-channel, per-pixel, scalar-like, rank-different, rank 5."""
    n, h, w, c = draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 6))
    full = (n, h, w, c)
    other = draw(st.sampled_from([full, (1, 1, 1, c), (n, h, w, 1), (1,), (c,), (h, 1, c), (n, 1, w, c),
                                  (2, 1, h, 1, c)]))
    return (full, other) if draw(st.booleans()) else (other, full)


def _storage(rng, shape, dtype):
    x = int8_data(rng, shape)
    return (x.astype(np.int16) + 128).astype(np.uint8) if dtype is np.uint8 else x


# -- comparisons ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(COMPARISON_OPS))
@hsettings(50)
@given(shapes=broadcast_shapes(), s1=log_uniform(1e-5, 0.999),
       s2=log_uniform(1e-5, 0.999), shared=st.booleans(), z1=zero_points, z2=zero_points,
       dtype=st.sampled_from([np.int8, np.int8, np.int8, np.uint8]), seed=seeds)
def test_comparisons_match_litert(kind, shapes, s1, s2, shared, z1, z2, dtype, seed):
    rng = np.random.default_rng(seed)
    a, b = _storage(rng, shapes[0], dtype), _storage(rng, shapes[1], dtype)
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    if shared:  # quantir's case: one scale and zero point; make about half the pairs equal
        s2, z2 = s1, z1
        if a.shape == out_shape:
            a = np.where(rng.random(a.shape) < 0.5, np.broadcast_to(b, out_shape), a).astype(dtype)
    if dtype is np.uint8:
        z1, z2 = z1 + 128, z2 + 128
    p = qk.prepare_comparison(s1, s2, kind)
    got = qk.compare(kind, a, b, input1_zero_point=z1, input2_zero_point=z2, **p.as_kwargs())
    (expected,) = run_op(COMPARISON_OPS[kind], [T(a.shape, dtype, scale=s1, zero_point=z1),
                                                T(b.shape, dtype, scale=s2, zero_point=z2)],
                         [T(out_shape, np.bool_)], [a, b])
    assert_same(kind.upper(), got, expected)


def test_comparison_of_neighbours_collapses_below_scale_2_pow_minus_8():
    # scale f32(0.001) = 0.51200002·2**-9: M = 1099511680 (f32's 24-bit mantissa·2**7), shift -9. For q = ±1:
    # SRDHM(±256, M) = ±131 and RDBPOT(±131, 9) = 0, the same as q = 0; q = 2 gives 262 -> 1.
    p = qk.prepare_comparison(0.001, 0.001)
    assert (p.input1_multiplier, p.input1_shift) == (1099511680, -9)
    q = np.array([-2, -1, 0, 1, 2], np.int8)
    assert rescale_for_comparison(q, 0, p.input1_multiplier, p.input1_shift).tolist() == [-1, 0, 0, 0, 1]
    kw = dict(input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())
    zero = np.zeros(5, np.int8)
    assert qk.compare("equal", q, zero, **kw).tolist() == [False, True, True, True, False]
    assert qk.compare("less", zero, q, **kw).tolist() == [False, False, False, False, True]
    (expected,) = run_op(OP.EQUAL, [T((5,), scale=0.001), T((5,), scale=0.001)], [T((5,), np.bool_)], [q, zero])
    assert_same("EQUAL", qk.compare("equal", q, zero, **kw), expected)


@hsettings(60)
@given(scale=st.floats(2.0**-8, 0.999), zp=zero_points, kind=st.sampled_from(sorted(COMPARISON_OPS)))
def test_shared_scale_of_at_least_2_pow_minus_8_compares_stored_values(scale, zp, kind):
    # shift >= -7: consecutive q stay at least one unit apart after both roundings, so the rescaled
    # comparison is the comparison of q (and of the real values) for every pair.
    q = np.arange(-128, 128, dtype=np.int8)
    p = qk.prepare_comparison(scale, scale)
    got = qk.compare(kind, q[:, None], q[None, :], input1_zero_point=zp, input2_zero_point=zp, **p.as_kwargs())
    ufunc = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
             "greater": np.greater, "greater_equal": np.greater_equal}[kind]
    assert np.array_equal(got, ufunc(q[:, None], q[None, :]))


@pytest.mark.parametrize("scale", [1.0, 2.0, 37.5])
def test_comparison_refuses_scales_of_one_or_more(scale):
    # LiteRT aborts the process at exactly 1.0 (QuantizeMultiplierGreaterThanOne's TFLITE_CHECK) and
    # shifts by a negative count above it, so neither is run here.
    with pytest.raises(qk.QKernelError, match=rf"less: input2 scale must be in \(0, 1\), found {scale:g}"):
        qk.prepare_comparison(0.5, scale, "less")


def test_comparison_requires_one_storage_type():
    p = qk.prepare_comparison(0.1, 0.1)
    with pytest.raises(TypeError, match="equal: inputs must share one dtype"):
        qk.compare("equal", np.zeros(2, np.int8), np.zeros(2, np.uint8), input1_zero_point=0, input2_zero_point=0,
                   **p.as_kwargs())


# -- ARG_MAX -------------------------------------------------------------------------------------

@hsettings(60)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple), data=st.data(),
       out_dtype=st.sampled_from([np.int32, np.int64]), axis_dtype=st.sampled_from([np.int32, np.int64]),
       spread=st.sampled_from([1, 3, 255]), seed=seeds, zp=zero_points, uint8=st.booleans())
def test_arg_max_matches_litert(shape, data, out_dtype, axis_dtype, spread, seed, zp, uint8):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    dtype, lowest = (np.uint8, 0) if uint8 else (np.int8, -128)
    x = rng.integers(lowest, lowest + spread + 1, size=shape).astype(dtype)  # small spreads: many ties
    zp = zp + 128 if uint8 else zp
    got = qk.arg_max(x, axis=axis, output_dtype=out_dtype)
    out_shape = tuple(d for i, d in enumerate(shape) if i != axis % len(shape))
    (expected,) = run_op(OP.ARG_MAX, [T(shape, dtype, scale=0.05, zero_point=zp),
                                      T((1,), axis_dtype, data=np.array([axis], axis_dtype))],
                         [T(out_shape, out_dtype)], [x], ArgMaxOptions(INDEX_TYPES[out_dtype]))
    assert_same("ARG_MAX", got, expected)


def test_arg_max_keeps_the_first_of_equal_maxima_and_checks_its_arguments():
    x = np.array([[3, 7, 7, -1], [9, 5, 2, 9]], np.int8)
    assert qk.arg_max(x, axis=1).tolist() == [1, 0]
    assert qk.arg_max(x, axis=-2, output_dtype=np.int32).dtype == np.int32
    with pytest.raises(qk.QKernelError, match=r"arg_max: axis must be in \[-2, 2\) for a rank-2 input, found 2"):
        qk.arg_max(x, axis=2)
    with pytest.raises(qk.QKernelError, match="arg_max: output type must be int32 or int64, found int16"):
        qk.arg_max(x, axis=0, output_dtype=np.int16)


# -- MAXIMUM / MINIMUM ---------------------------------------------------------------------------

@pytest.mark.parametrize("minimum", [False, True], ids=["maximum", "minimum"])
@hsettings(50)
@given(shapes=broadcast_shapes(), scale=log_uniform(1e-3, 1.0), zp=zero_points, seed=seeds,
       dtype=st.sampled_from([np.int8, np.int8, np.uint8]))
def test_maximum_minimum_match_litert(shapes, scale, zp, seed, minimum, dtype):
    rng = np.random.default_rng(seed)
    a, b = _storage(rng, shapes[0], dtype), _storage(rng, shapes[1], dtype)
    zp = zp + 128 if dtype is np.uint8 else zp
    qk.prepare_maximum_minimum("minimum" if minimum else "maximum", (scale, zp), (scale, zp), (scale, zp))
    got = qk.minimum(a, b) if minimum else qk.maximum(a, b)
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    (expected,) = run_op(OP.MINIMUM if minimum else OP.MAXIMUM,
                         [T(a.shape, dtype, scale=scale, zero_point=zp), T(b.shape, dtype, scale=scale, zero_point=zp)],
                         [T(out_shape, dtype, scale=scale, zero_point=zp)], [a, b])
    assert_same("MINIMUM" if minimum else "MAXIMUM", got, expected)


def test_maximum_requires_shared_parameters():
    with pytest.raises(qk.QKernelError, match=r"maximum: input 1 has scale 0\.2 and zero point 0, the output 0\.1 "
                                              r"and 0; int8 MAXIMUM moves stored values without rescaling"):
        qk.prepare_maximum_minimum("maximum", (0.1, 0), (0.2, 0), (0.1, 0))


# -- SHAPE ---------------------------------------------------------------------------------------

@hsettings(20)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=5).map(tuple),
       out_dtype=st.sampled_from([np.int32, np.int64]))
def test_shape_matches_litert(shape, out_dtype):
    x = np.zeros(shape, np.int8)
    got = qk.shape(x, output_dtype=out_dtype)
    (expected,) = run_op(OP.SHAPE, [T(shape, scale=0.1)], [T((len(shape),), out_dtype)], [x],
                         ShapeOptions(INDEX_TYPES[out_dtype]))
    assert_same("SHAPE", got, expected)


def test_shape_refuses_other_output_types():
    with pytest.raises(qk.QKernelError, match="shape: output type must be int32 or int64, found float32"):
        qk.shape(np.zeros(3, np.int8), output_dtype=np.float32)
