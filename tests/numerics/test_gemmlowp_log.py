"""The fixed-point logarithm and LOG_SOFTMAX's scaling (numerics/gemmlowp_log.py).

Bit-exactness with LiteRT is shown through the LOG_SOFTMAX kernel in
tests/runtime/qkernels/test_qk_transformer_ops.py; here, the function's own contract.
"""
import numpy as np
import pytest

from quantir.numerics.gemmlowp_log import log_x_for_x_greater_than_or_equal_to_1, preprocess_log_softmax_scaling_exp

ONE_Q12 = 1 << 19      # 1.0 in Q12.19
LOG2_Q5 = 46516320     # log 2 in Q5.26, rounded: 0.693147... · 2**26 = 46516319.6


def test_log_at_one_and_two_is_exact():
    # log 1 = 0 and log 2 is the log_2 constant times an exponent of one
    assert log_x_for_x_greater_than_or_equal_to_1([ONE_Q12, 2 * ONE_Q12], 12, 5).tolist() == [0, LOG2_Q5]


def test_log_is_within_four_units_of_the_real_log_and_monotonic():
    x = np.unique(np.concatenate([np.arange(ONE_Q12, 2 * ONE_Q12, 97),
                                  np.geomspace(ONE_Q12, 2**31 - 1, 20000).astype(np.int64)]))
    got = log_x_for_x_greater_than_or_equal_to_1(x, 12, 5)
    assert np.abs(got - np.log(x / ONE_Q12) * 2**26).max() < 4
    assert np.all(np.diff(got) >= 0)


def test_log_refuses_what_the_cpp_template_cannot_express():
    with pytest.raises(ValueError, match=r"x must be in \[1, 2147483647\], found 0"):
        log_x_for_x_greater_than_or_equal_to_1([0, ONE_Q12], 12, 5)
    # log of a Q12 value needs 4 output integer bits (static_assert in C++)
    with pytest.raises(ValueError, match=r"must be in \[4, 29\] for 12 input integer bits, found 3"):
        log_x_for_x_greater_than_or_equal_to_1(ONE_Q12, 12, 3)


def test_preprocess_log_softmax_scaling_exp():
    # s_in = 1: 2**26 is (2**30, 27); the reverse 2**(31-27) / 2**30 = 2**-26 is (2**30, -25)
    assert preprocess_log_softmax_scaling_exp(1.0, 1.0, 5) == (1 << 30, 27, 1 << 30, -25)
    big_m, left_shift, reverse_m, reverse_shift = preprocess_log_softmax_scaling_exp(1.0, 0.1, 5)
    # forward M·2**(ls-31) = s_in·2**26 (input steps to Q5.26), and the reverse multiplier undoes it
    forward = big_m * 2.0 ** (left_shift - 31)
    reverse = reverse_m * 2.0 ** (reverse_shift - 31)
    assert forward == pytest.approx(0.1 * 2**26, rel=1e-9)
    assert forward * reverse == pytest.approx(1.0, rel=1e-8)
