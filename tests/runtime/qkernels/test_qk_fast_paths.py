"""The fast paths of the integer kernels give the integers of the reference formulas.

* the float64 requantization of exact accumulators (``_fast_requant``) against the fixed-point
  MBQM of ``_common.requantize``, on ties and on channels that must take the integer path;
* the compiled loops (``_jit``, when numba is installed) against the numpy paths, kernel by
  kernel, on the shapes the models use (strides, dilation, 5x5, depth multiplier, groups);
* the byte-indexed gathers against plain fancy indexing.

The LiteRT oracle tests (test_qk_conv_fc.py and friends) run whichever path is active.
"""
from __future__ import annotations

import numpy as np
import pytest

from quantir.runtime import qkernels as qk
from quantir.runtime.qkernels import _jit
from quantir.runtime.qkernels._common import lookup_table, pair_table_lookup, requantize
from quantir.runtime.qkernels._fast_requant import requantize_exact_float

needs_jit = pytest.mark.skipif(not _jit.AVAILABLE, reason="numba not installed: only the numpy paths run")


def _reference(acc, m, s, zp, lo, hi):
    return requantize(acc.astype(np.int64), m, s, zp, lo, hi, channel_axis=1)


@pytest.mark.parametrize("shift", range(0, 12))
def test_float_requantize_matches_mbqm_on_every_accumulator_near_ties(shift):
    # M = 2**30 makes acc·M/2**31 = acc/2: every odd accumulator is a tie of the first rounding,
    # and every 2**shift-th a tie of the second; the others sample the general case.
    acc = np.arange(-(1 << 15), 1 << 15).reshape(1, 1, -1).repeat(4, axis=1).astype(np.float64)
    m = np.array([1 << 30, (1 << 30) + 1, (1 << 31) - 1, 1518500250])
    s = np.full(4, -shift)
    for zp, lo, hi in ((0, -128, 127), (-128, -128, 127), (37, -20, 90)):
        got = requantize_exact_float(acc, m, s, zp, lo, hi, np.full(4, 1 << 15))
        assert np.array_equal(got, _reference(acc, m, s, zp, lo, hi))


def test_float_requantize_hands_unsafe_channels_to_the_integer_path():
    rng = np.random.default_rng(3)
    # shift -27 (a dead channel's tiny multiplier) cannot be exact in float64; M = 0 is flushed.
    m = np.array([1 << 30, 1900000000, 0, 1234567890])
    s = np.array([-27, -3, -5, -20])
    bound = np.array([1 << 31, 1 << 20, 1 << 20, (1 << 31) - 1])
    bound[0] = (1 << 31) - 1
    acc = rng.integers(-(1 << 20), 1 << 20, size=(3, 4, 50)).astype(np.float64)
    acc[:, 0] = rng.integers(-(1 << 31) + 1, 1 << 31, size=(3, 50))
    acc[:, 3] = rng.integers(-(1 << 31) + 1, 1 << 31, size=(3, 50))
    got = requantize_exact_float(acc, m, s, 5, -128, 127, bound)
    assert np.array_equal(got, _reference(acc, m, s, 5, -128, 127))


def test_float_requantize_declines_what_only_the_integer_path_defines():
    acc = np.zeros((1, 2, 3))
    assert requantize_exact_float(acc, [1 << 30, 1 << 30], [1, -2], 0, -128, 127, [10, 10]) is None   # left shift
    assert requantize_exact_float(acc, [1 << 30, 1 << 30], [0, 0], 0, -128, 127, [1 << 32, 1]) is None   # > int32


