"""Entropy calibration on the activations where TensorRT's KL construction clips far inside the data.

Each case is a distribution real CNNs make (tests/quantize/test_methods.py has the generic
properties and the ONNX Runtime cross-checks). "Keeps the mass that matters" is checked on the
samples themselves: the int8 grid the range gets (256 levels, asymmetric) quantizes them with an
SQNR close to the best any range gives (the ``mse`` method's), and the values it clips are few.
``EntropyOptions(resolution=None)`` is TensorRT's construction (P at the histogram's bins, 128
levels), kept to show that each case does discriminate.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quantir.quantize.methods import (
    EntropyOptions,
    MseOptions,
    _grid_levels,
    _split_atoms,
    compute_range,
    kl_divergence_resampled,
)
from quantir.quantize.observers import HistogramObserver

N = 200_000
TRT = EntropyOptions(resolution=None)


def _observe(x: np.ndarray) -> HistogramObserver:
    obs = HistogramObserver(name="t")
    obs.update(np.asarray(x, np.float32))
    return obs


def _sqnr(x: np.ndarray, rmin: float, rmax: float) -> float:
    """SQNR (dB) of ``x`` through the 256-level grid over ``[rmin, rmax]`` (zero on a level)."""
    x = np.asarray(x, np.float64)
    step = (rmax - rmin) / 255.0
    zp = np.round(-rmin / step)
    q = (np.clip(np.round(x / step) + zp, 0, 255) - zp) * step
    return float(10.0 * np.log10((x * x).sum() / ((x - q) ** 2).sum()))


def _keeps_what_matters(x: np.ndarray, opts: EntropyOptions, clip_share: float = 1e-3) -> tuple[bool, str]:
    obs = _observe(x)
    rmin, rmax = compute_range(opts, obs)
    best = _sqnr(x, *compute_range(MseOptions(), obs))
    got = _sqnr(x, rmin, rmax)
    clipped = np.count_nonzero((x < rmin) | (x > rmax)) / x.size
    return got >= best - 1.0 and clipped <= clip_share, (f"range ({rmin:.3f}, {rmax:.3f}) {got:.1f} dB, "
                                                         f"best {best:.1f} dB, clips {clipped:.2%}")


def _relu6_over_background(seed: int) -> np.ndarray:
    """A first conv + ReLU6 over images with flat backgrounds: 40 % exact zeros, 40 % a dozen
    repeated values (atoms) below 1, a tail to the ReLU6 ceiling, and a few values saturated at 6."""
    rng = np.random.default_rng(seed)
    atoms = rng.choice(rng.uniform(0.05, 1.0, 12), size=4 * N // 10)
    tail = np.minimum(rng.exponential(0.6, 2 * N // 10), 6.0)
    return np.concatenate([np.zeros(4 * N // 10), atoms, tail, np.full(N // 1000, 6.0)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_signed_atoms_keep_the_relu6_range(seed):
    """TensorRT's KL charges every atom ``mass · log(bins per level)``, which grows with the window:
    it cut the Fashion CNN's first ReLU6 at 2.5 of 6 (13 dB). Resampled per level it keeps it."""
    x = _relu6_over_background(seed)
    ok, why = _keeps_what_matters(x, EntropyOptions())
    assert ok, why
    assert compute_range(EntropyOptions(), _observe(x)).rmax > 0.9 * x.max()
    assert not _keeps_what_matters(x, TRT)[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_spike_just_above_zero_does_not_drag_the_window(seed):
    """LeakyRelu(0.01) packs every negative input into [-0.04, 0]: a spike at zero that is not
    exact zeros (``exclude_zeros`` cannot remove it)."""
    g = np.random.default_rng(seed).normal(size=N)
    x = np.where(g > 0, g, 0.01 * g)
    for opts in (EntropyOptions(), EntropyOptions(window="asymmetric")):
        ok, why = _keeps_what_matters(x, opts)
        assert ok, (opts.window, why)
    assert not _keeps_what_matters(x, TRT)[0]


def test_half_normal_gets_the_levels_of_a_one_signed_grid():
    """ReLU output: 256 levels cover [0, t], not 128; the range keeps the tail the grid can afford."""
    x = np.maximum(np.random.default_rng(3).normal(size=N), 0.0)
    ok, why = _keeps_what_matters(x, EntropyOptions())
    assert ok, why


@pytest.mark.parametrize("kind", ["hard", "sigmoid"])
def test_bounded_gate_keeps_its_saturated_end(kind):
    """A gate in [0, 1]: exact zeros and exact ones (hard sigmoid saturating), a bulk near 0.1.
    The ones pass the signal through unchanged; clipping them would scale it down."""
    rng = np.random.default_rng(4)
    if kind == "hard":
        x = np.concatenate([np.clip(rng.normal(0.1, 0.05, N // 2), 0.0, 1.0), np.ones(N // 20),
                            rng.uniform(0.0, 1.0, N // 10)])
    else:
        x = 1.0 / (1.0 + np.exp(-rng.normal(-2.0, 2.0, N)))
    rmin, rmax = compute_range(EntropyOptions(), _observe(x))
    assert 0.0 <= rmin <= 1e-4  # the bottom of the data (float32 of it)
    if kind == "hard":
        assert rmax == 1.0
    ok, why = _keeps_what_matters(x, EntropyOptions())
    assert ok, why


def test_hard_swish_output_is_not_clipped_far_inside():
    """HardSwish: a dense pile at its minimum -0.375 (folded onto the |x| histogram) and a long tail."""
    v = np.random.default_rng(5).normal(0.0, 2.0, N)
    x = v * np.clip(v + 3.0, 0.0, 6.0) / 6.0
    ok, why = _keeps_what_matters(x, EntropyOptions())
    assert ok, why


def test_an_atom_inside_the_window_does_not_narrow_it():
    """Adding many copies of one mid-range value is like adding exact zeros: represented alike by
    every window, so the range barely moves (TensorRT's construction pulls it inward)."""
    rng = np.random.default_rng(6)
    base = np.maximum(rng.normal(0.5, 1.0, N), 0.0)
    spiked = np.concatenate([base, np.full(N // 2, 0.37)])
    t0 = compute_range(EntropyOptions(), _observe(base)).rmax
    t1 = compute_range(EntropyOptions(), _observe(spiked)).rmax
    assert abs(t1 - t0) <= 0.05 * base.max()


@pytest.mark.parametrize("seed", [1, 3, 4, 5])
def test_sparse_tail_is_kept_when_the_data_cannot_tell_windows_apart(seed):
    """Pooled features after ReLU6 (EfficientNet's ``mean``: 64 crops x 1280 channels, 45 % zeros):
    the tail holds a few values per bin, and KL differences between the wide windows are below
    the estimate's sampling bias; the widest of those windows wins (the argmin alone cut these
    seeds at 85-95 % of the max, and EfficientNet's features at 3.8 of 4.9)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([np.zeros(36_000), rng.gamma(2.0, 0.35, 45_000)])
    rmin, rmax = compute_range(EntropyOptions(), _observe(x))
    assert (rmin, rmax) == (0.0, float(np.float32(x.max())))


def test_data_offset_from_zero_is_not_cut_at_its_minimum():
    """All values in [0.21, 0.49], three quarters of them packed just above 0.21 (DenseNet's
    ``r21``): windows [0, t) below the median fold most of P into one sub-bin, Q's normalization
    matches it, and KL drops to ~0 at t = 0.2102 (what the search chose without the guard)."""
    rng = np.random.default_rng(9)
    x = np.concatenate([0.21 + 0.002 * rng.random(3 * N // 4), 0.21 + 0.28 * rng.random(N // 4)])
    ok, why = _keeps_what_matters(x, EntropyOptions())
    assert ok, why


def test_atoms_at_the_bottom_do_not_let_the_window_clip_the_rest():
    """ShuffleNet's ``r48``: three atoms hold 75 % of the values at the bottom, the rest are values
    repeated 34 times up to 1.5x higher. A window just above the atoms resolves almost nothing
    (atoms are out of P) while folding 25 % of the values: it must not compete."""
    rng = np.random.default_rng(11)
    spread = np.repeat(rng.uniform(0.0186, 0.0258, N // 4 // 34), 34)
    x = np.concatenate([np.full(N // 40, 0.01743), np.full(N // 8, 0.01755), np.full(N * 3 // 5, 0.01775), spread])
    rmax = compute_range(EntropyOptions(), _observe(x)).rmax
    assert rmax > 0.99 * x.max()


def test_only_atoms_keep_the_full_range():
    x = np.repeat(np.array([0.0, 0.25, 1.5, 3.0]), N // 4)
    assert compute_range(EntropyOptions(), _observe(x)) == (0.0, 3.0)


# --------------------------------------------------------------------------------------------
# the pieces


def test_grid_levels_double_for_one_signed_data():
    ends = np.array([100, 200, 400])
    assert _grid_levels(ends, 0.01, -4.0, 4.0, 128).tolist() == [128, 128, 128]   # two-sided
    assert _grid_levels(ends, 0.01, 0.0, 4.0, 128).tolist() == [256, 256, 256]    # one-signed
    # HardSwish-like: a short negative side; t = 2 spans [-0.375, 2]
    assert _grid_levels(np.array([200]), 0.01, -0.375, 4.0, 128).tolist() == [round(256 * 2 / 2.375)]


def test_split_atoms_finds_spikes_and_keeps_totals():
    rng = np.random.default_rng(7)
    counts = rng.poisson(200, 512).astype(np.int64)
    counts[[40, 300]] += 5000
    continuous, atoms = _split_atoms(counts)
    np.testing.assert_allclose(continuous + atoms, counts)
    assert set(np.flatnonzero(atoms)) == {40, 300}
    assert abs(continuous[40] - 200) < 50


def _resampled_loop(counts, s, e, m, r, folded):
    """The resampled KL of one window, the long way (CDF linear inside each bin)."""
    c = np.asarray(counts, np.float64)
    f = np.asarray(folded, np.float64)
    cum, cum_f = np.concatenate(([0.0], np.cumsum(c))), np.concatenate(([0.0], np.cumsum(f)))
    at = np.linspace(s, e, m * r + 1)
    window = np.diff(np.interp(at, np.arange(cum.size), cum))
    p = window.copy()
    p[0] += np.interp(s, np.arange(cum.size), cum_f)
    p[-1] += cum_f[-1] - np.interp(e, np.arange(cum.size), cum_f)
    q = np.zeros_like(p)
    for j in range(m):
        seg = slice(j * r, (j + 1) * r)
        occupied = p[seg] > 0
        if occupied.any():
            q[seg] = np.where(occupied, window[seg].sum() / occupied.sum(), 0.0)
    if window.sum() <= 0 or np.any((p > 0) & (q <= 0)):
        return np.inf
    pn, qn, k = p / p.sum(), q / q.sum(), p > 0
    return float(np.sum(pn[k] * np.log(pn[k] / qn[k])))


@settings(max_examples=150, deadline=None)
@given(hnp.arrays(np.int64, st.integers(6, 40), elements=st.sampled_from([0, 0, 1, 3, 9, 200])),
       st.integers(2, 5), st.integers(1, 3), st.booleans(), st.data())
def test_resampled_kl_matches_the_loop(counts, m, r, with_atoms, data):
    if counts.sum() == 0:
        return
    n = counts.size
    folded = counts + (data.draw(hnp.arrays(np.int64, n, elements=st.sampled_from([0, 0, 50]))) if with_atoms else 0)
    s = data.draw(st.floats(0, n - 1, allow_nan=False))
    e = data.draw(st.floats(s + 0.5, n, allow_nan=False))
    got = kl_divergence_resampled(counts, np.array([s]), np.array([e]), m, r, folded=folded)[0]
    want = _resampled_loop(counts, s, e, m, r, folded)
    assert np.isinf(got) == np.isinf(want)
    if np.isfinite(want):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10)


def test_resampled_kl_with_one_sub_bin_only_sees_clipping():
    """One sub-bin per level: Q equals P inside the window, so only the folded outliers count."""
    counts = np.random.default_rng(8).poisson(50, 300)
    kl = kl_divergence_resampled(counts, np.zeros(3), np.array([150.0, 250.0, 300.0]), 64, 1)
    assert kl[2] == 0.0 and kl[0] > kl[1] > 0.0


def test_resolution_option_is_validated():
    assert EntropyOptions().resolution == 2
    assert EntropyOptions(window="asymmetric").resolution == 2
    assert EntropyOptions(window="symmetric").resolution is None   # ORT's search, for comparisons
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="resolution must be None"):
            EntropyOptions(resolution=bad)
