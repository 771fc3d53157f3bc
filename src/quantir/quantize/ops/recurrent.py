"""LSTM: LiteRT UNIDIRECTIONAL_SEQUENCE_LSTM, full integer (8x8_16).

LiteRT's integer LSTM takes an int8 input and int8 weights with one symmetric scale per weight
matrix (per gate, input and recurrent apart), int32 biases at input scale × weight scale, and
keeps its four gates in Q3.12 int16, the cell state in int16 at a power-of-two scale and the
hidden state in int8 at the output's parameters (docs/numerics.md, the LSTM section). It has
no integer BIDIRECTIONAL_SEQUENCE_LSTM, so:

- **Expansion** (before calibration): a bidirectional ONNX LSTM becomes a forward LSTM and a
  reverse LSTM whose ``Y`` (``[T, 1, B, H]`` each) a Concat joins on axis 1 — the same float
  values; zero initial states (absent, a zero constant, or ``ConstantOfShape`` of 0 on a shape
  computed at run time, as exporters write them) are dropped, since LiteRT's state tensors
  start at zero.
- **Pattern**: a forward or reverse LSTM in that form becomes one ``qnn.unidirectional_lstm``
  (``reverse``: the .tflite runs it between two REVERSE_V2) and an UNSQUEEZE to ONNX's
  ``[T, 1, B, H]``; the Concat is an ordinary CONCATENATION.
- **Calibration**: no tensor of the float graph holds the cell state at every step, so the
  declaration names it as an ``Interior`` value: calibration runs the float recurrence on each
  batch from the LSTM's observed input and feeds every step's cell state to the observers of the
  op's ``Y_c`` result (the last step's cell state, standing in for all of them). The cell-state
  scale is the smallest power of two that holds the largest magnitude, within what LiteRT's
  integer tanh of the cell accepts (2**-15 .. 2**-9: 1 to 64).

What stays float, with the reason: peepholes, ``sequence_lens``, ``clip``, ``input_forget``,
activations other than Sigmoid/Tanh/Tanh, the batch-first layout, non-zero initial states,
weights computed at run time, and an LSTM whose ``Y_h``/``Y_c`` are read (the integer op only
returns the sequence). int16 activations: LiteRT's integer LSTM reads int8 only, so the op stays
int8 inside a 16-bit model, requantized at its boundary.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...numerics import quantize_bias, quantize_weights, symmetric_weight_qparams
from ...rewrite import Match, Pat, Rewriter, Rule
from ...runtime.kernels import qnn_ops
from ...runtime.qkernels.unidirectional_lstm import prepare_unidirectional_lstm, unidirectional_lstm
from ...types import FloatType, IntegerType, TensorType, UniformQuantizedPerAxisType
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..params import ActParams, WeightParams, hessian_rounded
from ..regions import QuantizerPattern, Region, constant_array
from ..rules import ACT, BIAS, WEIGHT, OpSpec, QuantizedOp
from ..views import qparams_of
from .registry import Interior, QuantOp, SampleWeights, declare, declare_expansion

F32, I8, I32 = FloatType("f32"), IntegerType(8), IntegerType(32)
ONNX_TO_LITERT = (0, 2, 3, 1)        # ONNX stacks the gates i, o, f, c; LiteRT reads i, f, c, o
CELL_LOG2 = (-15, -9)                # LiteRT's integer tanh of the cell takes 0..6 integer bits
_DEFAULT_ACTIVATIONS = ("sigmoid", "tanh", "tanh")


# -- which LSTMs become integer ---------------------------------------------------------------------

def _zero_state(v: Value) -> bool:
    """A zero initial state: a zero constant, or ConstantOfShape of 0 (its shape computed at run time)."""
    array = constant_array(v)
    if array is not None:
        return not np.any(array)
    op = getattr(v, "op", None)
    if op is not None and op.opdef is nn.CONSTANT_OF_SHAPE:
        value = op.attr("value")
        fill = getattr(value, "array", value)
        return fill is None or not np.any(np.asarray(fill))
    return False


def _why_float(op: Operation) -> str | None:
    """Why the ONNX LSTM ``op`` cannot be LiteRT's integer LSTM, or None."""
    attrs = op.opdef.attr_values(op)
    given = dict(zip(attrs.get("optional_inputs") or (), op.operands[3:]))
    if attrs.get("layout"):
        return "layout=1 (batch first): LiteRT's integer LSTM is written time-major"
    for name, why in (("p", "peephole weights"), ("sequence_lens", "sequence_lens (per-entry lengths)")):
        if name in given:
            return f"{why}: not in LiteRT's integer LSTM as quantir writes it"
    for name in ("initial_h", "initial_c"):
        if name in given and not _zero_state(given[name]):
            return f"{name} is not zero: LiteRT's state tensors start at zero"
    if attrs.get("clip") is not None:
        return "clip on the gates: LiteRT's integer LSTM has no gate clip"
    if attrs.get("input_forget"):
        return "input_forget (coupled gates)"
    names = attrs.get("activations")
    if names and any((n if isinstance(n, str) else n.decode()).lower() != d
                     for n, d in zip(names, _DEFAULT_ACTIVATIONS * 2)):
        return f"activations {list(names)}: LiteRT's integer LSTM is Sigmoid/Tanh/Tanh"
    for i, what in ((1, "W"), (2, "R")):
        if constant_array(op.operands[i]) is None:
            return f"{what} is computed at run time: integer weights must be constants"
    if "b" in given and constant_array(given["b"]) is None:
        return "B is computed at run time: the integer bias must be a constant"
    if op.operands[0].type.element_type != F32:
        return f"the input is {op.operands[0].type.element_type}, not f32"
    if getattr(op.operands[0].type, "rank", None) != 3:
        return "the input must be a 3-D [T, B, I] tensor"
    return None


