"""``qnn.unidirectional_lstm`` in ONNX.

=====================  =========================================================================
format                 ONNX
=====================  =========================================================================
QDQ                    LSTM (forward or reverse) on the dequantized input, with W and R each one
                       int8 initializer [1, 4H, K] in ONNX's gate order (i, o, f, c) behind a
                       DequantizeLinear per row (axis 1: the gate's scale repeated H times), the
                       bias dequantized; Squeeze of the direction axis, QuantizeLinear
QOperator              LiteRT's integer recurrence as an ONNX Scan of integer ops (integer_lstm.py):
                       ONNX Runtime has no LSTM on int8 activations
=====================  =========================================================================

The QDQ form does not run LiteRT's integer recurrence (Q3.12 gates, an int16 cell state): ONNX
Runtime computes the gates in float, so it agrees with the interpreter to the int8 step of the
hidden state or so, not to the integer. The QOperator and .tflite exports are the exact ones.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...errors import UnsupportedOpError
from ...ir import Operation, Value
from ...ir.dialects import nn, qnn, quant
from ...types import FloatType, TensorType
from .builder import Builder, base_name, constant_array, float_type, qtype

F32 = FloatType("f32")
LITERT_TO_ONNX = (0, 3, 1, 2)     # LiteRT stacks i, f, c, o; ONNX i, o, f, c


def _stacked(b: Builder, op: Operation, v: Value, transpose: bool) -> tuple[np.ndarray, np.ndarray]:
    """The int8 gate matrices of ``v`` ``[4, H, K]`` as ONNX's ``[1, 4H, K]`` (``[1, K, 4H]`` with
    ``transpose``) and their scales per row of 4H."""
    ints = constant_array(b.value(v))
    if ints is None:
        raise UnsupportedOpError(f"qnn.unidirectional_lstm '{op.label or op.name}': weights '{v.name_hint}' are not "
                                 f"a constant")
    ints = np.asarray(ints)[list(LITERT_TO_ONNX)]
    gates, hidden, k = ints.shape
    rows = ints.reshape(1, gates * hidden, k)
    scales = np.repeat(np.asarray(qnn.scales_of(v.type), np.float32)[list(LITERT_TO_ONNX)], hidden)
    return (rows.transpose(0, 2, 1) if transpose else rows), scales


def _weights(b: Builder, op: Operation, v: Value, transpose: bool) -> tuple[Value, np.ndarray]:
    rows, scales = _stacked(b, op, v, transpose)
    q = dataclasses.replace(qtype(v.type), scales=tuple(float(s) for s in scales), zero_points=(0,) * scales.size,
                            quantized_dimension=2 if transpose else 1)
    name = f"{base_name(v)}_onnx"
    return b.stored_constant(rows, TensorType(rows.shape, q), name), scales


def _bias(b: Builder, op: Operation) -> Value:
    """ONNX's B ``[1, 8H]`` (input then recurrent bias): the int32 bias dequantized, then zeros."""
    v = op.operands[3]
    ints = constant_array(b.value(v))
    if ints is None:
        raise UnsupportedOpError(f"qnn.unidirectional_lstm '{op.label or op.name}': the bias is not a constant")
    scales = np.asarray(qnn.scales_of(v.type), np.float64)
    real = (np.asarray(ints, np.float64) * scales[:, None])[list(LITERT_TO_ONNX)].reshape(-1).astype(np.float32)
    return b.const(np.concatenate([real, np.zeros_like(real)])[None], f"{base_name(v)}_onnx")


def _types(op: Operation) -> tuple[TensorType, TensorType]:
    """Float ``[T, 1, B, H]`` (ONNX's Y of one direction) and ``[1, B, H]`` (Y_h, Y_c)."""
    t, batch, hidden = op.results[0].type.shape
    return TensorType((t, 1, batch, hidden), F32), TensorType((1, batch, hidden), F32)


def _finish(b: Builder, op: Operation, y4: Value) -> None:
    r = op.results[0]
    y = b.emit(nn.SQUEEZE, [y4], float_type(r.type), name=f"{base_name(r)}_sequence", label=op.label, like=op,
               axes=[1])
    b.quantize(r, y)


def _direction(op: Operation) -> str:
    return "reverse" if op.attr("reverse") else "forward"


def _cell_clip(op: Operation) -> None:
    if op.attr("cell_clip"):
        raise UnsupportedOpError(f"qnn.unidirectional_lstm '{op.label or op.name}': cell_clip has no ONNX LSTM form "
                                 f"(ONNX's clip bounds the gates)")


def lstm_qdq(b: Builder, op: Operation) -> None:
    _cell_clip(op)
    x = b.dequantized(op.operands[0])
    w, _ = _weights(b, op, op.operands[1], False)
    r, _ = _weights(b, op, op.operands[2], False)
    wf = b.emit(quant.DCAST, [w], float_type(w.type), name=f"{base_name(w)}__dq", label=f"{base_name(w)}/dequantize")
    rf = b.emit(quant.DCAST, [r], float_type(r.type), name=f"{base_name(r)}__dq", label=f"{base_name(r)}/dequantize")
    y_t, s_t = _types(op)
    hidden = op.operands[2].type.shape[1]
    lstm = nn.LSTM.build([x, wf, rf, _bias(b, op)], [y_t, s_t, s_t], loc=op.loc, label=op.label,
                         optional_inputs=("b",), direction=_direction(op), hidden_size=hidden)
    b.append(lstm)
    lstm.results[0].name_hint = f"{base_name(op.results[0])}_y"
    _finish(b, op, lstm.results[0])


QDQ = {qnn.UNIDIRECTIONAL_LSTM: lstm_qdq}
