"""SQUARED_DIFFERENCE (int8) against LiteRT's BUILTIN_REF: every pair of int8 values, broadcasting, the
refusals (an output multiplier of 1 or more; int16, which LiteRT fails at Invoke) and a hand-checked vector."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .qk_oracle import OP, T, assert_same, hsettings, int8_data, log_uniform, run_op, seeds, zero_points
from quantir.runtime import qkernels as qk

pytestmark = pytest.mark.oracle

ROWS = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)    # with COLUMNS: all 65536 pairs by broadcasting
COLUMNS = ROWS.reshape(1, 256)


@st.composite
def scales(draw):
    """Input scales over three decades; the output scale from just above Prepare's floor
    (``Mo`` just below 1: ``s_out > max(s1, s2)²/4096``) to 1e6 times it."""
    s1, s2 = draw(log_uniform(1e-3, 1.0)), draw(log_uniform(1e-3, 1.0))
    ratio = draw(log_uniform(1.001, 1e6))
    return s1, s2, float(np.float32(max(s1, s2) ** 2 / 4096 * ratio))


@st.composite
def broadcast_shapes(draw):
    """Two shapes that broadcast (equal, per-channel, a row statistic as LayerNorm's mean, rank 2 to 5)."""
    dims = tuple(draw(st.lists(st.integers(1, 5), min_size=2, max_size=5)))
    other = draw(st.sampled_from([dims, dims[:-1] + (1,), (1,) * (len(dims) - 1) + (dims[-1],), dims[-1:], (1,)]))
    return (dims, other) if draw(st.booleans()) else (other, dims)


def _litert(a, b, s1, z1, s2, z2, so, zo):
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    (expected,) = run_op(OP.SQUARED_DIFFERENCE,
                         [T(a.shape, scale=s1, zero_point=z1), T(b.shape, scale=s2, zero_point=z2)],
                         [T(out_shape, scale=so, zero_point=zo)], [a, b])
    return expected


def _ours(a, b, s1, z1, s2, z2, so, zo):
    p = qk.prepare_squared_difference(s1, s2, so, zo)
    return qk.squared_difference(a, b, input1_zero_point=z1, input2_zero_point=z2, **p.as_kwargs())


@hsettings(40)
@given(sc=scales(), z1=zero_points, z2=zero_points, zo=zero_points, swap=st.booleans())
def test_squared_difference_matches_litert_on_every_pair(sc, z1, z2, zo, swap):
    s1, s2, so = sc
    a, b = (COLUMNS, ROWS) if swap else (ROWS, COLUMNS)
    assert_same("SQUARED_DIFFERENCE", _ours(a, b, s1, z1, s2, z2, so, zo), _litert(a, b, s1, z1, s2, z2, so, zo))


@hsettings(40)
@given(shapes=broadcast_shapes(), sc=scales(), z1=zero_points, z2=zero_points, zo=zero_points, seed=seeds)
def test_squared_difference_broadcasts_as_litert(shapes, sc, z1, z2, zo, seed):
    rng = np.random.default_rng(seed)
    a, b = int8_data(rng, shapes[0]), int8_data(rng, shapes[1])
    s1, s2, so = sc
    assert_same("SQUARED_DIFFERENCE", _ours(a, b, s1, z1, s2, z2, so, zo), _litert(a, b, s1, z1, s2, z2, so, zo))


def test_squared_difference_hand_checked_vector():
    # s1 = s2 = s: both input multipliers are 1/2 (M = 2**30, shift 0), so a' - b' = 64·(q1 - q2) exactly;
    # s_out = s²/4 gives Mo = 4s²/(2**14·s²/4) = 2**-10, so out = zp_out + 4096·d²/1024 = zp_out + 4·d²
    s = 0.03125
    q1 = np.array([0, 3, -5, 10, 127, -128], np.int8)
    q2 = np.array([0, 1, 0, 4, 125, 127], np.int8)
    got = _ours(q1, q2, s, 0, s, 0, s * s / 4, -100)
    d = q1.astype(np.int64) - q2
    assert got.tolist() == np.minimum(-100 + 4 * d * d, 127).tolist() == [-100, -84, 0, 44, -84, 127]
    assert_same("SQUARED_DIFFERENCE", got, _litert(q1, q2, s, 0, s, 0, s * s / 4, -100))


def test_squared_difference_refuses_an_output_multiplier_of_one_or_more():
    # Mo = (2·0.5)² / (2**14 · s_out) >= 1 for s_out <= 2**-14: LiteRT aborts the process
    # (TFLITE_CHECK in QuantizeMultiplierSmallerThanOneExp), so it is not run.
    with pytest.raises(qk.QKernelError, match="output multiplier"):
        qk.prepare_squared_difference(0.5, 0.25, 2.0 ** -14, 0)
    qk.prepare_squared_difference(0.5, 0.25, 2.0 ** -14 * 1.001, 0)   # just above: accepted


def test_squared_difference_has_no_int16_kernel():
    with pytest.raises(qk.QKernelError, match="no int16 SQUARED_DIFFERENCE"):
        qk.prepare_squared_difference(0.01, 0.01, 0.1, 0, storage=np.int16)
    a = np.array([[100, -300, 7, 0]], np.int16)
    with pytest.raises(RuntimeError, match="only supports FLOAT32 and INT32"):
        run_op(OP.SQUARED_DIFFERENCE, [T(a.shape, np.int16, 0.01, 0), T(a.shape, np.int16, 0.01, 0)],
               [T(a.shape, np.int16, 0.1, 0)], [a, a[:, ::-1].copy()])
