"""UNIDIRECTIONAL_SEQUENCE_LSTM, full integer "8x8_16" path (docs/numerics.md §2.27).

LiteRT's ``unidirectional_sequence_lstm.cc`` (Prepare: ``PopulateQuantizedLstmParams8x8_16``,
``PopulatePrecomputedZPTimesWeightsWithBias``) and ``lstm_eval.cc`` (``EvalInteger8x8_16``,
``LstmStepInteger8x8_16``, ``CalculateLstmGateInteger8x8_16``, ``UpdateLstmCellInteger``,
``CalculateLstmOutputInteger8x8_16``) with the ``tensor_utils`` of
``reference/portable_tensor_utils.cc``. int8 input ``x`` and output/hidden state ``h``, int8
symmetric per-tensor weights, int32 biases, int16 gates and an int16 cell state ``c`` whose scale
is ``2**cs`` (``cs = cell_scale_log2``). Gate order (i, f, c, o) = input, forget, cell, output.

Prepare folds the zero points into the biases (``b_x[g] = bias[g] - zp_x·Σ_k W_x[g]``,
``b_h[g] = -zp_h·Σ_k W_h[g]``) and forms the multipliers ``M_x[g] ≈ s_w·s_x / 2**-12``,
``M_h[g] ≈ s_w·s_h / 2**-12`` (float32, ``numerics.multipliers.lstm_gate_multipliers``)
and ``M_o ≈ 2**-30 / s_hidden`` (``lstm_hidden_multiplier``). Each time step, per batch row::

    z[g] = sat16(MBQM(b_x[g] + W_x[g]·x_t, M_x[g]))              input part   (MatrixBatchVectorMultiplyAccumulate)
    z[g] = sat16(z[g] + MBQM(b_h[g] + W_h[g]·h, M_h[g]))         recurrent part, Q3.12
    i, f, o = logistic(z[i, f, o])      g = tanh(z[c])            gemmlowp int16, Q3.12 -> Q0.15
    c = sat16(int16(RDBPOT(f·c, 15)) + int16(RDBPOT(i·g, 30 + cs)))   (CwiseMul, CwiseAdd)
    c = clamp(c, -clip, clip)                                     when the quantized cell clip > 0
    h = clamp(MBQM(o · tanh_{15+cs}(c), M_o) + zp_hidden, -128, 127)  (ApplyTanh, CwiseMul)
    out_t = h

``MBQM`` is LiteRT's ``MultiplyByQuantizedMultiplier`` (double rounding), ``sat16`` a clamp to
int16, ``RDBPOT`` gemmlowp's rounding shift, ``logistic``/``tanh`` gemmlowp's int16 fixed-point
functions (:mod:`quantir.numerics.gemmlowp16`, evaluated once on all 65,536 inputs and gathered).
The input part depends on ``x`` alone and the gate buffer starts at zero, so it is computed for all
time steps at once; LiteRT saturates it to int16 before adding the recurrent part, and so does
this. The state written back is ``h`` with the *hidden* intermediate's zero point, while the
recurrent bias folds the *output state's* zero point, as in LiteRT (the two should agree).

Not supported (the quantizer refuses them): CIFG (no input gate), peephole weights, projection,
layer normalization, auxiliary input, a cell scale other than ``2**-15 .. 2**-9`` (LiteRT's
``ApplyTanh`` handles 0..6 integer bits and silently writes nothing otherwise).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.numerics import rounding_divide_by_pot, saturate
from quantir.numerics.gemmlowp16 import logistic_16, tanh_16, wrap_int16
from quantir.numerics.multipliers import lstm_gate_multipliers, lstm_hidden_multiplier
from quantir.runtime.qkernels._common import (
    INT32_MAX,
    INT32_MIN,
    KernelParams,
    QKernelError,
    check_accumulator,
    check_quantized,
    check_zero_point,
    exact_float_dtype,
    multiply_by_quantized_multiplier,
    quantize_channel_multipliers,
    requantize,
)
from quantir.runtime.qkernels._lut16 import checked_log2

__all__ = ["UnidirectionalLstmParams", "prepare_unidirectional_lstm", "unidirectional_lstm", "lstm_cell_scale_log2"]

OP = "unidirectional_sequence_lstm"
GATE_INTEGER_BITS = 3            # the gates are Q3.12 without layer normalization (scale 2**-12)
CELL_SCALE_LOG2_RANGE = (-15, -9)  # ApplyTanh(15 + cs, ...) handles 0..6 integer bits
INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


@dataclass(frozen=True)
class UnidirectionalLstmParams(KernelParams):
    input_zero_point: int
    output_state_zero_point: int
    input_multiplier: np.ndarray       # [4] int64, gate order (i, f, c, o)
    input_shift: np.ndarray            # [4]
    recurrent_multiplier: np.ndarray   # [4]
    recurrent_shift: np.ndarray        # [4]
    hidden_multiplier: int
    hidden_shift: int
    hidden_zero_point: int
    cell_scale_log2: int
    quantized_cell_clip: int           # int16; 0 = no clipping


def lstm_cell_scale_log2(cell_scale: float) -> int:
    """The cell state's exponent as Prepare reads it: ``CheckedLog2(scale)``; a scale that is not a power
    of two (to within 1e-3 in log2) is refused."""
    is_pot, log2 = checked_log2(cell_scale)
    if not is_pot:
        raise QKernelError(f"{OP}: the cell state scale {cell_scale} is not a power of two "
                           "(PopulateQuantizedLstmParams8x8_16: TF_LITE_ENSURE(CheckedLog2(cell_state scale)))")
    return log2


def _four_scales(scales: Any, name: str) -> np.ndarray:
    s = np.asarray(scales, dtype=np.float32).reshape(-1)
    if s.size != 4:
        raise ValueError(f"{OP}: {name} must be 4 scales in the gate order (input, forget, cell, output), "
                         f"found {s.size}")
    return s


def _multipliers(real: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        return quantize_channel_multipliers(real, f"{OP} {what}")
    except ValueError as e:
        raise QKernelError(f"{OP}: {what}: {e}") from None


def prepare_unidirectional_lstm(input_scale: float, input_zero_point: int, input_weight_scales: Any,
                                recurrent_weight_scales: Any, output_state_scale: float,
                                output_state_zero_point: int, cell_scale_log2: int, hidden_scale: float,
                                hidden_zero_point: int, cell_clip: float = 0.0) -> UnidirectionalLstmParams:
    """``PopulateQuantizedLstmParams8x8_16`` for the standard LSTM (no CIFG, peephole, projection or
    layer norm). ``input_weight_scales`` / ``recurrent_weight_scales``: four float scales each, gate
    order (input, forget, cell, output); ``cell_scale_log2``: the cell state's scale is ``2**cell_scale_log2``
    (:func:`lstm_cell_scale_log2` reads it from a float scale); ``hidden_scale`` / ``hidden_zero_point``:
    the fifth intermediate tensor's parameters (the quantizer gives it the output state's)."""
    zp_in = check_zero_point(input_zero_point, OP, "input zero point")
    zp_os = check_zero_point(output_state_zero_point, OP, "output state zero point")
    zp_h = check_zero_point(hidden_zero_point, OP, "hidden zero point")
    ws_in = _four_scales(input_weight_scales, "input_weight_scales")
    ws_rec = _four_scales(recurrent_weight_scales, "recurrent_weight_scales")
    cs = int(cell_scale_log2)
    if cs != cell_scale_log2 or not CELL_SCALE_LOG2_RANGE[0] <= cs <= CELL_SCALE_LOG2_RANGE[1]:
        raise QKernelError(f"{OP}: the cell state scale must be 2**k with k in [{CELL_SCALE_LOG2_RANGE[0]}, "
                           f"{CELL_SCALE_LOG2_RANGE[1]}], found k = {cell_scale_log2}: LiteRT's ApplyTanh(15 + k) "
                           "handles 0..6 integer bits and leaves its output unwritten otherwise")
    clip = np.float32(cell_clip)
    if not clip >= 0:   # also NaN
        raise QKernelError(f"{OP}: cell_clip must be >= 0, found {cell_clip} "
                           "(CheckInputTensorDimensions: TF_LITE_ENSURE(cell_clip >= 0))")
    try:
        real_in = lstm_gate_multipliers(input_scale, ws_in)
        real_rec = lstm_gate_multipliers(output_state_scale, ws_rec)
        real_hidden = lstm_hidden_multiplier(hidden_scale)
    except ValueError as e:
        raise QKernelError(f"{OP}: {e}") from None
    m_in, sh_in = _multipliers(real_in, "input-to-gate multiplier")
    m_rec, sh_rec = _multipliers(real_rec, "recurrent-to-gate multiplier")
    m_h, sh_h = _multipliers(real_hidden, "hidden multiplier")
    quantized_clip = 0
    if clip > 0:
        # static_cast<int16_t>(min(max(cell_clip / cell_scale, -32768.0f), 32767.0f)): float32, truncation
        with np.errstate(over="ignore"):
            q = clip / np.float32(2.0**cs)
        quantized_clip = int(np.trunc(min(max(q, np.float32(-32768.0)), np.float32(32767.0))))
    return UnidirectionalLstmParams(zp_in, zp_os, m_in, sh_in, m_rec, sh_rec, int(m_h[0]), int(sh_h[0]), zp_h, cs,
                                    quantized_clip)


# ---------------------------------------------------------------------------
# The gate functions, tabulated: entry u is f(int16(u)), so the uint16 view of an int16 array indexes them.

_U16 = np.arange(65536, dtype=np.int64)
_AS_INT16 = wrap_int16(_U16)


def _freeze(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.int16)
    a.setflags(write=False)
    return a


@functools.cache
def _sigmoid_table() -> np.ndarray:
    """``ApplySigmoid``: gemmlowp ``logistic`` of Q3.12, result Q0.15."""
    return _freeze(logistic_16(_AS_INT16, GATE_INTEGER_BITS))


@functools.cache
def _tanh_table(integer_bits: int) -> np.ndarray:
    """``ApplyTanh(integer_bits)``: gemmlowp ``tanh`` of Q``integer_bits``, result Q0.15."""
    return _freeze(tanh_16(_AS_INT16, integer_bits))


def _gather16(table: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``table[uint16(v)]`` for an int16 array ``v``: the tabulated function at every element."""
    return np.take(table, v.view(np.uint16), mode="clip")