def _kept_whole(op: Operation) -> str | None:
    """Why ``op`` is neither split into directions nor quantized, or None."""
    why = _why_float(op)
    if why is None and op.attr("direction") == "bidirectional" and (op.results[1].uses or op.results[2].uses):
        why = "Y_h or Y_c of a bidirectional LSTM is read: kept whole, and LiteRT's integer LSTM returns only Y"
    return why


def _canonical(op: Operation) -> bool:
    """One direction, and no operands besides X, W, R and B: the form the pattern quantizes."""
    names = tuple(op.attr("optional_inputs") or ())
    return (op.attr("direction") or "forward") in ("forward", "reverse") and names in ((), ("b",))


# -- expansion: one LSTM per direction, zero states dropped -------------------------------------------

def _check_expand(m: Match) -> str | None:
    op = m.ops["op"]
    if _canonical(op):
        return "already one direction without initial states"
    return _kept_whole(op)


def _expand(rw: Rewriter, m: Match) -> list[Value]:
    op = m.ops["op"]
    attrs = op.opdef.attr_values(op)
    given = dict(zip(attrs.get("optional_inputs") or (), op.operands[3:]))
    x = op.operands[0]
    w, r = constant_array(op.operands[1]), constant_array(op.operands[2])
    b = constant_array(given["b"]) if "b" in given else None
    name = op.results[0].name_hint or "lstm"
    directions = ("forward", "reverse") if attrs.get("direction") == "bidirectional" else (attrs.get("direction")
                                                                                         or "forward",)
    keep = {k: attrs[k] for k in ("hidden_size",) if attrs.get(k) is not None}
    outs: list[tuple[Value, Value, Value]] = []
    for d, direction in enumerate(directions):
        what = f"{name}.{direction}" if len(directions) > 1 else name
        operands = [x, rw.f32_constant(w[d:d + 1], f"{what}.w"), rw.f32_constant(r[d:d + 1], f"{what}.r")]
        if b is not None:
            operands.append(rw.f32_constant(b[d:d + 1], f"{what}.b"))
        types = [res.type.clone(shape=_one_direction(res.type.shape, axis)) if res.type.shape is not None
                 else res.type for res, axis in zip(op.results, (1, 0, 0))]
        new = nn.LSTM.build(operands, types, optional_inputs=("b",) if b is not None else (),
                            direction=direction, **keep)
        new.label = f"{op.label or name}/{direction}" if len(directions) > 1 else (op.label or name)
        rw.insert(new)
        for res, suffix in zip(new.results, ("", ".y_h", ".y_c")):
            res.name_hint = what + suffix
        outs.append(tuple(new.results))
    if len(outs) == 1:
        return list(outs[0])
    joined = nn.CONCAT.build([outs[0][0], outs[1][0]], [op.results[0].type], axis=1)
    joined.label = op.label or name
    y = rw.insert(joined).result
    y.name_hint = name
    return [y]


