"""Real multipliers exactly as each LiteRT int8 kernel computes them at Prepare time.

One ulp of difference in a real multiplier can change the 31-bit ``M`` of
:func:`~quantir.numerics.fixedpoint.quantize_multiplier`, so each kernel's formula is
reproduced with its own mix of float32 and double arithmetic (docs/numerics.md §1.7):

* :func:`conv_multiplier` (CONV_2D, DEPTHWISE, per-channel FC):
  ``double(s_in)·double(s_w[c]) / double(s_out)``;
* :func:`fully_connected_per_tensor_multiplier`: ``double(f32(s_in·s_w)) / double(s_out)``;
* :func:`requantize_multiplier` (QUANTIZE int->int, reference MEAN/SUM):
  ``double(s_in) / double(s_out)``;
* :func:`mul_multiplier`: ``double(f32(f32(s1·s2) / s_out))``;
* :func:`add_sub_multipliers`: ``tw = 2·max(s1, s2)``; ``s1/tw``, ``s2/tw``,
  ``tw / f32(2**20·s_out)`` in double;
* :func:`relu_multiplier`: ``double(f32(s_in / s_out))``;
* :func:`leaky_relu_alpha_multiplier`: ``double(f32(f32(s_in·alpha) / s_out))``;
* :func:`hard_swish_multipliers`: float32 throughout (§2.14);
* :func:`lstm_gate_multipliers`: ``double(f32(f32(s_w·s)/2**-12))`` (the integer LSTM's gates);
* :func:`lstm_hidden_multiplier`: ``double(f32(2**-15/double(s_hidden)·2**-15))``;

plus the MEAN parameter folds of §2.8. Inputs are converted to float32 first (that is how
LiteRT stores scales); results are float64 (the kernels pass doubles to
``QuantizeMultiplier``), arrays for per-channel inputs.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from quantir.numerics._validate import INT32_MAX, scalar_or_array
from quantir.numerics.rounding import round_toward_zero

__all__ = [
    "conv_multiplier",
    "fully_connected_per_tensor_multiplier",
    "requantize_multiplier",
    "mul_multiplier",
    "add_sub_multipliers",
    "relu_multiplier",
    "leaky_relu_alpha_multiplier",
    "hard_swish_multipliers",
    "mean_multiplier",
    "mean_optimized_params",
    "lstm_gate_multipliers",
    "lstm_hidden_multiplier",
]


def _f32(x: ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float32)
    if a.size and not (np.all(np.isfinite(a)) and np.all(a > 0)):
        bad = a[~(np.isfinite(a) & (a > 0))].ravel()[0]
        raise ValueError(f"{name} must be finite and positive, found {bad}")
    return a


def _out(a: np.ndarray) -> np.ndarray:
    return scalar_or_array(np.asarray(a, dtype=np.float64))


def conv_multiplier(input_scale: ArrayLike, weight_scales: ArrayLike, output_scale: ArrayLike) -> np.ndarray:
    """CONV_2D, DEPTHWISE_CONV_2D and per-channel FULLY_CONNECTED: ``s_in·s_w[c]/s_out`` in double.

    (``PopulateConvolutionQuantizationParams``; the double product of two floats is exact.)
    """
    s_in, s_w = _f32(input_scale, "input_scale"), _f32(weight_scales, "weight_scales")
    s_out = _f32(output_scale, "output_scale")
    return _out(s_in.astype(np.float64) * s_w.astype(np.float64) / s_out.astype(np.float64))


def fully_connected_per_tensor_multiplier(input_scale: ArrayLike, weight_scale: ArrayLike,
                                          output_scale: ArrayLike) -> np.ndarray:
    """Per-tensor FULLY_CONNECTED (and uint8 conv): product in **float32**, division in double.

    (``GetQuantizedConvolutionMultipler``.) Gives a different ``M`` than
    :func:`conv_multiplier` for the same scales, e.g. 1319413900 vs 1319413916.
    """
    s_in, s_w = _f32(input_scale, "input_scale"), _f32(weight_scale, "weight_scale")
    s_out = _f32(output_scale, "output_scale")
    return _out((s_in * s_w).astype(np.float64) / s_out.astype(np.float64))


def requantize_multiplier(input_scale: ArrayLike, output_scale: ArrayLike) -> np.ndarray:
    """QUANTIZE (int -> int requantize) and reference MEAN/SUM: ``double(s_in)/double(s_out)``."""
    s_in, s_out = _f32(input_scale, "input_scale"), _f32(output_scale, "output_scale")
    return _out(s_in.astype(np.float64) / s_out.astype(np.float64))


def mul_multiplier(input1_scale: ArrayLike, input2_scale: ArrayLike, output_scale: ArrayLike) -> np.ndarray:
    """MUL: ``f32(f32(s1·s2) / s_out)`` widened to double (``mul.cc``)."""
    s1, s2 = _f32(input1_scale, "input1_scale"), _f32(input2_scale, "input2_scale")
    s_out = _f32(output_scale, "output_scale")
    return _out((s1 * s2) / s_out)


def add_sub_multipliers(input1_scale: ArrayLike, input2_scale: ArrayLike, output_scale: ArrayLike,
                        left_shift: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ADD/SUB: ``(m1, m2, mo)`` from ``add.cc`` / ``sub.cc``.

    ``tw = 2·max(s1, s2)`` (exact), ``m1 = s1/tw``, ``m2 = s2/tw``,
    ``mo = tw / f32(2**left_shift · s_out)``, divisions in double. ``left_shift`` is 20
    for int8/uint8 (15 for general int16). The larger input always gets exactly 0.5.
    """
    s1, s2 = _f32(input1_scale, "input1_scale"), _f32(input2_scale, "input2_scale")
    s_out = _f32(output_scale, "output_scale")
    twice_max = 2.0 * np.maximum(s1, s2).astype(np.float64)
    shifted_out = (np.float32(1 << left_shift) * s_out).astype(np.float64)
    return _out(s1 / twice_max), _out(s2 / twice_max), _out(twice_max / shifted_out)


