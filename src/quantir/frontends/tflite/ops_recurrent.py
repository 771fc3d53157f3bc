"""UNIDIRECTIONAL_SEQUENCE_LSTM (and the REVERSE_V2 pair around a reverse one) -> ``qnn.unidirectional_lstm``.

quantir reads the full-integer (8x8_16) LSTM it writes (``backends/tflite/export.py``), as LiteRT's
``unidirectional_sequence_lstm.cc`` runs it: a time-major int8 input ``[T, B, I]``; per gate (input,
forget, cell, output: ``lstm_shared.h``'s slots 1-8 and 12-15) an int8 ``[H, I]`` and ``[H, H]`` weight,
one symmetric scale each, and an int32 ``[H]`` bias; the output_state variable (int8, the output's
parameters) and the cell_state variable (int16, zero point 0, a power-of-two scale); five intermediates,
the last (hidden) with the output's parameters; tanh. The four weights of each kind are stacked into the
op's ``[4, H, I]`` / ``[4, H, H]`` / ``[4, H]`` constants, one per-axis scale per gate (a bias without
quantization parameters gets input_scale x weight_scale, the scale LiteRT's kernel assumes).

``REVERSE_V2 (time axis) -> LSTM -> REVERSE_V2 (time axis)``, each link read by the next op only, is
one op with ``reverse=True`` (the form the exporter writes); REVERSE_V2 is read nowhere else.

Everything else raises ``UnsupportedOpError`` naming the feature: a float or dynamic-range ("hybrid")
LSTM, int16 activations, CIFG (no input gate), peephole connections, a projection, layer normalization,
diagonal recurrent weights, a batch-major input, per-channel or asymmetric weights, a cell state whose
scale is not a power of two, states or the hidden intermediate with other parameters than the output.
"""
from __future__ import annotations

import math

import numpy as np

from ...backends.tflite.model import Operator, Quantization, Tensor
from ...backends.tflite.schema import ActivationFunctionType
from ...backends.tflite.schema import BuiltinOperator as OP
from ...backends.tflite.schema import TensorType as TFLType
from ...errors import ModelFormatError, UnsupportedOpError
from ...ir import Operation
from ...ir.dialects import qnn
from ...numerics import bias_qparams
from ...types import IntegerType, TensorType, UniformQuantizedPerAxisType
from . import layout as L
from .importer import Converter, Importer, OpContext
from .tensors import F32, is_quantized

__all__ = ["CONVERTERS", "HYBRID_CONVERTERS"]

TIME_MAJOR = L.identity(3)
GATES = qnn.LSTM_GATES   # input, forget, cell, output
_INPUT_W, _RECURRENT_W, _PEEPHOLES, _BIASES = (1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15)
_PROJECTION, _OUTPUT_STATE, _CELL_STATE, _LAYER_NORM = (16, 17), 18, 19, (20, 21, 22, 23)


# -- the graph around an operator ---------------------------------------------------------------------

def _code(imp: Importer, op: Operator) -> int:
    return imp.model.operator_codes[op.opcode_index].builtin_code


def _producer(imp: Importer, idx: int) -> Operator | None:
    return next((op for op in imp.sg.operators if idx in op.outputs), None)


def _readers(imp: Importer, idx: int) -> list[tuple[Operator, int]]:
    return [(op, slot) for op in imp.sg.operators for slot, i in enumerate(op.inputs) if i == idx]


def _params(t: Tensor) -> tuple[tuple[float, ...], tuple[int, ...]] | None:
    return (t.quantization.scale, t.quantization.zero_point) if is_quantized(t) else None


def _time_reverse(imp: Importer, op: Operator | None) -> bool:
    """A REVERSE_V2 of a rank-3 tensor along axis 0 (a constant ``[0]`` or ``[-3]``) that keeps the
    stored integers' meaning (the same quantization on both sides)."""
    if op is None or _code(imp, op) != OP.REVERSE_V2 or len(op.inputs) != 2 or min(op.inputs) < 0:
        return False
    axis = imp.data(op.inputs[1])
    x, y = imp.tensor(op.inputs[0]), imp.tensor(op.outputs[0])
    return (axis is not None and [int(a) for a in np.ravel(axis)] in ([0], [-3]) and len(x.shape) == 3
            and _params(x) == _params(y))


