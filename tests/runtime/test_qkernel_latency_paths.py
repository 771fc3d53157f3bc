"""The faster convolution paths (issue 13 item 5) compute LiteRT's integers.

Each case runs the kernel with the compiled loops (when numba is installed) and with numpy only,
and both must equal the definition: the int64 sum of ``w·(x - zp_in)`` plus the bias,
requantized by the fixed-point MBQM of ``_common.requantize`` (which applies a positive shift as
LiteRT does, shifting the int32 accumulator left before SRDHM). The parameters reach what the
fast paths changed:

* positive shifts (multipliers above one), now on the float requantization when the accumulator
  bound rules out an int32 overflow of the left shift;
* biases near 2**30 (a channel whose weights quantized to almost nothing): the bias is added in
  the requantization, so the GEMM and the depthwise taps stay float32, and those channels take
  the integer requantization;
* the depthwise loops' geometries: channels-last on small images at strides 1 and 2, few and
  many (>= ``_jit.WIDE``) channels; stride phases on large ones, 3x3 and 5x5, dilation, a depth
  multiplier; the GEMM path's compiled im2col, single-channel stems, pointwise layers on 7x7
  images (requantized a channel at a time) and on bands of rows.
"""
from __future__ import annotations

import numpy as np
import pytest

from quantir.runtime import qkernels as qk
from quantir.runtime.qkernels import _jit
from quantir.runtime.qkernels._common import requantize
from quantir.runtime.qkernels._fast_requant import requantize_exact_float


def _params(rng, c_out, *, left_shift: bool, big_bias: bool, taps: int):
    m = rng.integers(1 << 30, (1 << 31) - 1, size=c_out)
    s = rng.integers(-10, -5, size=c_out)
    if left_shift:
        s[::3] = rng.integers(1, 3, size=s[::3].size)
        m[::3] = rng.integers(1 << 30, 1 << 31, size=s[::3].size) // (taps * 64)   # the output still varies
    b = rng.integers(-20000, 20000, size=c_out)
    if big_bias:
        b[1::4] = rng.choice([-(1 << 30), (1 << 30) - 77], size=b[1::4].size)
        s[1::4] = -24
    return m.astype(np.int64), s.astype(np.int64), b.astype(np.int32)


def _reference(x, w, b, zp_in, m, s, zp_out, strides, pads, dilations, groups):
    n, c_in = x.shape[:2]
    c_out, cg_in, kh, kw = w.shape
    cg_out = c_out // groups
    xz = np.pad(x.astype(np.int64) - zp_in, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    oh = (xz.shape[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (xz.shape[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    acc = np.zeros((n, c_out, oh, ow), np.int64) + b.astype(np.int64)[:, None, None]
    for oc in range(c_out):
        g = oc // cg_out
        for ki in range(kh):
            for kj in range(kw):
                r0, c0 = ki * dilations[0], kj * dilations[1]
                win = xz[:, g * cg_in:(g + 1) * cg_in, r0:r0 + (oh - 1) * strides[0] + 1:strides[0],
                         c0:c0 + (ow - 1) * strides[1] + 1:strides[1]]
                acc[:, oc] += np.einsum("nchw,c->nhw", win, w[oc, :, ki, kj].astype(np.int64))
    return requantize(acc, m, s, zp_out, -128, 127, channel_axis=1)


CASES = [  # (n, c_in, (H, W), c_out, (KH, KW), groups, strides, pads, dilations)
    (3, 16, (14, 14), 16, (3, 3), 16, (1, 1), (1, 1, 1, 1), (1, 1)),      # channels-last, few channels
    (3, 16, (28, 28), 16, (3, 3), 16, (2, 2), (1, 1, 1, 1), (1, 1)),      # channels-last, stride 2
    (2, 160, (7, 7), 160, (5, 5), 160, (1, 1), (2, 2, 2, 2), (1, 1)),     # channels-last, per position
    (2, 144, (14, 14), 144, (5, 5), 144, (2, 2), (1, 1, 2, 2), (1, 1)),   # per position, stride 2
    (2, 4, (40, 36), 4, (3, 3), 4, (1, 1), (1, 1, 1, 1), (1, 1)),         # stride phases, blocks
    (2, 4, (41, 38), 4, (3, 3), 4, (2, 2), (0, 0, 1, 1), (1, 1)),         # phases, stride 2
    (1, 3, (40, 40), 3, (5, 5), 3, (1, 1), (4, 4, 4, 4), (2, 2)),         # 5x5, dilation
    (2, 3, (30, 30), 6, (3, 3), 3, (1, 1), (1, 1, 1, 1), (1, 1)),         # depth multiplier 2
    (4, 1, (28, 28), 16, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),        # a gray stem: one GEMM
    (2, 3, (33, 33), 8, (3, 3), 1, (2, 2), (0, 0, 1, 1), (1, 1)),         # compiled im2col, stride 2
    (20, 24, (7, 7), 40, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1)),        # pointwise, short rows
    (1, 16, (96, 96), 64, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1)),       # pointwise, bands of rows
]


@pytest.mark.parametrize("left_shift,big_bias", [(True, False), (False, True)])
@pytest.mark.parametrize("case", CASES)
def test_fast_convolutions_compute_the_definition(case, left_shift, big_bias, monkeypatch):
    n, c_in, hw, c_out, k, groups, strides, pads, dilations = case
    rng = np.random.default_rng(sum(hw) * c_out + k[0] + left_shift)
    x = rng.integers(-128, 128, size=(n, c_in, *hw)).astype(np.int8)
    w = rng.integers(-127, 128, size=(c_out, c_in // groups, *k)).astype(np.int8)
    m, s, b = _params(rng, c_out, left_shift=left_shift, big_bias=big_bias, taps=k[0] * k[1] * (c_in // groups))
    if big_bias:
        w[1::4] //= 64   # the weights of a channel with a huge bias quantized to almost nothing
    kwargs = dict(input_zero_point=-9, output_zero_point=3, multiplier=m, shift=s, strides=strides, pads=pads,
                  dilations=dilations)
    want = _reference(x, w, b, -9, m, s, 3, strides, pads, dilations, groups)
    got = qk.conv2d(x, w, b, groups=groups, **kwargs)
    assert np.array_equal(got, want)
    monkeypatch.setattr(_jit, "AVAILABLE", False)
    assert np.array_equal(qk.conv2d(x, w, b, groups=groups, **kwargs), want)


def test_positive_shift_takes_the_float_path_only_when_asked_and_safe():
    rng = np.random.default_rng(4)
    acc = rng.integers(-3000, 3000, size=(2, 3, 40)).astype(np.float64)
    m, s = np.array([1 << 30, 1500000000, 1 << 30]), np.array([2, -5, 1])
    want = requantize(acc.astype(np.int64), m, s, 7, -128, 127, channel_axis=1)
    got = requantize_exact_float(acc, m, s, 7, -128, 127, np.full(3, 3000), left_shift=True)
    assert np.array_equal(got, want)
    # a bound whose left shift may overflow int32 leaves the layer to the integer path, which checks it
    assert requantize_exact_float(acc, m, s, 7, -128, 127, np.full(3, 1 << 30), left_shift=True) is None