def _one_direction(shape, axis: int):
    return tuple(1 if i == axis else d for i, d in enumerate(shape))


LSTM_DIRECTIONS = declare_expansion(Rule(
    "lstm_directions", Pat.op(nn.LSTM, name="op", any_operands=True), _expand, check=_check_expand,
    doc="a bidirectional LSTM -> forward and reverse LSTMs + Concat; zero initial states dropped"))


# -- the pattern ----------------------------------------------------------------------------------------

# any LSTM (X, W, R and up to five optional operands): the check says why one stays float
_LSTM = Pat.op(nn.LSTM, Pat.any("x"), Pat.any("w"), Pat.any("r"), *(Pat.any().optional() for _ in range(5)), name="op")


def _check(m: Match) -> str | None:
    op = m.ops["op"]
    why = _kept_whole(op)
    if why is not None:
        return why
    if not _canonical(op):
        return "a bidirectional LSTM, or one with initial states, that the expansion did not split"
    if op.results[1].uses or op.results[2].uses:
        return "Y_h or Y_c is read: LiteRT's integer LSTM returns only the sequence"
    return None


def _gates(a: np.ndarray) -> np.ndarray:
    """``[4H, ...]`` in ONNX's gate order -> ``[4, H, ...]`` in LiteRT's."""
    stacked = a.reshape(4, a.shape[0] // 4, *a.shape[1:])
    return np.ascontiguousarray(stacked[list(ONNX_TO_LITERT)])


# the candidate gate scales, as fractions of the largest magnitude: a coarse pass, then steps of 0.01
# around the best (each candidate costs a [H, K] x [K, K] product under a Gram matrix)
COARSE_FRACTIONS = np.round(np.arange(0.3, 1.0001, 0.05), 2)


def _weights(w: np.ndarray, gram: np.ndarray | None = None, hessian: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """int8 values and one symmetric scale per gate of ``w`` ``[4, H, K]``.

    LiteRT's LSTM takes one scale per gate matrix (not per row), so a few large weights would set
    the step for all of them: each gate's scale is the candidate (a fraction of its largest
    magnitude) with the least output error — ``Σ eᵀ G e`` over the rows' rounding errors ``e``
    under the input's Gram matrix ``G`` when the calibration samples give one, else ``Σ |e|²``.
    With ``G`` and ``hessian`` the rows are then rounded to minimize that error (GPTQ,
    ``params.hessian_rounded``), else to nearest. On ddddocr's recognizer (512 hidden units) the
    per-gate max scale costs the LSTM's output cosine 0.9987, the searched scale with GPTQ 0.9997."""
    ints = np.empty(w.shape, np.int64)
    scales = np.empty(4, np.float32)
    for g in range(4):
        block = w[g].astype(np.float64)
        top = float(symmetric_weight_qparams(w[g])[0])
        def error(frac: float) -> tuple[float, float]:
            s = float(np.float32(top * frac))
            e = block - np.clip(np.rint(block / s), -127, 127) * s
            return (float(np.sum((e @ gram) * e)) if gram is not None else float(np.sum(e * e))), s

        coarse = min(COARSE_FRACTIONS, key=lambda f: error(f)[0])
        fine = [f for f in np.round(coarse + np.arange(-0.04, 0.0401, 0.01), 2) if 0.3 <= f <= 1.0]
        best = min((error(f) for f in sorted({*fine, 1.0})), key=lambda pair: pair[0])
        scales[g] = best[1]
        ints[g] = hessian_rounded(w[g], best[1], gram[None]) if gram is not None and hessian else \
            quantize_weights(w[g], np.float32(best[1]))
    return ints, scales


def _float_weights(op: Operation) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W ``[4, H, I]``, R ``[4, H, H]`` and the summed bias ``[4, H]`` of one direction, in LiteRT's gate order."""
    w = _gates(constant_array(op.operands[1])[0].astype(np.float32))
    r = _gates(constant_array(op.operands[2])[0].astype(np.float32))
    hidden = r.shape[1]
    b = constant_array(op.operands[3]) if len(op.operands) > 3 else None
    bias = np.zeros((4, hidden), np.float32) if b is None else \
        _gates((b[0, :4 * hidden] + b[0, 4 * hidden:]).astype(np.float32))
    return w, r, bias


def sample_sums(r: Region, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Gram matrices of the LSTM's input and of its previous hidden state on one batch (what W
    and R multiply), from the float recurrence."""
    op = r.match.ops["op"]
    _, hiddens = recurrence(op, x)
    seq = np.asarray(x, np.float64)
    seq = seq[::-1] if op.attr("direction") == "reverse" else seq
    prev = np.concatenate([np.zeros_like(hiddens[:1]), hiddens[:-1]]).astype(np.float64)
    flat_x, flat_h = seq.reshape(-1, seq.shape[-1]), prev.reshape(-1, prev.shape[-1])
    return flat_x.T @ flat_x, flat_h.T @ flat_h


def sample_params(r: Region, sums: tuple | None, hessian: bool) -> dict[Value, WeightParams]:
    """The per-gate int8 W and R (``_weights``) under the summed Gram matrices, by weight value (the
    solver keeps them for the quantization's later solves: ``Statistics.derived``)."""
    op = r.match.ops["op"]
    w, rw, _ = _float_weights(op)
    out = {}
    for value, matrix, gram in zip(op.operands[1:3], (w, rw), sums or (None, None)):
        ints, scales = _weights(matrix, gram, hessian)
        out[value] = WeightParams(scales, None, None, ints)
    return out


def _per_gate(storage: IntegerType, scales: np.ndarray, qmin: int | None = None, qmax: int | None = None):
    extra = {} if qmin is None else {"storage_min": qmin, "storage_max": qmax}
    return UniformQuantizedPerAxisType(storage_type=storage, expressed_type=F32,
                                       scales=tuple(float(s) for s in scales), zero_points=(0,) * 4,
                                       quantized_dimension=0, **extra)


def cell_scale_log2(lo: float, hi: float) -> int:
    """The power of two of the int16 cell state's scale: the finest that holds ``max(|lo|, |hi|)``."""
    amax = max(abs(lo), abs(hi))
    if not np.isfinite(amax):
        amax = 2.0 ** (CELL_LOG2[1] + 15)
    k = math.ceil(math.log2(amax / 32767.0)) if amax > 0 else CELL_LOG2[0]
    return int(min(max(k, CELL_LOG2[0]), CELL_LOG2[1]))


def lower_lstm(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    x = lw.input(r.match["x"])
    w, rw, bias = _float_weights(op)
    decided = [lw.params.get(v) for v in op.operands[1:3]]    # the solver's (from the kept samples)
    (w_ints, w_scales), (r_ints, r_scales) = (
        (p.quantized, p.scale) if isinstance(p, WeightParams) else _weights(m) for p, m in zip(decided, (w, rw)))
    s_x = np.float32(qnn.scales_of(x.type))
    b_scales = (np.float64(s_x) * w_scales.astype(np.float64)).astype(np.float32)
    b_ints = quantize_bias(bias, b_scales[:, None], on_overflow="saturate")
    wv = lw.stored_constant(w_ints, I8, TensorType(w.shape, _per_gate(I8, w_scales, -127, 127)))
    rv = lw.stored_constant(r_ints, I8, TensorType(rw.shape, _per_gate(I8, r_scales, -127, 127)))
    bv = lw.stored_constant(b_ints, I32, TensorType(bias.shape, _per_gate(I32, b_scales)))
    out_t = lw.out_type(r)                                      # [T, 1, B, H]
    seq_t = out_t.clone(shape=(out_t.shape[0], out_t.shape[2], out_t.shape[3]))
    cell = lw.params[op.results[2]]
    new = qnn.UNIDIRECTIONAL_LSTM.build([x, wv, rv, bv], [seq_t], cell_scale_log2=int(round(math.log2(cell.scale))),
                                        reverse=op.attr("direction") == "reverse")
    seq = lw.emit(new, op).result
    return lw.emit(nn.UNSQUEEZE.build([seq], [out_t], axes=[1]), op).result


# -- calibration of the cell state -------------------------------------------------------------------

def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def recurrence(op: Operation, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every step's cell and hidden state ``[T, B, H]``, in the order the LSTM ``op`` runs them (a
    reverse LSTM from the last step), on the float input ``x``: zero initial states and
    Sigmoid/Tanh/Tanh, the form the pattern accepts."""
    w, r, bias = _float_weights(op)
    x = np.asarray(x, np.float32)
    if op.attr("direction") == "reverse":
        x = x[::-1]
    hidden = r.shape[1]
    proj = x @ w.reshape(4 * hidden, -1).T + bias.reshape(-1)
    stacked = r.reshape(4 * hidden, hidden).T
    h = np.zeros((x.shape[1], hidden), np.float32)
    c = np.zeros_like(h)
    cells, hiddens = np.empty((2, x.shape[0], x.shape[1], hidden), np.float32)
    for t in range(x.shape[0]):
        gi, gf, gc, go = np.split(proj[t] + h @ stacked, 4, axis=1)     # LiteRT's order
        c = _sigmoid(gf) * c + _sigmoid(gi) * np.tanh(gc)
        h = _sigmoid(go) * np.tanh(c)
        cells[t], hiddens[t] = c, h
    return cells, hiddens


def _cell_params(lo: float, hi: float) -> ActParams:
    return ActParams(float(2.0 ** cell_scale_log2(lo, hi)), 0, True, lo, hi, 16)


def _interior(r: Region) -> tuple[Interior, ...]:
    op = r.match.ops["op"]
    x = r.match["x"]
    return (Interior(op.results[2], lambda value_of: recurrence(op, value_of(x))[0], _cell_params),)


# -- interpreter binding, spec view -------------------------------------------------------------------

def lstm_kernel(op: Operation, x, w, r, b):
    xv, wv, rv, y = op.operands[0], op.operands[1], op.operands[2], op.results[0]
    s_y, zp_y = qnn_ops.scale_of(y), qnn_ops.zero_point_of(y)
    p = qnn_ops.prepare_once(op, lambda: prepare_unidirectional_lstm(
        qnn_ops.scale_of(xv), qnn_ops.zero_point_of(xv), tuple(qnn.scales_of(wv.type)), tuple(qnn.scales_of(rv.type)),
        s_y, zp_y, op.attr("cell_scale_log2"), s_y, zp_y, cell_clip=op.attr("cell_clip") or 0.0))
    batch, hidden = x.shape[1], r.shape[1]
    seq = x[::-1] if op.attr("reverse") else x
    out, _, _ = unidirectional_lstm(seq, w, r, b, np.full((batch, hidden), zp_y, np.int8),
                                    np.zeros((batch, hidden), np.int16), time_major=True, **p.as_kwargs())
    return out[::-1].copy() if op.attr("reverse") else out


def lstm_view(op: Operation) -> QuantizedOp:
    return QuantizedOp("UNIDIRECTIONAL_SEQUENCE_LSTM", op.label or op.name,
                       tuple(qparams_of(v) for v in op.operands), tuple(qparams_of(res) for res in op.results))


UNIDIRECTIONAL_LSTM = declare(QuantOp(
    qnn.UNIDIRECTIONAL_LSTM, OP.UNIDIRECTIONAL_SEQUENCE_LSTM, OpSpec((ACT, WEIGHT(0), WEIGHT(0), BIAS), ACT),
    patterns=(QuantizerPattern("lstm", _LSTM, lower_lstm, check=_check,
                               doc="ONNX LSTM, one direction (Sigmoid/Tanh/Tanh, zero initial states)"),),
    kernel=lstm_kernel, view=lstm_view, interior=_interior, qdq_ops=(nn.LSTM,),
    sample_weights=SampleWeights(sample_sums, sample_params),
    doc="LSTM over a sequence: int8 input and hidden state, Q3.12 gates, int16 cell state"))