def _reverse_pair(imp: Importer, lstm: Operator) -> tuple[Operator, Operator] | None:
    """The REVERSE_V2s before and after ``lstm`` when it runs on a time-reversed sequence whose
    result is reversed back, each intermediate tensor read by the next op alone, else None."""
    if len(lstm.inputs) < 1 or lstm.inputs[0] < 0 or len(lstm.outputs) != 1:
        return None
    before = _producer(imp, lstm.inputs[0])
    outputs = set(imp.sg.outputs)
    if not _time_reverse(imp, before) or lstm.inputs[0] in outputs or lstm.outputs[0] in outputs:
        return None
    if _readers(imp, lstm.inputs[0]) != [(lstm, 0)]:
        return None
    after = _readers(imp, lstm.outputs[0])
    if len(after) != 1 or after[0][1] != 0 or not _time_reverse(imp, after[0][0]):
        return None
    return before, after[0][0]


# -- REVERSE_V2 -----------------------------------------------------------------------------------------

def reverse_v2(ctx: OpContext) -> None:
    """Only the two halves of a reverse LSTM: the first is read by the LSTM's converter, which also
    defines the second's output."""
    imp = ctx.imp
    if ctx.out in imp.forms:
        return   # the second REVERSE_V2 of a pair: the LSTM defined its output
    readers = _readers(imp, ctx.out)
    if len(readers) == 1 and _code(imp, readers[0][0]) == OP.UNIDIRECTIONAL_SEQUENCE_LSTM:
        pair = _reverse_pair(imp, readers[0][0])
        if pair is not None and pair[0] is ctx.op:
            return   # the first: the LSTM reads this operator's input
    raise UnsupportedOpError("REVERSE_V2 is read only as the time-axis pair around a UNIDIRECTIONAL_SEQUENCE_LSTM "
                             "(REVERSE_V2 -> LSTM -> REVERSE_V2, what quantir writes for a reverse LSTM)")


# -- UNIDIRECTIONAL_SEQUENCE_LSTM ----------------------------------------------------------------------

def _refuse_features(ctx: OpContext) -> None:
    o = ctx.options
    n = len(ctx.op.inputs)
    if n not in (20, 24):
        raise ModelFormatError(f"LiteRT's UNIDIRECTIONAL_SEQUENCE_LSTM takes 20 or 24 inputs, found {n}")
    x = ctx.tensor(0)
    if x.type is not TFLType.INT8:
        kind = "a 16x8 LSTM (int16 activations)" if x.type is TFLType.INT16 else f"a {x.type.name} input"
        raise UnsupportedOpError(f"{kind}: quantir reads the full-integer LSTM with int8 activations (8x8_16)")
    if not o.time_major:
        raise UnsupportedOpError("a batch-major input (time_major false): quantir reads the time-major form [T, B, I]")
    if not ctx.has(_INPUT_W[0]) or not ctx.has(_RECURRENT_W[0]):
        raise UnsupportedOpError("CIFG (coupled input and forget gates: no input-gate weights): quantir reads the LSTM "
                                 "with all four gates")
    if any(ctx.has(i) for i in _PEEPHOLES):
        raise UnsupportedOpError("peephole connections (cell_to_* weights) are not supported")
    if any(ctx.has(i) for i in _PROJECTION):
        raise UnsupportedOpError("a projection layer (projection weights or bias) is not supported")
    if any(ctx.has(i) for i in _LAYER_NORM):
        raise UnsupportedOpError("layer normalization (layer-norm coefficients) is not supported")
    if o.diagonal_recurrent_tensors or any(ctx.rank(i) == 1 for i in _RECURRENT_W):
        raise UnsupportedOpError("diagonal recurrent weights are not supported")
    if o.fused_activation_function != ActivationFunctionType.TANH:
        raise UnsupportedOpError(f"activation {o.fused_activation_function.name}: quantir reads the tanh LSTM")
    if not o.cell_clip >= 0:
        raise ModelFormatError(f"cell_clip {o.cell_clip} must be >= 0 (LiteRT refuses the model)")


