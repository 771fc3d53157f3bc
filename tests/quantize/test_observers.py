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
