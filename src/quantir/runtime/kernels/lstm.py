"""``nn.lstm``: ONNX LSTM, forward, reverse or bidirectional.

Per direction, with gate weights stacked ``i, o, f, c`` (W ``[4H, I]``, R ``[4H, H]``), biases
``Wb + Rb`` and peepholes ``P = [Pi, Po, Pf]``::

    i = f(x Wiᵀ + h Riᵀ + Pi ⊙ c + bi)          o = f(x Woᵀ + h Roᵀ + Po ⊙ c' + bo)
    g = f'(x Wiᵀ ... ) = g(x Wcᵀ + h Rcᵀ + bc)   c' = f_ ⊙ c + i ⊙ g,   h' = o ⊙ h(c')
    f_ = f(x Wfᵀ + h Rfᵀ + Pf ⊙ c + bf)         (f_ = 1 − i with input_forget)

``f, g, h`` default to Sigmoid, Tanh, Tanh (``activations`` gives three per direction, with
``activation_alpha/beta`` consumed in order by those that take parameters); ``clip`` bounds
every gate's pre-activation. With ``sequence_lens`` a batch entry stops after its length: its
``Y`` rows past it are 0 and ``Y_h``/``Y_c`` hold its last valid step; the reverse direction
starts from its last valid step. The input projection of all steps is one matmul; the
recurrence is a loop over time.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedOpError
from ...ir.dialects import nn


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (function of (x, alpha, beta), default alpha, default beta, how many of alpha/beta it reads)
_ACTIVATIONS = {
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None, 0),
    "tanh": (lambda x, a, b: np.tanh(x), None, None, 0),
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None, 0),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None, 0),
    "softplus": (lambda x, a, b: np.logaddexp(x, 0), None, None, 0),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0, 2),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None, 1),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None, 1),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0, 2),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5, 2),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1)), 1.0, None, 1),
}
_DEFAULT = ("Sigmoid", "Tanh", "Tanh")


def _activations(attrs, num_dir: int):
    """Three ``x -> y`` functions per direction, from ``activations`` and ``activation_alpha/beta``."""
    names = tuple(attrs.get("activations") or _DEFAULT * num_dir)
    if len(names) != 3 * num_dir:
        raise UnsupportedOpError(f"lstm: {len(names)} activations for {num_dir} direction(s); ONNX needs "
                                 f"{3 * num_dir}")
    alphas, betas = list(attrs.get("activation_alpha") or ()), list(attrs.get("activation_beta") or ())
    out = []
    for name in names:
        key = name.lower() if isinstance(name, str) else name.decode().lower()
        if key not in _ACTIVATIONS:
            raise UnsupportedOpError(f"lstm activation '{name}' is not one of ONNX's RNN activations")
        fn, a, b, takes = _ACTIVATIONS[key]
        if takes >= 1 and alphas:
            a = alphas.pop(0)
        if takes == 2 and betas:
            b = betas.pop(0)
        out.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    return [out[3 * d: 3 * d + 3] for d in range(num_dir)]


def lstm(op, x, w, r, *extra):
    attrs = op.opdef.attr_values(op)
    given = dict(zip(attrs.get("optional_inputs") or (), extra))
    num_dir = w.shape[0]
    hidden = r.shape[-1]
    if attrs.get("layout"):
        x = x.transpose(1, 0, 2)                                   # -> [seq, batch, input]
    seq, batch, _ = x.shape
    dtype = x.dtype
    b = given.get("b")
    bias = np.zeros((num_dir, 4 * hidden), dtype) if b is None else b[:, :4 * hidden] + b[:, 4 * hidden:]
    p = given.get("p")
    h0, c0 = given.get("initial_h"), given.get("initial_c")
    if attrs.get("layout"):
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    lens = given.get("sequence_lens")
    lens = np.full(batch, seq, np.int64) if lens is None else np.asarray(lens, np.int64).reshape(batch)
    if np.any(lens < 0) or np.any(lens > seq):
        raise UnsupportedOpError(f"lstm: sequence_lens {lens.tolist()} must lie in [0, {seq}]")
    clip = attrs.get("clip")
    acts = _activations(attrs, num_dir)
    directions = ["reverse"] if attrs.get("direction") == "reverse" else ["forward", "reverse"][:num_dir]
    y = np.zeros((seq, num_dir, batch, hidden), dtype)
    y_h = np.zeros((num_dir, batch, hidden), dtype)
    y_c = np.zeros((num_dir, batch, hidden), dtype)
    for d, direction in enumerate(directions):
        f, g, hfn = acts[d]
        proj = x @ w[d].T + bias[d]                                  # [seq, batch, 4H]: every step at once
        h = np.zeros((batch, hidden), dtype) if h0 is None else h0[d].astype(dtype, copy=True)
        c = np.zeros((batch, hidden), dtype) if c0 is None else c0[d].astype(dtype, copy=True)
        pi, po, pf = (np.zeros(hidden, dtype),) * 3 if p is None else np.split(p[d], 3)
        steps = range(seq) if direction == "forward" else range(seq - 1, -1, -1)
        for t in steps:
            # forward: entries with t < len run; reverse: step t of entry b reads x[len_b - 1 - k] at the
            # k-th step, i.e. it runs the entries whose reversed index is valid
            if direction == "forward":
                rows, src = lens > t, np.full(batch, t)
            else:
                k = seq - 1 - t                                      # the k-th reverse step
                rows, src = lens > k, lens - 1 - k
            if not rows.any():
                continue
            idx = np.flatnonzero(rows)
            gates = proj[src[idx], idx] + h[idx] @ r[d].T
            gi, go, gf, gc = np.split(gates, 4, axis=1)
            cp = c[idx]
            gi, gf = gi + pi * cp, gf + pf * cp
            if clip is not None:
                gi, gf, gc = (np.clip(v, -clip, clip) for v in (gi, gf, gc))
            i_t = f(gi)
            f_t = 1 - i_t if attrs.get("input_forget") else f(gf)
            c_new = f_t * cp + i_t * g(gc)
            go = go + po * c_new
            if clip is not None:
                go = np.clip(go, -clip, clip)
            h_new = f(go) * hfn(c_new)
            h[idx], c[idx] = h_new, c_new
            y[src[idx], d, idx] = h_new
        y_h[d], y_c[d] = h, c
    if attrs.get("layout"):
        return y.transpose(2, 0, 1, 3), y_h.transpose(1, 0, 2), y_c.transpose(1, 0, 2)
    return y, y_h, y_c


KERNELS = {nn.LSTM: lstm}
