"""The quantization parameters a fake-quant range means (TensorFlow's ``FakeQuantWithMinMaxArgs``).

TensorFlow defines fake quantization on the unsigned grid ``[qmin, qmax] = [narrow_range, 2^n - 1]``:
``scale = (max - min) / (qmax - qmin)``, the zero point ``qmin - min / scale`` clamped to
``[qmin, qmax]`` and rounded half away from zero (``std::round``; the value is never negative), so
that 0 is a grid point ("nudging": a range that does not contain 0 is moved to touch it, its width
kept). Signed storage is the same real grid with every stored value minus ``2^(n-1)``.

:func:`fake_quant_qparams` computes this exactly (``fractions.Fraction`` of the f32 ``min``/``max``)
and rounds the scale once to the nearest float32, the scale a deployed model stores. Where it
differs from the two implementations it is measured against:

* TensorFlow's kernel computes in float32. Its zero point for ``[-1, 1]`` at 8 bits is
  ``f32(0 - (-1) / f32(2/255)) = 127.49999`` -> 127, though the exact value is 127.5 -> 128
  (as ``[-6, 6]`` gives in float32 too). The exact value is the definition the kernel approximates.
* The MLIR fork's ``fakeQuantAttrsToType`` computes in double and keeps a double scale; it
  solves the zero point from ``(min, qmin)`` or ``(max, qmax)`` on the *storage* grid and rounds
  half away from zero there, so a signed type rounds ``-0.5`` to ``-1`` where the unsigned grid
  rounds ``127.5`` to ``128``: ``[-1, 1]`` gives zero point 128 (``u8``) but -1 (``i8``, i.e. 127
  unsigned), two different grids for one op. Here signed and unsigned are always the same grid.
"""
from __future__ import annotations

import sys
from fractions import Fraction
from math import floor

import numpy as np

__all__ = ["fake_quant_qparams", "fake_quant_storage_range", "nearest_f32"]


def fake_quant_storage_range(num_bits: int, narrow_range: bool, is_signed: bool) -> tuple[int, int]:
    """``(qmin, qmax)`` of ``num_bits`` storage, the minimum raised by one for a narrow range."""
    lo = -(1 << (num_bits - 1)) if is_signed else 0
    return lo + int(narrow_range), lo + (1 << num_bits) - 1


def nearest_f32(x: Fraction) -> float:
    """The float32 nearest to ``x`` (ties to even), as a Python float; exact, with no double rounding."""
    d = np.float32(float(x))   # float(Fraction) is correctly rounded; the f32 step may round twice
    cands = {d, np.nextafter(d, np.float32(np.inf)), np.nextafter(d, np.float32(-np.inf))}
    cands = [c for c in cands if np.isfinite(c)]
    best = min(abs(Fraction(float(c)) - x) for c in cands)
    near = [c for c in cands if abs(Fraction(float(c)) - x) == best]
    return float(min(near, key=lambda c: int(np.asarray(c).view(np.uint32)) & 1))


def fake_quant_qparams(rmin: float, rmax: float, num_bits: int, narrow_range: bool = False,
                       is_signed: bool = False) -> tuple[float, int]:
    """``(scale, zero_point)`` of a fake-quant range, the zero point in the storage's terms.

    ``rmin``/``rmax`` are read as float32 (the op's attributes are f32). A range narrower than
    double's epsilon is the MLIR fork's special case, kept: scale 1.0 and zero point ``qmin``
    (meant for a tensor of zeros; a nonzero input ``x`` then comes back as ``clamp(round(x))``,
    not as the 0 a zero-width range would give). ``rmin > rmax`` raises ``ValueError``.

    >>> fake_quant_qparams(-1.0, 1.0, 8)
    (0.007843137718737125, 128)
    >>> fake_quant_qparams(-1.0, 1.0, 8, is_signed=True)
    (0.007843137718737125, 0)
    >>> fake_quant_qparams(0.5, 2.0, 4)     # nudged to [0, 1.5]
    (0.10000000149011612, 0)
    """
    lo, hi = Fraction(float(np.float32(rmin))), Fraction(float(np.float32(rmax)))
    if lo > hi:
        raise ValueError(f"illegal min and max: ({float(lo)}:{float(hi)})")
    shift = (1 << (num_bits - 1)) if is_signed else 0
    qmin, qmax = int(narrow_range), (1 << num_bits) - 1   # TensorFlow's unsigned grid
    if hi - lo < Fraction(sys.float_info.epsilon):
        return 1.0, qmin - shift
    exact = (hi - lo) / (qmax - qmin)
    scale = nearest_f32(exact)   # >= 2^-52 / 65535: a normal float32, never 0
    z = qmin - lo / exact
    zp = qmin if z < qmin else qmax if z > qmax else floor(z + Fraction(1, 2))   # z >= 0: half away from 0
    return scale, zp - shift
