"""RSQRT (int8) against LiteRT's BUILTIN_REF: every input value at and above the zero point."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from quantir.runtime import qkernels as qk

from .qk_oracle import OP, T, assert_same, hsettings, log_uniform, run_op, zero_points


@hsettings(80)
@given(s_in=log_uniform(1e-5, 10.0), s_out=log_uniform(1e-3, 10.0), zp_in=zero_points, zp_out=zero_points)
def test_rsqrt_matches_litert(s_in, s_out, zp_in, zp_out):
    x = np.arange(zp_in, 128, dtype=np.int8).reshape(1, -1)      # LiteRT fails below the zero point
    p = qk.prepare_rsqrt(s_in, zp_in, s_out, zp_out)
    got = qk.rsqrt(x, **p.as_kwargs())
    (expected,) = run_op(OP.RSQRT, [T(x.shape, scale=s_in, zero_point=zp_in)],
                         [T(x.shape, scale=s_out, zero_point=zp_out)], [x])
    assert_same("RSQRT", got, expected)


def test_rsqrt_below_zero_point_is_refused_like_litert():
    x = np.array([[-5, 0, 3]], np.int8)
    p = qk.prepare_rsqrt(0.01, -2, 0.05, -128)
    with pytest.raises(qk.QKernelError, match="below the zero point"):
        qk.rsqrt(x, **p.as_kwargs())
    with pytest.raises(RuntimeError):
        run_op(OP.RSQRT, [T(x.shape, scale=0.01, zero_point=-2)], [T(x.shape, scale=0.05, zero_point=-128)], [x])


def test_rsqrt_hand_vectors():
    """s_in 1/64, zp_in -128: q = -128 + v is the real v/64, 1/sqrt = 8/sqrt(v); s_out 1/16, zp_out -128."""
    p = qk.prepare_rsqrt(1 / 64, -128, 1 / 16, -128)
    got = qk.rsqrt(np.array([-128, -127, -124, -64], np.int8), **p.as_kwargs()).tolist()
    # v = 0 -> 127; v = 1 -> 8 (128 steps above -128); v = 4 -> 4 (64 steps); v = 64 -> 1 (16 steps)
    assert got == [127, 0, -64, -112]