def _gate_weights(ctx: OpContext, slots, shape: tuple[int, int], what: str) -> tuple[np.ndarray, list[float]]:
    """The four int8 ``shape`` weights at ``slots``, stacked, and their per-tensor scales."""
    arrays, scales = [], []
    for gate, i in zip(GATES, slots):
        t = ctx.tensor(i)
        array = ctx.const(i, f"{gate}-gate {what}")
        if t.type is not TFLType.INT8:
            raise UnsupportedOpError(f"{gate}-gate {what} '{t.name}' are {t.type.name}; quantir reads int8 weights "
                                     "(a float or hybrid LSTM is not read)")
        if tuple(t.shape) != shape:
            raise ModelFormatError(f"{gate}-gate {what} '{t.name}' have shape {list(t.shape)}, expected {list(shape)}")
        if not is_quantized(t):
            raise ModelFormatError(f"{gate}-gate {what} '{t.name}' have no quantization parameters")
        if len(t.quantization.scale) != 1:
            raise UnsupportedOpError(f"{gate}-gate {what} '{t.name}' are quantized per channel; LiteRT's integer "
                                     "LSTM reads one scale per weight tensor")
        if t.quantization.zero_point[0] != 0:
            raise UnsupportedOpError(f"{gate}-gate {what} '{t.name}' have zero point {t.quantization.zero_point[0]}; "
                                     "quantir reads symmetric LSTM weights (LiteRT's kernel ignores the zero point)")
        arrays.append(array)
        scales.append(t.quantization.scale[0])
    return np.stack(arrays), scales


def _gate_biases(ctx: OpContext, hidden: int, input_scale: float, w_scales: list[float]
                 ) -> tuple[np.ndarray, list[float]]:
    arrays, scales = [], []
    for gate, i, s_w in zip(GATES, _BIASES, w_scales):
        t = ctx.tensor(i)
        array = ctx.const(i, f"{gate}-gate bias")
        if t.type is not TFLType.INT32:
            raise UnsupportedOpError(f"{gate}-gate bias '{t.name}' is {t.type.name}; quantir reads int32 LSTM biases")
        if tuple(t.shape) != (hidden,):
            raise ModelFormatError(f"{gate}-gate bias '{t.name}' has shape {list(t.shape)}, expected [{hidden}]")
        if is_quantized(t) and len(t.quantization.scale) != 1:
            raise ModelFormatError(f"{gate}-gate bias '{t.name}' has {len(t.quantization.scale)} scales, expected one")
        scales.append(t.quantization.scale[0] if is_quantized(t) else float(bias_qparams(input_scale, s_w)[0]))
        arrays.append(array)
    return np.stack(arrays), scales


def _same_as_output(ctx: OpContext, t: Tensor, what: str) -> None:
    params = _params(t)
    if params is None or params != _params(ctx.out_tensor) or len(params[0]) != 1:
        raise UnsupportedOpError(f"the {what} '{t.name}' is quantized {_fmt(t.quantization)}, the output "
                                 f"{_fmt(ctx.out_tensor.quantization)}: quantir's LSTM keeps the hidden state at the "
                                 "output's parameters")


def _fmt(q: Quantization | None) -> str:
    return "(none)" if q is None else f"scale {list(q.scale)}, zero point {list(q.zero_point)}"


def _states(ctx: OpContext, batch: int | None, hidden: int) -> int:
    """Check the output_state and cell_state variables; the cell state's scale exponent."""
    for slot, what, ttype in ((_OUTPUT_STATE, "output_state", TFLType.INT8),
                              (_CELL_STATE, "cell_state", TFLType.INT16)):
        t = ctx.tensor(slot)
        if not t.is_variable or ctx.imp.data(ctx.idx(slot)) is not None:
            raise UnsupportedOpError(f"the {what} '{t.name}' must be a variable tensor without data (zero initial "
                                     "states), found " + ("a constant" if not t.is_variable else "initial data"))
        if t.type is not ttype:
            raise UnsupportedOpError(f"the {what} '{t.name}' is {t.type.name}; the 8x8_16 LSTM's is {ttype.name}")
        size = int(np.prod(t.shape, dtype=np.int64))
        if batch is not None and size != batch * hidden:
            raise ModelFormatError(f"the {what} '{t.name}' has {size} elements, not batch x units = {batch} x {hidden} "
                                   "(LiteRT refuses the model)")
    _same_as_output(ctx, ctx.tensor(_OUTPUT_STATE), "output_state")
    cell = ctx.tensor(_CELL_STATE)
    q = cell.quantization
    if not is_quantized(cell) or len(q.scale) != 1 or q.zero_point[0] != 0:
        raise UnsupportedOpError(f"the cell_state '{cell.name}' must be quantized per tensor with zero point 0, found "
                                 f"{_fmt(q)}")
    k = round(math.log2(q.scale[0]))
    if q.scale[0] != 2.0 ** k or not -20 <= k <= 0:
        raise UnsupportedOpError(f"the cell_state '{cell.name}' has scale {q.scale[0]:g}; quantir reads a power of two "
                                 "2**k with k in [-20, 0]")
    return k