def _conv_case(rng, n, c_in, hw, c_out, k, groups, bias=True):
    x = rng.integers(-128, 128, size=(n, c_in, *hw)).astype(np.int8)
    w = rng.integers(-127, 128, size=(c_out, c_in // groups, *k)).astype(np.int8)
    b = rng.integers(-20000, 20000, size=c_out).astype(np.int32) if bias else None
    p = qk.prepare_conv2d(0.02, rng.uniform(0.001, 0.01, c_out), 0.3, int(rng.integers(-20, 20)), "relu6",
                          channels=c_out)
    return x, w, b, p


CONV_CASES = [  # (n, c_in, (H, W), c_out, (KH, KW), groups, strides, pads, dilations, bias)
    (3, 8, (9, 11), 16, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True),
    (2, 8, (9, 9), 12, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), False),
    (2, 8, (10, 10), 8, (3, 3), 4, (2, 2), (0, 0, 1, 1), (1, 1), True),     # grouped, bias row per group
    (2, 6, (12, 10), 6, (3, 3), 6, (1, 1), (1, 1, 1, 1), (1, 1), True),     # depthwise
    (2, 6, (12, 12), 6, (3, 3), 6, (2, 2), (0, 0, 1, 1), (1, 1), True),     # depthwise, stride 2
    (2, 5, (13, 11), 5, (5, 5), 5, (2, 2), (1, 2, 2, 1), (1, 1), False),    # 5x5, odd pads, no bias
    (2, 4, (14, 14), 4, (3, 3), 4, (1, 1), (2, 2, 2, 2), (2, 2), True),     # dilation
    (2, 1, (10, 10), 6, (3, 3), 1, (2, 1), (1, 1, 1, 1), (1, 1), True),     # depth multiplier 6, strides (2, 1)
    (1, 3, (16, 16), 8, (3, 3), 1, (2, 2), (0, 0, 1, 1), (1, 1), True),     # a stem conv
    (1, 8, (64, 70), 64, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True),    # one GEMM per band of rows
    (2, 16, (80, 80), 64, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True),   # pointwise, in bands
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_compiled_and_numpy_convolutions_agree(case, monkeypatch):
    n, c_in, hw, c_out, k, groups, strides, pads, dilations, bias = case
    rng = np.random.default_rng(sum(hw) + c_out)
    x, w, b, p = _conv_case(rng, n, c_in, hw, c_out, k, groups, bias)
    kwargs = dict(input_zero_point=-7, strides=strides, pads=pads, dilations=dilations, **p.as_kwargs())
    got = qk.conv2d(x, w, b, groups=groups, **kwargs)
    monkeypatch.setattr(_jit, "AVAILABLE", False)
    numpy_path = qk.conv2d(x, w, b, groups=groups, **kwargs)
    assert np.array_equal(got, numpy_path)
    # and both equal the direct integer sum (no BLAS, no float): the definition
    xz = np.pad(x.astype(np.int64) + 7, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    oh, ow = got.shape[2:]
    acc = np.zeros(got.shape, np.int64) + (0 if b is None else b.astype(np.int64)[:, None, None])
    cg_in, cg_out = c_in // groups, c_out // groups
    for oc in range(c_out):
        g = oc // cg_out
        for ki in range(k[0]):
            for kj in range(k[1]):
                r0, c0 = ki * dilations[0], kj * dilations[1]
                win = xz[:, g * cg_in:(g + 1) * cg_in, r0:r0 + (oh - 1) * strides[0] + 1:strides[0],
                         c0:c0 + (ow - 1) * strides[1] + 1:strides[1]]
                acc[:, oc] += np.einsum("nchw,c->nhw", win, w[oc, :, ki, kj].astype(np.int64))
    want = requantize(acc, p.multiplier, p.shift, p.output_zero_point, p.act_min, p.act_max, channel_axis=1)
    assert np.array_equal(got, want)


@needs_jit
def test_compiled_quantize_matches_litert_division_and_ties(monkeypatch):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(20000) * 3).astype(np.float32)
    scale = 0.0137
    x[:4000] = (np.float32(scale) * rng.integers(-400, 400, 4000).astype(np.float32) / np.float32(2))
    x[4000:4002] = (np.inf, -np.inf)
    got = qk.quantize(x, scale=scale, zero_point=-9)
    monkeypatch.setattr(_jit, "AVAILABLE", False)
    assert np.array_equal(got, qk.quantize(x, scale=scale, zero_point=-9))


def test_quantize_refuses_nan_on_every_path():
    with pytest.raises(ValueError, match="NaN"):
        qk.quantize(np.array([0.5, np.nan] * 5000, np.float32), scale=0.1, zero_point=0)


@pytest.mark.parametrize("size", [17, 1 << 13])   # below and above the compiled gather's threshold
def test_byte_indexed_gathers_match_fancy_indexing(size):
    rng = np.random.default_rng(size)
    table = rng.integers(-128, 128, 256).astype(np.int8)
    for dtype in (np.int8, np.uint8):
        lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
        x = rng.integers(lo, hi + 1, size).astype(dtype)
        assert np.array_equal(lookup_table(x, table), table[x.astype(np.int64) - lo])
    wide = rng.integers(-128, 128, 65536).astype(np.int8)
    x16 = rng.integers(-32768, 32768, size).astype(np.int16)
    assert np.array_equal(lookup_table(x16, wide), wide[x16.astype(np.int64) + 32768])
    pairs = rng.integers(-128, 128, (256, 256)).astype(np.int8)
    a = rng.integers(-128, 128, size).astype(np.int8)
    b = rng.integers(-128, 128, size).astype(np.int8)
    assert np.array_equal(pair_table_lookup(a, b, pairs), pairs[a.astype(np.int64) + 128, b.astype(np.int64) + 128])
    a2, b2 = a[:16].reshape(4, 1, 4), b[:12].reshape(3, 4)        # broadcasting
    assert np.array_equal(pair_table_lookup(a2, b2, pairs), pairs[a2.astype(np.int64) + 128, b2.astype(np.int64) + 128])


@pytest.mark.parametrize("hw", [(6, 6), (40, 40)])   # channels-last (small image) and per-channel loops
def test_depthwise_with_channels_that_need_the_integer_requantization(hw):
    # A dead channel's tiny multiplier (shift -27) and a flushed one (M = 0) beside ordinary ones.
    rng = np.random.default_rng(11)
    c = 6
    x = rng.integers(-128, 128, size=(2, c, *hw)).astype(np.int8)
    w = rng.integers(-127, 128, size=(c, 1, 3, 3)).astype(np.int8)
    b = rng.integers(-(1 << 20), 1 << 20, size=c).astype(np.int32)
    m = np.array([1 << 30, 1500000000, 0, 2000000000, 1200000000, (1 << 31) - 1])
    s = np.array([-27, -6, 0, -9, -21, -1])
    got = qk.depthwise_conv2d(x, w, b, input_zero_point=4, output_zero_point=-2, multiplier=m, shift=s,
                              pads=(1, 1, 1, 1))
    xz = np.pad(x.astype(np.int64) - 4, [(0, 0), (0, 0), (1, 1), (1, 1)])
    acc = np.zeros(got.shape, np.int64) + b.astype(np.int64)[:, None, None]
    for ki in range(3):
        for kj in range(3):
            acc += xz[:, :, ki:ki + hw[0], kj:kj + hw[1]] * w[:, 0, ki, kj].astype(np.int64)[:, None, None]
    assert np.array_equal(got, requantize(acc, m, s, -2, -128, 127, channel_axis=1))


@needs_jit
@pytest.mark.parametrize("shift", [-31, -20, -12, -1, 0, 1, 5])
def test_compiled_flat_requantize_matches_the_numpy_mbqm(shift):
    """One multiplier over a large array (int16 ADD/MUL): the compiled loop against the numpy MBQM,
    on accumulators that make ties of both roundings, into int8 and int16."""
    from quantir.runtime.qkernels._common import BLOCK, _requantize_block
    rng = np.random.default_rng(shift + 40)
    bound = (1 << 31) >> max(shift, 0)
    acc = np.concatenate([np.arange(-(1 << 12), 1 << 12), rng.integers(-bound, bound, BLOCK)]).astype(np.int64)
    for m in (1 << 30, (1 << 31) - 1, 1518500250, 0):
        for zp, lo, hi, dtype in ((0, -32768, 32767, np.int16), (-5, -128, 127, np.int8), (0, 0, 32767, np.int16)):
            got = requantize(acc, m, shift, zp, lo, hi, dtype)
            expected = _requantize_block(acc, np.int64(m), np.int64(shift), zp, lo, hi, dtype, "double")
            assert got.dtype == dtype and np.array_equal(got, expected), (m, zp, dtype)
