"""Observers: streaming equals one-shot, exact histogram growth, bad data, constants."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quantir.errors import CalibrationError
from quantir.quantize.observers import (
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
)

# Batches of float32 values whose scale varies by up to 2**±60 between batches, so the histogram
# must grow (and re-bin) many times, including from all-zero and constant batches.
_values = st.floats(-1e3, 1e3, width=32, allow_subnormal=False)
_batch = st.tuples(
    hnp.arrays(np.float32, st.integers(0, 40), elements=_values),
    st.integers(-60, 60),
).map(lambda ab: (ab[0] * np.float32(2.0**ab[1])).astype(np.float32))
_batches = st.lists(_batch, min_size=1, max_size=6).filter(lambda bs: sum(b.size for b in bs) > 0)


@settings(max_examples=80, deadline=None)
@given(_batches)
def test_minmax_streaming_equals_all_at_once(batches):
    obs = MinMaxObserver(name="x")
    for b in batches:
        obs.update(b)
    everything = np.concatenate(batches)
    assert obs.min == everything.min() and obs.max == everything.max()
    assert obs.num_values == everything.size and obs.num_batches == len(batches)


@settings(max_examples=60, deadline=None)
@given(st.lists(hnp.arrays(np.float64, st.tuples(st.integers(1, 4), st.just(3), st.integers(1, 3)),
                           elements=st.floats(-1e6, 1e6)), min_size=1, max_size=4),
       st.sampled_from([1, -2]))
def test_minmax_per_channel_streaming(batches, axis):
    obs = MinMaxObserver(axis=axis, name="w")
    for b in batches:
        obs.update(b)
    per_channel = np.concatenate([np.moveaxis(b, 1, 0).reshape(3, -1) for b in batches], axis=1)
    np.testing.assert_array_equal(obs.min, per_channel.min(axis=1))
    np.testing.assert_array_equal(obs.max, per_channel.max(axis=1))
    assert obs.min.shape == (3,)


@settings(max_examples=150, deadline=None)
@given(_batches, st.sampled_from([16, 33, 256]))
def test_histogram_counts_equal_np_histogram_over_final_edges(batches, bins):
    """Growth re-bins exactly: every value is in the bin whose edges contain it, however batched."""
    obs = HistogramObserver(bins=bins, name="x")
    for b in batches:
        obs.update(b)
    everything = np.concatenate(batches).astype(np.float64)
    for hist, data in ((obs.histogram, everything), (obs.abs_histogram, np.abs(everything))):
        assert hist.total == everything.size == obs.num_values
        assert hist.counts.size <= bins
        if hist.width > 0:
            assert hist.edges[hist.zero_index] == 0.0
            assert hist.edges[0] <= min(data.min(), 0.0) and hist.edges[-1] > max(data.max(), 0.0)
            np.testing.assert_array_equal(np.histogram(data, bins=hist.edges)[0], hist.counts)
            assert np.all(np.diff(hist.edges) == hist.width)
    assert obs.zero_count == np.count_nonzero(everything == 0)
    assert (obs.min, obs.max) == (everything.min(), everything.max())


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 300), elements=_values))
def test_one_batch_matches_one_shot_np_histogram(x):
    obs = HistogramObserver(bins=64, name="x")
    obs.update(x)
    h = obs.histogram
    if h.width > 0:  # uniform bins over the final range, as np.histogram(range=...) makes them
        ref, _ = np.histogram(x.astype(np.float64), bins=h.counts.size, range=(h.edges[0], h.edges[-1]))
        np.testing.assert_array_equal(ref, h.counts)
        assert h.counts.size > 64 // 2 - 2  # one batch fills at least half the window


@settings(max_examples=80, deadline=None)
@given(_batches)
def test_folded_abs_histogram_brackets_every_value(batches):
    """Without a tracked |x| histogram the signed one is folded; each |x| stays within its bin's
    closed edges (a value exactly on a negative edge lands one bin low)."""
    obs = HistogramObserver(bins=32, track_abs=False, name="x")
    for b in batches:
        obs.update(b)
    a = np.abs(np.concatenate(batches).astype(np.float64))
    h = obs.abs_histogram
    assert h.total == a.size
    if h.width > 0:
        cum = np.concatenate(([0], np.cumsum(h.counts)))
        below = np.searchsorted(np.sort(a), h.edges, side="left")  # values < edge
        upto = np.searchsorted(np.sort(a), h.edges, side="right")  # values <= edge
        assert np.all(below <= cum) and np.all(cum <= upto)


def test_histogram_grows_across_huge_scale_changes_without_overflow():
    rng = np.random.default_rng(0)
    obs = HistogramObserver(bins=128, name="x")
    parts = [rng.normal(size=100) * s for s in (1e-300, 1.0, 1e300, 1e-3)]
    for p in parts:
        obs.update(p)
    everything = np.concatenate(parts)
    h = obs.histogram
    np.testing.assert_array_equal(np.histogram(everything, bins=h.edges)[0], h.counts)
    assert obs.bin_width == h.width and h.counts.size <= 128


def test_moving_average_starts_at_first_batch_and_follows_ema():
    obs = MovingAverageMinMaxObserver(averaging_constant=0.25, name="act")
    obs.update(np.array([-2.0, 4.0]))
    assert obs.range() == (-2.0, 4.0)  # first batch: no averaging with an initial 0
    obs.update(np.array([-6.0, 0.0]))
    obs.update(np.zeros((0,)))  # empty batches do not move the average
    assert obs.range() == (-2.0 + 0.25 * (-6.0 + 2.0), 4.0 + 0.25 * (0.0 - 4.0))
    assert (obs.min, obs.max) == (-6.0, 4.0)  # the exact extremes are kept too


def test_moving_average_per_channel():
    obs = MovingAverageMinMaxObserver(0.5, axis=0, name="w")
    obs.update(np.array([[1.0, 3.0], [-1.0, 1.0]]))
    obs.update(np.array([[3.0, 5.0], [-3.0, -1.0]]))
    lo, hi = obs.range()
    np.testing.assert_array_equal(lo, [2.0, -2.0])
    np.testing.assert_array_equal(hi, [4.0, 0.0])


def test_moving_average_rejects_bad_constant():
    with pytest.raises(ValueError, match="averaging_constant"):
        MovingAverageMinMaxObserver(0.0)


@pytest.mark.parametrize("make", [MinMaxObserver, MovingAverageMinMaxObserver, HistogramObserver])
@pytest.mark.parametrize("bad, counts", [(np.nan, "2 NaN and 0 Inf"), (np.inf, "0 NaN and 2 Inf"),
                                         (-np.inf, "0 NaN and 2 Inf")])
def test_nan_and_inf_raise_naming_tensor_and_count(make, bad, counts):
    obs = make(name="conv1/out")
    obs.update(np.array([1.0, 2.0], np.float32))
    x = np.array([0.5, bad, 3.0, bad], np.float32)
    with pytest.raises(CalibrationError, match=rf"'conv1/out'.*batch 1 .*holds {counts} values out of 4"):
        obs.update(x)
    assert obs.range() == (1.0, 2.0) and obs.num_values == 2  # the bad batch left no trace


def test_mixed_nan_and_inf_counted_separately():
    obs = HistogramObserver(name="t")
    with pytest.raises(CalibrationError, match="1 NaN and 2 Inf values out of 5"):
        obs.update(np.array([np.nan, np.inf, -np.inf, 0.0, 1.0]))


@pytest.mark.parametrize("make", [MinMaxObserver, MovingAverageMinMaxObserver, HistogramObserver])
def test_no_data_raises_when_asked_for_a_range(make):
    obs = make(name="fc2")
    with pytest.raises(CalibrationError, match="no calibration data reached tensor 'fc2'"):
        obs.range()
    obs.update(np.zeros((0, 3), np.float32))  # empty batches are legal but bring no data
    assert obs.num_batches == 1
    with pytest.raises(CalibrationError, match=r"no calibration data reached tensor 'fc2' \(1 batches"):
        obs.range()


def test_non_float_batches_are_refused():
    with pytest.raises(CalibrationError, match="dtype int32; expected float32 or float64"):
        MinMaxObserver(name="ids").update(np.arange(3, dtype=np.int32))


def test_float16_is_accepted():
    obs = HistogramObserver(name="h")
    obs.update(np.array([-1.5, 2.0], np.float16))
    assert obs.range() == (-1.5, 2.0)


def test_per_channel_shape_errors():
    obs = MinMaxObserver(axis=1, name="w")
    obs.update(np.ones((2, 3)))
    with pytest.raises(CalibrationError, match="has 4 channels along axis 1; earlier batches had 3"):
        obs.update(np.ones((2, 4)))
    with pytest.raises(CalibrationError, match="axis 1 is out of range"):
        obs.update(np.ones(3))


@pytest.mark.parametrize("make", [MinMaxObserver, MovingAverageMinMaxObserver, HistogramObserver])
@pytest.mark.parametrize("v, expected", [(3.0, (0.0, 3.0)), (-2.5, (-2.5, 0.0)), (0.0, (0.0, 0.0))])
def test_constant_tensor_is_reported_with_a_range_containing_zero(make, v, expected):
    obs = make(name="c")
    for _ in range(3):
        obs.update(np.full((4, 5), v, np.float32))
    assert obs.is_constant
    assert obs.range() == expected


def test_all_zero_then_real_data_keeps_the_zeros():
    obs = HistogramObserver(bins=32, name="z")
    obs.update(np.zeros(7))
    h = obs.histogram
    assert h.counts.tolist() == [7] and h.width == 0.0 and obs.is_constant
    obs.update(np.array([-1.0, 1.0]))
    h = obs.histogram
    assert h.total == 9 and h.counts[h.zero_index] == 7 and obs.zero_count == 7
    assert not obs.is_constant


def test_constant_channel_in_per_channel_observer():
    obs = MinMaxObserver(axis=0, name="w")
    obs.update(np.array([[2.0, 2.0], [-1.0, 1.0], [0.0, 0.0]]))
    lo, hi = obs.range()
    np.testing.assert_array_equal(lo, [0.0, -1.0, 0.0])
    np.testing.assert_array_equal(hi, [2.0, 1.0, 0.0])
    np.testing.assert_array_equal(obs.constant_mask, [True, False, True])
    assert not obs.is_constant


def test_histogram_bins_validation():
    with pytest.raises(ValueError, match="at least 16 bins"):
        HistogramObserver(bins=8)


def test_extreme_magnitudes_stay_exact_and_finite():
    """Subnormal spans (width 2**-1074) and values near the float64 maximum."""
    import warnings

    from quantir.quantize.methods import EntropyOptions, MseOptions, PercentileOptions, compute_range

    obs = HistogramObserver(bins=64, name="x")
    tiny = np.array([5e-324, -5e-324, 1e-322, 0.0, -0.0])
    obs.update(tiny)
    h = obs.histogram
    assert h.width == 5e-324
    np.testing.assert_array_equal(np.histogram(tiny, bins=h.edges)[0], h.counts)
    obs.update(np.array([-1e300, 1.7e308]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for opts in (PercentileOptions(), EntropyOptions(), MseOptions(), MseOptions(symmetric=True)):
            rmin, rmax = compute_range(opts, obs)
            assert -1e300 <= rmin <= rmax <= 1.7e308


# -- fast paths must not change a single count ---------------------------------------------------

def _reference_indices(x: np.ndarray, e: int, lo: int) -> np.ndarray:
    """``floor(x / 2**e) - lo`` as the float64 computation gives it (exact for float32 ``x``)."""
    return (np.floor(np.ldexp(x.astype(np.float64), -e)) - lo).astype(np.int64)


def _adversarial_window(e: int, lo: int, bins: int, rng: np.random.Generator) -> np.ndarray:
    """float32 values of the window ``[lo * 2**e, (lo + bins) * 2**e)``: every representable edge,
    its float32 neighbours, midpoints, signed zeros, subnormals and random bit patterns."""
    f32 = np.finfo(np.float32)
    k = np.arange(lo, lo + bins + 1, dtype=np.float64)
    edges = np.ldexp(k, e)
    edges = edges[np.abs(edges) <= float(f32.max)].astype(np.float32)
    mids = np.ldexp(k + 0.5, e)
    mids = mids[np.abs(mids) <= float(f32.max)].astype(np.float32)
    tiny = np.array([0.0, -0.0, 2.0**-149, -(2.0**-149), 2.0**-126, -(2.0**-126), 3 * 2.0**-149,
                     -(2.0**-127), float(f32.max), -float(f32.max)], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        bits = rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32).view(np.float32)
        scaled = (rng.uniform(lo, lo + bins, 4000) * 2.0**e).astype(np.float32)
    up, down = np.nextafter(edges, np.float32(np.inf)), np.nextafter(edges, np.float32(-np.inf))
    x = np.concatenate([edges, up, down, mids, tiny, bits[np.isfinite(bits)], scaled])
    wide = x.astype(np.float64)
    return x[(wide >= np.ldexp(float(lo), e)) & (wide < np.ldexp(float(lo + bins), e))]


@pytest.mark.parametrize("e", [-127, -126, -125, -100, -60, -24, -23, -1, 0, 1, 5, 23, 24, 60, 100, 125, 126])
@pytest.mark.parametrize("bins", [16, 2048])
def test_float32_indices_equal_the_float64_computation(e, bins):
    """The float32 scaling of ``_GrowingHistogram._indices`` gives the float64 indices bit for bit:
    at and next to every bin edge, for huge and tiny magnitudes, -0.0 and underflowing quotients."""
    from quantir.quantize.observers import _GrowingHistogram

    rng = np.random.default_rng(e + 1000 * bins)
    for lo in (1 - bins, -bins // 2, -1, 0):  # the window always contains 0: -bins < lo <= 0
        x = _adversarial_window(e, lo, bins, rng)
        assert x.size and x.dtype == np.float32
        g = _GrowingHistogram(bins)
        g.exponent, g.lo = e, lo
        want = _reference_indices(x, e, lo)
        assert want.min() >= 0 and want.max() < bins
        for data, nonneg in ((x, False), (x[~(x < 0)], True)):
            for dtype in (np.float32, np.float64):
                got = g._indices(data, np.empty(data.size, dtype), np.empty(data.size, np.intp), nonneg)
                np.testing.assert_array_equal(got, _reference_indices(data, e, lo))


@pytest.mark.parametrize("e", [-127, -126, -60, -23, -1, 0, 1, 5, 24, 100, 125, 126])
@pytest.mark.parametrize("d", [-2, -1, 0, 1, 3])
def test_signed_and_abs_histograms_counted_in_one_pass(e, d):
    """``_add_signed_and_abs`` counts x and |x| as two float64 binnings would, whichever width is
    finer (``d``: exponent of the |x| histogram minus the signed one's), edges and -0.0 included."""
    from quantir.quantize.observers import _add_signed_and_abs, _GrowingHistogram

    bins = 64
    e_a = e + d
    rng = np.random.default_rng((e + 200) * 10 + d + 5)
    for lo in (1 - bins, -bins // 2, -1, 0):
        x = np.concatenate([_adversarial_window(e, lo, bins, rng), _adversarial_window(e_a, -bins // 2, bins, rng)])
        wide = x.astype(np.float64)
        x = x[(wide >= np.ldexp(float(lo), e)) & (wide < np.ldexp(float(lo + bins), e))
              & (np.abs(wide) < np.ldexp(float(bins), e_a))]
        if not x.size:
            continue
        want_s = np.bincount(_reference_indices(x, e, lo), minlength=bins)
        want_a = np.bincount(_reference_indices(np.abs(x), e_a, 0), minlength=bins)
        lo_v, hi_v = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        for data in (x, x.astype(np.float64)):
            signed, absolute = _GrowingHistogram(bins), _GrowingHistogram(bins)
            signed.exponent, signed.lo, absolute.exponent, absolute.lo = e, lo, e_a, 0
            _add_signed_and_abs(signed, absolute, data, lo_v, hi_v)
            assert (signed.exponent, signed.lo, absolute.exponent, absolute.lo) == (e, lo, e_a, 0)
            np.testing.assert_array_equal(signed.counts, want_s)
            np.testing.assert_array_equal(absolute.counts, want_a)


def _assert_same_observation(a: HistogramObserver, b: HistogramObserver) -> None:
    for ha, hb in ((a.histogram, b.histogram), (a.abs_histogram, b.abs_histogram)):
        np.testing.assert_array_equal(ha.counts, hb.counts)
        np.testing.assert_array_equal(ha.edges, hb.edges)
        assert (ha.zero_index, ha.width) == (hb.zero_index, hb.width)
    assert (a.min, a.max, a.zero_count, a.num_values) == (b.min, b.max, b.zero_count, b.num_values)


_any_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
_wild_batches = st.lists(hnp.arrays(np.float32, st.integers(0, 60), elements=_any_f32),
                         min_size=1, max_size=5).filter(lambda bs: sum(b.size for b in bs) > 0)


@settings(max_examples=150, deadline=None)
@given(st.one_of(_batches, _wild_batches), st.sampled_from([16, 64, 2048]), st.booleans())
def test_float32_data_observed_as_float64_would_be(batches, bins, nonneg_first):
    """float32 batches take the float32 path; the same values as float64 the float64 one. Both
    (and an observer whose |x| histogram never shares the signed one) see the same histograms."""
    if nonneg_first:  # exercise the shared |x| histogram, then its split at the first negative
        batches = [np.abs(b) for b in batches[:-1]] + batches[-1:]
    fast, wide, unshared = (HistogramObserver(bins=bins, name="x") for _ in range(3))
    unshared._abs_shared = False
    for b in batches:
        fast.update(b)
        wide.update(b.astype(np.float64))
        unshared.update(b)
    _assert_same_observation(fast, wide)
    _assert_same_observation(fast, unshared)
    everything = np.concatenate(batches).astype(np.float64)
    for hist, data in ((fast.histogram, everything), (fast.abs_histogram, np.abs(everything))):
        if hist.width > 0:
            np.testing.assert_array_equal(np.histogram(data, bins=hist.edges)[0], hist.counts)


def test_abs_histogram_shared_until_the_first_negative_value():
    obs = HistogramObserver(bins=64, name="relu")
    obs.update(np.array([0.0, -0.0, 0.5, 3.0, 2.0], np.float32))
    obs.update(np.array([1.0, 7.5], np.float32))
    assert obs._abs_shared  # |x| == x so far: counted once
    np.testing.assert_array_equal(obs.abs_histogram.counts, obs.histogram.counts)
    obs.update(np.array([-9.0, 4.0], np.float32))
    assert not obs._abs_shared
    data = np.abs(np.array([0.0, -0.0, 0.5, 3.0, 2.0, 1.0, 7.5, -9.0, 4.0]))
    h = obs.abs_histogram
    np.testing.assert_array_equal(np.histogram(data, bins=h.edges)[0], h.counts)
    assert obs.zero_count == 2 and obs.histogram.total == 9


def test_nan_and_inf_per_channel_found_from_the_channel_extremes():
    obs = MinMaxObserver(axis=1, name="w")
    obs.update(np.ones((2, 3), np.float32))
    for bad, counts in ((np.nan, "1 NaN and 0 Inf"), (-np.inf, "0 NaN and 1 Inf"), (np.inf, "0 NaN and 1 Inf")):
        x = np.ones((2, 3), np.float32)
        x[1, 2] = bad
        with pytest.raises(CalibrationError, match=rf"'w'.*batch 1 .*holds {counts} values out of 6"):
            obs.update(x)
    # a bad batch that also has the wrong channel count is reported for its values first
    x = np.full((2, 4), np.nan)
    with pytest.raises(CalibrationError, match="holds 8 NaN"):
        obs.update(x)
    assert obs.num_batches == 1 and obs.num_values == 6


@pytest.mark.parametrize("make", [MinMaxObserver, HistogramObserver])
@pytest.mark.parametrize("bad, counts", [(np.nan, "1 NaN and 0 Inf"), (np.inf, "0 NaN and 1 Inf"),
                                         (-np.inf, "0 NaN and 1 Inf")])
def test_one_bad_value_deep_inside_a_large_batch_is_found(make, bad, counts):
    """Batches larger than one chunk are swept chunk by chunk; a NaN or Inf in any chunk counts."""
    from quantir.quantize.observers import _CHUNK

    x = np.linspace(-1.0, 1.0, 3 * _CHUNK + 5, dtype=np.float32)
    obs = make(name="big")
    obs.update(x)
    assert obs.range() == (-1.0, 1.0)
    y = x.copy()
    y[2 * _CHUNK + 3] = bad
    with pytest.raises(CalibrationError, match=rf"'big'.*batch 1 .*holds {counts} values out of {x.size}"):
        obs.update(y.reshape(1, -1))
    assert obs.num_values == x.size and obs.range() == (-1.0, 1.0)
    if isinstance(obs, HistogramObserver):
        assert obs.zero_count == 0 and obs.histogram.total == x.size


def test_multi_chunk_batches_equal_one_shot_references():
    from quantir.quantize.observers import _CHUNK

    rng = np.random.default_rng(7)
    n = 2 * _CHUNK + 1234
    relu = np.maximum(rng.normal(size=n), 0).astype(np.float32)           # shares |x| with x
    signed = (rng.standard_t(3, size=n) * 1e-3).astype(np.float32)         # its own |x| histogram
    signed[::97] = 0.0
    signed[5::89] = -0.0
    obs, wide = HistogramObserver(name="x"), HistogramObserver(name="x")
    for b in (relu, signed, relu * 50):
        obs.update(b.reshape(2, -1, 1))
        wide.update(b.astype(np.float64))
    _assert_same_observation(obs, wide)
    everything = np.concatenate([relu, signed, relu * 50]).astype(np.float64)
    for hist, data in ((obs.histogram, everything), (obs.abs_histogram, np.abs(everything))):
        np.testing.assert_array_equal(np.histogram(data, bins=hist.edges)[0], hist.counts)
    assert obs.zero_count == np.count_nonzero(everything == 0)
    assert (obs.min, obs.max) == (everything.min(), everything.max())
    mm = MinMaxObserver(name="x")
    mm.update(signed)
    assert (mm.min, mm.max) == (signed.min(), signed.max())
