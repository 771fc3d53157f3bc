"""Reports: per-layer error of the integer model against float, and quantization summaries."""
from .layers import LayerError, compare

__all__ = ["LayerError", "compare"]