def _per_gate(storage: int, scales: list[float]) -> UniformQuantizedPerAxisType:
    return UniformQuantizedPerAxisType(storage_type=IntegerType(storage), expressed_type=F32,
                                       scales=tuple(float(s) for s in scales), zero_points=(0,) * len(scales),
                                       quantized_dimension=0)


def unidirectional_sequence_lstm(ctx: OpContext) -> None:
    _refuse_features(ctx)
    imp = ctx.imp
    if ctx.rank(0) != 3:
        raise ModelFormatError(f"the input '{ctx.tensor(0).name}' must be [T, B, I], found shape "
                               f"{list(ctx.tensor(0).shape)}")
    _, batch, n_input = ctx.dims(0)
    hidden = ctx.tensor(_INPUT_W[3]).shape[0]
    if n_input is None:
        raise UnsupportedOpError("a dynamic input size (the last axis of the input)")
    w, w_scales = _gate_weights(ctx, _INPUT_W, (hidden, n_input), "input weights")
    r, r_scales = _gate_weights(ctx, _RECURRENT_W, (hidden, hidden), "recurrent weights")
    x_tensor = ctx.tensor(0)
    if not is_quantized(x_tensor) or len(x_tensor.quantization.scale) != 1:
        raise UnsupportedOpError(f"the input '{x_tensor.name}' must be int8 quantized per tensor")
    b, b_scales = _gate_biases(ctx, hidden, x_tensor.quantization.scale[0], w_scales)
    cell_scale_log2 = _states(ctx, batch, hidden)
    if len(ctx.op.intermediates) != 5:
        raise ModelFormatError(f"the integer LSTM has {len(ctx.op.intermediates)} intermediates; LiteRT's needs 5 "
                               "(and refuses the model)")
    _same_as_output(ctx, imp.tensor(ctx.op.intermediates[4]), "hidden intermediate")
    if ctx.out_tensor.type is not TFLType.INT8:
        raise UnsupportedOpError(f"the output '{ctx.out_tensor.name}' is {ctx.out_tensor.type.name}; quantir reads "
                                 "an int8 one")

    pair = _reverse_pair(imp, ctx.op)
    x = ctx.input(0, TIME_MAJOR) if pair is None else imp.value(pair[0].inputs[0], TIME_MAJOR, ctx.describe())
    out = ctx.out if pair is None else pair[1].outputs[0]
    name = imp.names[out]
    consts = []
    for what, array, scales, storage, shape in (("weights", w, w_scales, 8, (4, hidden, n_input)),
                                                ("recurrent_weights", r, r_scales, 8, (4, hidden, hidden)),
                                                ("bias", b, b_scales, 32, (4, hidden))):
        v = imp.stored_constant(np.ascontiguousarray(array), TensorType(shape, _per_gate(storage, scales)))
        v.name_hint = imp.fresh(f"{name}__{what}")
        consts.append(v)
    attrs = {"cell_scale_log2": cell_scale_log2, "reverse": pair is not None, "cell_clip": float(ctx.options.cell_clip)}
    op = Operation(qnn.UNIDIRECTIONAL_LSTM, [x, *consts], [imp.ir_type(out, TIME_MAJOR)],
                   qnn.UNIDIRECTIONAL_LSTM.make_attrs(attrs), label=name)
    ctx._check(op)
    imp.fn.body.append(op)
    imp.define(out, op.result, TIME_MAJOR)


def _refuse_hybrid(ctx: OpContext) -> None:
    raise UnsupportedOpError("a dynamic-range (hybrid) LSTM, float32 activations with int8 weights: quantir reads the "
                             "full-integer LSTM (int8 activations, int16 cell state)")


CONVERTERS: dict[OP, Converter] = {OP.UNIDIRECTIONAL_SEQUENCE_LSTM: unidirectional_sequence_lstm,
                                   OP.REVERSE_V2: reverse_v2}
# what Importer.is_hybrid routes here: refused with its own reason (not "quantized tensors on a float op")
HYBRID_CONVERTERS: dict[OP, Converter] = {OP.UNIDIRECTIONAL_SEQUENCE_LSTM: _refuse_hybrid}
