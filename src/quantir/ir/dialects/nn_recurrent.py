"""Recurrent layers: ``nn.lstm`` (ONNX LSTM).

ONNX gives LSTM five optional inputs, any of which may be left out in the middle (``X, W, R,
B, '', initial_h``); quantir's op takes ``x, w, r`` and the present ones as the variadic
``extra``, named in order by the ``optional_inputs`` attribute (a subset of ``b``,
``sequence_lens``, ``initial_h``, ``initial_c``, ``p``). It always has the three results
``y``, ``y_h``, ``y_c``; an output the node does not use is simply dead.
"""
from __future__ import annotations

from ...errors import ShapeError, UnsupportedOpError
from ..opdef import AttrKind, AttrSpec
from .nn_base import FLOAT, FLOATS, INT, STRING, define, elt, require_float, shape_of, tensor, variadic

OPTIONAL_INPUTS = ("b", "sequence_lens", "initial_h", "initial_c", "p")
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _lstm(types, attrs):
    x, w = types[0], types[1]
    require_float(x, "lstm input")
    names = tuple(attrs.get("optional_inputs") or ())
    if len(names) != len(types) - 3 or any(n not in OPTIONAL_INPUTS for n in names) or len(set(names)) != len(names):
        raise ShapeError(f"lstm: optional_inputs {list(names)} must name each extra operand once, from "
                         f"{list(OPTIONAL_INPUTS)} ({len(types) - 3} given)")
    direction = attrs.get("direction") or "forward"
    if direction not in DIRECTIONS:
        raise UnsupportedOpError(f"lstm direction must be one of {sorted(DIRECTIONS)}, got {direction!r}")
    num_dir = DIRECTIONS[direction]
    xs, ws = shape_of(x), shape_of(w)
    hidden = attrs.get("hidden_size")
    if hidden is None and ws is not None and ws[1] is not None:
        hidden = ws[1] // 4
    if ws is not None and ws[0] is not None and ws[0] != num_dir:
        raise ShapeError(f"lstm: W has {ws[0]} directions, direction '{direction}' needs {num_dir}")
    if xs is None:
        return [tensor(None, elt(x))] * 3
    if len(xs) != 3:
        raise ShapeError(f"lstm: X must be 3-D, got shape {xs}")
    layout = attrs.get("layout") or 0
    seq, batch = (xs[1], xs[0]) if layout else (xs[0], xs[1])
    if layout:
        return [tensor((batch, seq, num_dir, hidden), elt(x)), tensor((batch, num_dir, hidden), elt(x)),
                tensor((batch, num_dir, hidden), elt(x))]
    return [tensor((seq, num_dir, batch, hidden), elt(x)), tensor((num_dir, batch, hidden), elt(x)),
            tensor((num_dir, batch, hidden), elt(x))]


LSTM = define(
    "lstm", ("x", "w", "r", variadic("extra")), ("y", "y_h", "y_c"),
    {"optional_inputs": AttrSpec(AttrKind.STRINGS, False, ()), "activation_alpha": FLOATS(),
     "activation_beta": FLOATS(), "activations": AttrSpec(AttrKind.STRINGS, False, None), "clip": FLOAT(),
     "direction": STRING("forward"), "hidden_size": INT(), "input_forget": INT(0), "layout": INT(0)},
    _lstm, summary="ONNX LSTM (gates i, o, f, c); the optional inputs present are named by optional_inputs.")
