"""BATCH_MATMUL (int8 x int8, per tensor) against LiteRT's BUILTIN_REF: shapes, broadcasting, adj_x/adj_y."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantir.backends.tflite.schema import BatchMatMulOptions
from quantir.runtime import qkernels as qk

from .qk_oracle import OP, T, assert_same, hsettings, int8_data, log_uniform, run_op, seeds, zero_points

SHAPES = [((2, 3, 5), (2, 5, 4)), ((1, 4, 6, 8), (1, 4, 8, 6)), ((3, 2, 7, 16), (1, 1, 16, 5)), ((4, 9), (9, 3))]


@hsettings(60)
@given(shapes=st.sampled_from(SHAPES), adj=st.sampled_from([(False, False), (True, False), (False, True)]),
       s_a=log_uniform(1e-3, 1.0), s_b=log_uniform(1e-3, 1.0), s_out=log_uniform(1e-3, 10.0),
       zp_a=zero_points, zp_b=zero_points, zp_out=zero_points, seed=seeds)
def test_batch_matmul_matches_litert(shapes, adj, s_a, s_b, s_out, zp_a, zp_b, zp_out, seed):
    (sa, sb), (adj_x, adj_y) = shapes, adj
    sa = (*sa[:-2], sa[-1], sa[-2]) if adj_x else sa
    sb = (*sb[:-2], sb[-1], sb[-2]) if adj_y else sb
    rng = np.random.default_rng(seed)
    a, b = int8_data(rng, sa), int8_data(rng, sb)
    p = qk.prepare_batch_matmul(s_a, s_b, s_out, zp_out)
    got = qk.batch_matmul(a, b, lhs_zero_point=zp_a, rhs_zero_point=zp_b, adj_x=adj_x, adj_y=adj_y, **p.as_kwargs())
    (expected,) = run_op(OP.BATCH_MATMUL, [T(sa, scale=s_a, zero_point=zp_a), T(sb, scale=s_b, zero_point=zp_b)],
                         [T(got.shape, scale=s_out, zero_point=zp_out)], [a, b],
                         BatchMatMulOptions(adj_x=adj_x, adj_y=adj_y))
    assert_same("BATCH_MATMUL", got, expected)


def test_batch_matmul_hand_vector():
    """a = [[1, 2]], b = [[3], [4]] (real, zero points 0, scales 1/8): 11 in steps of 1/4 is 44, saturating."""
    p = qk.prepare_batch_matmul(1 / 8, 1 / 8, 1 / 4, -100)
    a, b = np.array([[8, 16]], np.int8), np.array([[24], [32]], np.int8)
    got = qk.batch_matmul(a, b, lhs_zero_point=0, rhs_zero_point=0, **p.as_kwargs())
    assert got.tolist() == [[-56]]   # 11 / (1/4) = 44 steps above -100


def test_batch_matmul_refuses_mismatched_depth():
    p = qk.prepare_batch_matmul(0.1, 0.1, 0.1, 0)
    with pytest.raises(qk.QKernelError, match="contracted dims differ"):
        qk.batch_matmul(np.zeros((2, 3), np.int8), np.zeros((4, 2), np.int8), lhs_zero_point=0, rhs_zero_point=0,
                        **p.as_kwargs())
