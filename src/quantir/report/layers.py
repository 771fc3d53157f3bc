"""Per-layer error: how far each dequantized integer tensor is from its float counterpart.

SQNR = 10·log10(Σ x² / Σ (x − x̂)²) in dB (∞ when equal); cosine similarity of the flattened
tensors; the largest absolute error, also in units of the tensor's quantization step.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class LayerError:
    name: str
    kind: str
    sqnr_db: float
    cosine: float
    max_abs_error: float
    scale: float

    @property
    def max_error_steps(self) -> float:
        return self.max_abs_error / self.scale if self.scale else math.inf

    def as_dict(self) -> dict:
        d = asdict(self)
        d["max_error_steps"] = self.max_error_steps
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def error_sums(reference: np.ndarray, approx: np.ndarray) -> np.ndarray:
    """[Σx², Σ(x−x̂)², Σx·x̂, Σx̂², max|x−x̂|] of one batch: what ``from_sums`` needs, so batches
    can be compared one at a time instead of holding every tensor of every sample."""
    x = np.asarray(reference, np.float64).ravel()
    y = np.asarray(approx, np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"cannot compare shapes {np.shape(reference)} and {np.shape(approx)}")
    d = x - y
    return np.array([x @ x, d @ d, x @ y, y @ y, np.max(np.abs(d), initial=0.0)])


def add_sums(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two batches' ``error_sums`` as one (sums add, the max error is the larger)."""
    return np.array([*(a[:4] + b[:4]), max(a[4], b[4])])


def from_sums(sums: np.ndarray) -> tuple[float, float, float]:
    """(SQNR dB, cosine, max |error|) from ``error_sums``."""
    signal, noise, xy, yy, err = (float(v) for v in sums)
    sqnr = math.inf if noise == 0 else (10 * math.log10(signal / noise) if signal > 0 else -math.inf)
    nx, ny = math.sqrt(signal), math.sqrt(yy)
    cosine = 1.0 if nx == ny == 0 else (xy / (nx * ny) if nx and ny else 0.0)
    return sqnr, cosine, err


def compare(reference: np.ndarray, approx: np.ndarray) -> tuple[float, float, float]:
    """(SQNR dB, cosine, max |error|) of ``approx`` against ``reference``."""
    return from_sums(error_sums(reference, approx))
