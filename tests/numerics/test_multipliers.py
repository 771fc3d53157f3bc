"""quantir.numerics.multipliers, and the kernel compositions of numerics.md §7 (ADD, MEAN, ...).

The kernels themselves live elsewhere; these tests compose the numerics primitives exactly
as the reference kernels do, so the §7 vectors pin both the multipliers and the order of
the rounding steps.
"""
import numpy as np
import pytest

from quantir.numerics import (
    add_sub_multipliers,
    conv_multiplier,
    fully_connected_per_tensor_multiplier,
    hard_swish_multipliers,
    leaky_relu_alpha_multiplier,
    mean_multiplier,
    mean_optimized_params,
    mul_multiplier,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier,
    quantize_multiplier_smaller_than_one_exp,
    quantize_multipliers,
    relu_multiplier,
    requantize_multiplier,
    saturate,
)

F = np.float32


def test_conv_vs_fully_connected_multiplier():
    conv = conv_multiplier(F(0.02), F(0.003), F(0.05))
    fc = fully_connected_per_tensor_multiplier(F(0.02), F(0.003), F(0.05))
    assert conv == 0.0011999999657273295 and fc == 0.0011999999518040574
    assert quantize_multiplier(conv) == (1319413916, -9)
    assert quantize_multiplier(fc) == (1319413900, -9)


def test_conv_multiplier_per_channel():
    s_w = np.array([0.003, 0.001, 0.25], dtype=np.float32)
    m = conv_multiplier(F(0.02), s_w, F(0.05))
    assert m.dtype == np.float64 and m.shape == (3,)
    assert m.tolist() == [float(conv_multiplier(F(0.02), s, F(0.05))) for s in s_w]
    big_m, shift = quantize_multipliers(m)
    assert big_m[0] == 1319413916 and shift[0] == -9


def test_float32_rules():
    # MUL: f32(f32(s1*s2)/s_out); RELU: f32(s_in/s_out); LEAKY alpha: f32(f32(s_in*alpha)/s_out).
    s1, s2, so = F(0.1), F(0.3), F(0.07)
    assert mul_multiplier(s1, s2, so) == np.float64((s1 * s2) / so)
    assert mul_multiplier(s1, s2, so) != np.float64(s1) * np.float64(s2) / np.float64(so)
    assert relu_multiplier(s1, so) == np.float64(s1 / so)
    assert leaky_relu_alpha_multiplier(s1, -0.2, so) == np.float64((s1 * F(-0.2)) / so) < 0
    assert requantize_multiplier(s1, so) == np.float64(s1) / np.float64(so)
    with pytest.raises(ValueError, match="positive"):
        requantize_multiplier(0.0, 1.0)


def _add_kernel(q1, zp1, q2, zp2, zp_out, s1, s2, s_out):
    """reference integer_ops/add.h, composed from numerics primitives (§2.4)."""
    m1, m2, mo = add_sub_multipliers(s1, s2, s_out)
    (M1, sh1), (M2, sh2) = quantize_multiplier_smaller_than_one_exp(m1), quantize_multiplier_smaller_than_one_exp(m2)
    Mo, sho = quantize_multiplier_smaller_than_one_exp(mo)
    a = (np.asarray(q1) - zp1) * (1 << 20)
    b = (np.asarray(q2) - zp2) * (1 << 20)
    a = multiply_by_quantized_multiplier_smaller_than_one_exp(a, M1, sh1)
    b = multiply_by_quantized_multiplier_smaller_than_one_exp(b, M2, sh2)
    out = multiply_by_quantized_multiplier_smaller_than_one_exp(a + b, Mo, sho) + zp_out
    return (M1, sh1), (M2, sh2), (Mo, sho), saturate(out, -128, 127)


def test_add_vector():
    p1, p2, po, out = _add_kernel(10, -3, -20, 5, 2, F(0.05), F(0.1), F(0.12))
    assert p1 == (1 << 30, -1) and p2 == (1 << 30, 0) and po == (1789569773, -19)
    assert out == -13  # float: -13.4167


def _mean_reference(total_minus_zp_n, s_in, s_out, n):
    """reference QuantizedMeanOrSum (MEAN), from numerics primitives (§2.8)."""
    big_m, shift = quantize_multiplier(requantize_multiplier(s_in, s_out))
    folded, folded_shift = mean_multiplier(big_m, shift, n)
    scaled = multiply_by_quantized_multiplier(total_minus_zp_n, folded, folded_shift)
    return (folded, folded_shift), saturate(scaled, -128, 127)


def test_mean_vector():
    s = F(0.0173)
    assert quantize_multiplier(requantize_multiplier(s, s)) == (1 << 30, 1)
    params, out = _mean_reference(np.array([514, 515, -515]), s, s, 49)
    assert params == (701219150, -4)
    assert out.tolist() == [11, 11, -11]  # 514/49 = 10.4898 -> 11 by double rounding


def test_mean_multiplier_limits():
    assert mean_multiplier(1 << 30, 0, 1) == (1 << 30, 0)
    assert mean_multiplier(1 << 30, -30, 1 << 10) == ((1 << 30 << 1) // 1024, -31)  # k limited by 31 + shift
    assert mean_multiplier(1 << 30, 5, 1 << 40)[1] == 5 - 32  # k limited to 32
    with pytest.raises(ValueError):
        mean_multiplier(1 << 30, 0, 0)


def test_mean_optimized_params():
    real, bias = mean_optimized_params(F(0.21199346), -126, F(0.05856107), -122, 196)
    assert real == np.float64(F(0.21199346) / (F(196.0) * F(0.05856107)))
    t = (F(-126) * F(0.21199346)) / F(0.05856107)
    assert bias == -122 - int(t - F(0.5))
    # The float32 "+ 0.5f then truncate" is not always rha: just below 0.5 it rounds up.
    below_half = np.nextafter(F(0.5), F(0))  # t = 0.5 - 2**-25; t + 0.5f rounds to 1.0f
    _, b = mean_optimized_params(below_half, 1, 1.0, 0, 4)
    assert b == -1  # rha(t) would give 0


def test_hard_swish_multipliers():
    out, reluish = hard_swish_multipliers(F(0.05), F(0.02))
    hs = F(0.05) / F(128)
    assert out == np.float64(hs / F(0.02)) and reluish == np.float64(hs / F(3 / 32768))
