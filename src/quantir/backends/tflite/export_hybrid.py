"""Export rules for the dynamic-range ("hybrid") ops: float32 activations in and out, int8 weights
with their scales, as LiteRT's dynamic-range kernels take them."""
from __future__ import annotations

from typing import Callable

__all__ = ["HYBRID_RULES"]

HYBRID_RULES: dict[object, Callable] = {}