def squared_difference_multipliers(input1_scale: ArrayLike, input2_scale: ArrayLike, output_scale: ArrayLike,
                                   left_shift: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SQUARED_DIFFERENCE int8: ``(m1, m2, mo)`` from ``squared_difference.cc`` Prepare.

    ``tw = 2·max(s1, s2)`` (exact in float32), ``m1 = s1/tw``, ``m2 = s2/tw`` and
    ``mo = tw² / f32(2**(2·left_shift) · s_out)``, in double (``tw²`` of a float32 is exact in
    double). The inputs are scaled by ``2**left_shift`` before their multipliers, so their
    difference squared carries ``2**(2·left_shift)``, which ``mo`` removes.
    """
    s1, s2 = _f32(input1_scale, "input1_scale"), _f32(input2_scale, "input2_scale")
    s_out = _f32(output_scale, "output_scale")
    twice_max = 2.0 * np.maximum(s1, s2).astype(np.float64)
    shifted_out = (np.float32(1 << (2 * left_shift)) * s_out).astype(np.float64)
    return _out(s1 / twice_max), _out(s2 / twice_max), _out(twice_max * twice_max / shifted_out)


def relu_multiplier(input_scale: ArrayLike, output_scale: ArrayLike) -> np.ndarray:
    """Standalone RELU/RELU6/RELU_N1_TO_1 and the LEAKY_RELU identity branch: ``f32(s_in/s_out)``."""
    s_in, s_out = _f32(input_scale, "input_scale"), _f32(output_scale, "output_scale")
    return _out(s_in / s_out)


def leaky_relu_alpha_multiplier(input_scale: ArrayLike, alpha: float, output_scale: ArrayLike) -> np.ndarray:
    """LEAKY_RELU negative branch: ``f32(f32(s_in·alpha) / s_out)``; may be negative (take ``|M|``)."""
    s_in, s_out = _f32(input_scale, "input_scale"), _f32(output_scale, "output_scale")
    return _out((s_in * np.float32(alpha)) / s_out)


def hard_swish_multipliers(input_scale: ArrayLike, output_scale: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """HARD_SWISH: ``(output, reluish)`` real multipliers, float32 throughout (``HardSwishPrepare``).

    ``hs = f32(s_in / 128)``; output ``f32(hs / s_out)``; reluish ``f32(hs / f32(3/32768))``.
    Quantize each with ``quantize_multiplier`` then ``downscale_multiplier_to_int16``.
    """
    s_in, s_out = _f32(input_scale, "input_scale"), _f32(output_scale, "output_scale")
    hires = np.float32(1.0 / 128.0) * s_in
    return _out(hires / s_out), _out(hires / np.float32(3.0 / 32768.0))


def mean_multiplier(multiplier: int, shift: int, num_elements: int) -> tuple[int, int]:
    """Reference MEAN: fold ``1/N`` into ``(M, shift)`` from ``QM(requantize_multiplier(...))`` (§2.8).

    ``k = min(floor(log2 N), 32, 31 + shift)``, ``M' = (M · 2**k) // N`` (int64
    truncation), ``shift' = shift - k``. Then ``MBQM(Σq - zp_in·N, M', shift')``.

    >>> mean_multiplier(1 << 30, 1, 49)
    (701219150, -4)
    """
    n, m = int(num_elements), int(multiplier)
    if n <= 0:
        raise ValueError(f"mean_multiplier: num_elements must be positive, found {n}")
    if not 0 <= m <= INT32_MAX:
        raise ValueError(f"mean_multiplier: multiplier must be in [0, 2**31), found {m}")
    log2_n = n.bit_length() - 1  # 63 - CountLeadingZeros(uint64 N)
    k = min(log2_n, 32, 31 + int(shift))
    if k < 0:
        raise ValueError(f"mean_multiplier: shift {shift} is below -31")
    folded = (m << k) // n
    if folded > INT32_MAX:  # cannot happen since 2**k <= N; kept as a guard
        raise ValueError(f"mean_multiplier: folded multiplier {folded} overflows int32")
    return folded, int(shift) - k


def mean_optimized_params(input_scale: float, input_zero_point: int, output_scale: float,
                          output_zero_point: int, num_elements: int) -> tuple[np.float64, int]:
    """Optimized MEAN over H,W (keep_dims, 4-D; the default resolver, §2.8).

    Returns ``(real_multiplier, bias)``:
    ``real = f32(s_in / f32(N · s_out))`` (``N`` as float) and
    ``bias = zp_out - trunc(t ± 0.5f)`` with ``t = f32(f32(zp_in · s_in) / s_out)``, the
    ``± 0.5f`` added in float32 (sign of ``t``) — almost, but not always, ``rha(t)``.
    The kernel then computes ``clamp(MBQM(Σq, M, sh) + bias)``.
    """
    s_in, s_out = _f32(input_scale, "input_scale"), _f32(output_scale, "output_scale")
    n32 = np.float32(num_elements)
    real = np.float64(s_in / (n32 * s_out))
    t = (np.float32(input_zero_point) * s_in) / s_out
    nudged = t + np.float32(0.5) if t > 0 else t - np.float32(0.5)
    return real, int(output_zero_point) - int(round_toward_zero(nudged))


def lstm_gate_multipliers(activation_scale: ArrayLike, weight_scales: ArrayLike,
                          gate_scale: float = 2.0**-12) -> np.ndarray:
    """Integer LSTM (8x8_16), the input-to-gate or recurrent-to-gate real multipliers.

    ``unidirectional_sequence_lstm.cc`` ``PopulateQuantizedLstmParams8x8_16`` keeps every scale in a
    ``float`` and writes ``effective_X_to_gate_scale = weight_scale * activation_scale /
    intermediate_scale`` (float32 product, float32 quotient), where the activation is the input or the
    output state and the intermediate scale, without layer normalization, is ``std::pow(2, -12)``
    stored as a float (Q3.12 gates). One value per weight scale (the four gates).
    """
    s_a, s_w = _f32(activation_scale, "activation_scale"), _f32(weight_scales, "weight_scales")
    s_gate = _f32(gate_scale, "gate_scale")
    return _out((s_w * s_a) / s_gate)


def lstm_hidden_multiplier(hidden_scale: ArrayLike) -> np.ndarray:
    """Integer LSTM (8x8_16), the hidden-state multiplier of ``output_gate·tanh(cell)`` (Q0.15·Q0.15).

    ``effective_hidden_scale = std::pow(2, -15) / intermediate_scale[4] * std::pow(2, -15)``: the
    quotient and product in double (``std::pow`` of ints is double), the result stored in a
    ``float`` before ``QuantizeMultiplier`` reads it back as double.
    """
    s_h = _f32(hidden_scale, "hidden_scale").astype(np.float64)
    return _out((2.0**-15 / s_h * 2.0**-15).astype(np.float32))
