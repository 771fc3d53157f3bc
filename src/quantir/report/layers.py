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


def compare(reference: np.ndarray, approx: np.ndarray) -> tuple[float, float, float]:
    """(SQNR dB, cosine, max |error|) of ``approx`` against ``reference``."""
    x = np.asarray(reference, np.float64).ravel()
    y = np.asarray(approx, np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"cannot compare shapes {np.shape(reference)} and {np.shape(approx)}")
    noise = float(np.sum((x - y) ** 2))
    signal = float(np.sum(x ** 2))
    sqnr = math.inf if noise == 0 else (10 * math.log10(signal / noise) if signal > 0 else -math.inf)
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    cosine = 1.0 if nx == ny == 0 else (float(x @ y) / (nx * ny) if nx and ny else 0.0)
    return sqnr, cosine, float(np.max(np.abs(x - y), initial=0.0))