def _mbqm_bound(acc_bound: int, multiplier: np.ndarray, shift: np.ndarray) -> int:
    """An upper bound of ``|MBQM(acc, M, shift)|`` over ``|acc| <= acc_bound``."""
    m = int(np.max(multiplier)) if multiplier.size else 0
    left = max(int(np.max(shift)), 0)
    right = max(-int(np.min(shift)), 0)
    return ((acc_bound << left) * m >> 31 >> min(right, 62)) + 2


def _effective_bias(weights: np.ndarray, zero_point: int, bias: np.ndarray | None, what: str) -> np.ndarray:
    """``PrecomputeZeroPointTimesWeightWithBias``: ``bias + (-zp)·Σ_k W[g, row, k]`` in int32."""
    eff = -int(zero_point) * weights.sum(axis=-1, dtype=np.int64)
    if bias is not None:
        eff = eff + bias
    if eff.size and (eff.min() < INT32_MIN or eff.max() > INT32_MAX):
        raise QKernelError(f"{OP}: the {what} bias with the zero point folded in overflows int32 "
                           "(undefined behaviour in LiteRT's PrecomputeZeroPointTimesWeightWithBias)")
    return eff


def unidirectional_lstm(x: np.ndarray, input_weights: np.ndarray, recurrent_weights: np.ndarray,
                        biases: np.ndarray, output_state: np.ndarray, cell_state: np.ndarray, *,
                        time_major: bool = True, input_zero_point: int, output_state_zero_point: int,
                        input_multiplier: Any, input_shift: Any, recurrent_multiplier: Any, recurrent_shift: Any,
                        hidden_multiplier: int, hidden_shift: int, hidden_zero_point: int, cell_scale_log2: int,
                        quantized_cell_clip: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The LSTM over a sequence. ``x``: int8 ``[T, B, I]`` (``time_major``) or ``[B, T, I]``;
    ``input_weights`` int8 ``[4, H, I]``, ``recurrent_weights`` int8 ``[4, H, H]``, ``biases`` int32
    ``[4, H]`` (gate order i, f, c, o); ``output_state`` int8 ``[B, H]`` and ``cell_state`` int16
    ``[B, H]``: the initial states. Returns ``(output, output_state, cell_state)``: the int8 hidden
    states in the layout of ``x`` (last axis H) and the final states."""
    x = check_quantized(x, OP, "input")
    w_in = check_quantized(input_weights, OP, "input weights")
    w_rec = check_quantized(recurrent_weights, OP, "recurrent weights")
    h0 = check_quantized(output_state, OP, "output state")
    c0 = check_quantized(cell_state, OP, "cell state", (np.int16,))
    if x.ndim != 3:
        raise ValueError(f"{OP}: the input must be [T, B, I] or [B, T, I], found shape {x.shape}")
    xs = x if time_major else x.transpose(1, 0, 2)
    steps, batch, n_in = xs.shape
    if w_in.ndim != 3 or w_in.shape[0] != 4 or w_in.shape[2] != n_in:
        raise ValueError(f"{OP}: input weights must be [4, H, {n_in}], found {w_in.shape}")
    hidden = w_in.shape[1]
    if w_rec.shape != (4, hidden, hidden):
        raise ValueError(f"{OP}: recurrent weights must be [4, {hidden}, {hidden}], found {w_rec.shape}")
    b = np.asarray(biases)
    if b.dtype.kind not in "iu" or b.shape != (4, hidden):
        raise ValueError(f"{OP}: biases must be integers of shape [4, {hidden}], found {b.dtype} {b.shape}")
    b = b.astype(np.int64)
    if h0.size != batch * hidden or c0.size != batch * hidden:
        raise ValueError(f"{OP}: the states must hold [{batch}, {hidden}] values, found {h0.shape} and {c0.shape}")
    zp_in = check_zero_point(input_zero_point, OP, "input zero point")
    zp_os = check_zero_point(output_state_zero_point, OP, "output state zero point")
    zp_h = check_zero_point(hidden_zero_point, OP, "hidden zero point")
    cs = int(cell_scale_log2)
    if not CELL_SCALE_LOG2_RANGE[0] <= cs <= CELL_SCALE_LOG2_RANGE[1]:
        raise QKernelError(f"{OP}: cell_scale_log2 must be in {list(CELL_SCALE_LOG2_RANGE)}, found {cs}")
    clip = int(quantized_cell_clip)
    if not 0 <= clip <= INT16_MAX:
        raise QKernelError(f"{OP}: the quantized cell clip must be in [0, 32767], found {clip}")
    m_in = np.broadcast_to(np.asarray(input_multiplier, dtype=np.int64).reshape(-1), (4,))
    s_in = np.broadcast_to(np.asarray(input_shift, dtype=np.int64).reshape(-1), (4,))
    m_rec = np.asarray(recurrent_multiplier, dtype=np.int64).reshape(-1)
    s_rec = np.asarray(recurrent_shift, dtype=np.int64).reshape(-1)
    m_rec, s_rec = np.broadcast_to(m_rec, (4,)), np.broadcast_to(s_rec, (4,))

    eff_in = _effective_bias(w_in, zp_in, b, "input-to-gate")          # [4, H]
    eff_rec = _effective_bias(w_rec, zp_os, None, "recurrent-to-gate")   # [4, H]

    # Input part of every gate at every step (depends on x only): sat16(MBQM(b_x + W_x·x_t)).
    w_in_max = int(np.abs(w_in.astype(np.int64)).max()) if w_in.size else 0
    ftype_in = exact_float_dtype(n_in, 128, w_in_max, OP)   # raw int8 x: |x| <= 128 (docs/numerics.md §6)
    in_acc_bound = int(np.abs(w_in.astype(np.int64)).sum(axis=-1).max(initial=0)) * 128 + int(
        np.abs(eff_in).max(initial=0))
    x_rows = xs.reshape(steps * batch, n_in).astype(ftype_in)
    gate_in = np.empty((steps * batch, 4, hidden), dtype=np.int16)
    for g in range(4):
        acc = (x_rows @ w_in[g].T.astype(ftype_in)).astype(np.int64) + eff_in[g]
        if in_acc_bound > INT32_MAX:
            check_accumulator(acc, OP)
        gate_in[:, g] = requantize(acc, int(m_in[g]), int(s_in[g]), 0, INT16_MIN, INT16_MAX, np.int16)
    gate_in = gate_in.reshape(steps, batch, 4, hidden)

    # Recurrent weights as one [H, 4H] matrix: the product of h with all four gates at once.
    w_rec_max = int(np.abs(w_rec.astype(np.int64)).max()) if w_rec.size else 0
    ftype_rec = exact_float_dtype(hidden, 128, w_rec_max, OP)
    w_rec_t = np.ascontiguousarray(w_rec.reshape(4 * hidden, hidden).T, dtype=ftype_rec)
    rec_acc_bound = int(np.abs(w_rec.astype(np.int64)).sum(axis=-1).max(initial=0)) * 128 + int(
        np.abs(eff_rec).max(initial=0))
    check_rec_acc = rec_acc_bound > INT32_MAX
    # MBQM(acc) + an int16 must not leave int32 (it is int32 arithmetic in LiteRT)
    check_rec_sum = _mbqm_bound(rec_acc_bound, m_rec, s_rec) + 32768 > INT32_MAX
    m_rec_b, s_rec_b = m_rec[:, None], s_rec[:, None]

    sigmoid = _sigmoid_table()
    tanh_gate = _tanh_table(GATE_INTEGER_BITS)
    tanh_cell = _tanh_table(15 + cs)
    h = np.ascontiguousarray(h0.reshape(batch, hidden))
    c = np.ascontiguousarray(c0.reshape(batch, hidden)).astype(np.int64)
    out = np.empty((steps, batch, hidden), dtype=np.int8)
    for t in range(steps):
        acc = (h.astype(ftype_rec) @ w_rec_t).astype(np.int64).reshape(batch, 4, hidden) + eff_rec
        if check_rec_acc:
            check_accumulator(acc, OP)
        rec = multiply_by_quantized_multiplier(acc, m_rec_b, s_rec_b)
        if check_rec_sum and (rec.min() < INT32_MIN + 32768 or rec.max() > INT32_MAX - 32768):
            raise QKernelError(f"{OP}: a scaled recurrent product reaches int32's limits; adding the gate to it "
                               "overflows (undefined behaviour in LiteRT)")
        gates = saturate(gate_in[t] + rec, INT16_MIN, INT16_MAX).astype(np.int16)   # [B, 4, H], Q3.12
        act = _gather16(sigmoid, gates).astype(np.int64)                             # i, f, o in Q0.15
        g_cell = _gather16(tanh_gate, np.ascontiguousarray(gates[:, 2])).astype(np.int64)
        # UpdateLstmCellInteger: CwiseMul(f, c, 15), CwiseMul(i, g, 30 + cs) (int16 casts), CwiseAdd (saturating)
        forget_part = wrap_int16(rounding_divide_by_pot(act[:, 1] * c, 15))
        input_part = wrap_int16(rounding_divide_by_pot(act[:, 0] * g_cell, 30 + cs))
        c = saturate(forget_part + input_part, INT16_MIN, INT16_MAX)
        if clip > 0:   # CwiseClipping: max(min(clip, c), -clip)
            c = saturate(c, -clip, clip)
        # CalculateLstmOutputInteger8x8_16: ApplyTanh(15 + cs, c), CwiseMul(o, tanh(c), M_o, zp_hidden) -> int8
        tanh_c = _gather16(tanh_cell, c.astype(np.int16)).astype(np.int64)
        h = requantize(act[:, 3] * tanh_c, hidden_multiplier, hidden_shift, zp_h, -128, 127, np.int8)
        out[t] = h
    result = out if time_major else np.ascontiguousarray(out.transpose(1, 0, 2))
    return result, h.reshape(h0.shape), c.astype(np.int16).reshape(c0.shape)
