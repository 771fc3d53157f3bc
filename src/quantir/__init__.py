"""quantir — a post-training integer quantization compiler with an MLIR-compatible IR.

>>> import quantir as qr                                                    # doctest: +SKIP
>>> result = qr.quantize("model.onnx", calibration=qr.data.from_numpy("calib.npz"))  # doctest: +SKIP
>>> print(result.summary()); result.save("model.int8.mlir")                # doctest: +SKIP

Layers, each importing only from those above it: ``types`` → ``numerics`` → ``ir`` → ``text``
→ ``rewrite`` → ``passes`` → ``quantize`` → ``runtime`` → ``frontends``/``backends`` →
``report`` → ``cli``; ``quantir.api`` wires them together. Names below load on first use, so
``import quantir`` stays cheap (``quantir opt`` never imports ONNX Runtime).
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "load": ("quantir.api", "load"),
    "quantize": ("quantir.api", "quantize"),
    "quantize_weights": ("quantir.api", "quantize_weights"),
    "quantize_dynamic": ("quantir.api", "quantize_dynamic"),
    "quantize_hybrid": ("quantir.api", "quantize_hybrid"),
    "convert_qdq": ("quantir.api", "convert_qdq"),
    "calibration_stats": ("quantir.api", "calibration_stats"),
    "merge_stats": ("quantir.api", "merge_stats"),
    "Result": ("quantir.api", "Result"),
    "Config": ("quantir.quantize.config", "Config"),
    "WeightOnlyConfig": ("quantir.quantize.weight_only", "WeightOnlyConfig"),
    "DynamicConfig": ("quantir.quantize.dynamic", "DynamicConfig"),
    "HybridConfig": ("quantir.quantize.hybrid", "HybridConfig"),
    "run": ("quantir.runtime", "run"),
    "data": ("quantir.quantize.data", None),
}
__all__ = ["load", "quantize", "quantize_weights", "quantize_dynamic", "quantize_hybrid", "Result", "Config",
           "calibration_stats", "merge_stats", "WeightOnlyConfig", "DynamicConfig", "HybridConfig", "run", "data",
           "convert_qdq", "__version__"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'quantir' has no attribute '{name}'")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    return value if attr is None else getattr(value, attr)
