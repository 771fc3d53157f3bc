"""The weight-only configuration, its limits and its error."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import QuantirError

OPS = ("matmul", "gemm", "conv", "gather")
MIN_ELEMENTS = 1024          # LiteRT's converter: weights with fewer elements stay float
BLOCK_SIZES = (32, 256)      # the block sizes accepted, inclusive


class WeightOnlyError(QuantirError):
    """A weight-only configuration or model that cannot be quantized; the message says why."""


@dataclass(frozen=True)
class WeightOnlyConfig:
    """``bits``: 8 or 4. ``block_size``: None (per channel) or 32..256 elements along the
    reduction axis. ``symmetric``: zero point 0, else a zero point per group. ``ops``: which
    weights (``"matmul"``, ``"gemm"``, ``"conv"``, ``"gather"``). ``min_elements``: smaller
    weights stay float. ``rounding``: ``"mse"`` (clipping search) or ``"rtn"``."""

    bits: int = 8
    block_size: int | None = None
    symmetric: bool = True
    ops: tuple[str, ...] = OPS
    min_elements: int = MIN_ELEMENTS
    rounding: str = "mse"

    def __post_init__(self):
        if isinstance(self.bits, bool) or self.bits not in (4, 8):
            raise WeightOnlyError(f"weight-only bits must be 4 or 8, found {self.bits!r}")
        b = self.block_size
        if b is not None and (isinstance(b, bool) or not isinstance(b, int)
                              or not BLOCK_SIZES[0] <= b <= BLOCK_SIZES[1]):
            raise WeightOnlyError(f"block size must be an integer in {BLOCK_SIZES[0]}..{BLOCK_SIZES[1]} "
                                  f"(or None for per-channel scales), found {b!r}")
        unknown = [o for o in self.ops if o not in OPS]
        if unknown or not self.ops:
            raise WeightOnlyError(f"unknown weight-only ops {unknown or '(none given)'}: choose from {', '.join(OPS)}")
        object.__setattr__(self, "ops", tuple(self.ops))
        if isinstance(self.min_elements, bool) or not isinstance(self.min_elements, int) or self.min_elements < 0:
            raise WeightOnlyError(f"min_elements must be a non-negative integer, found {self.min_elements!r}")
        if self.rounding not in ("mse", "rtn"):
            raise WeightOnlyError(f"rounding must be 'mse' or 'rtn', found {self.rounding!r}")

    @property
    def qrange(self) -> tuple[int, int]:
        """The stored integers' range: symmetric int8 is LiteRT's narrow [-127, 127]."""
        lo, hi = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return (lo + 1, hi) if self.symmetric and self.bits == 8 else (lo, hi)

    def describe(self) -> str:
        gran = "per channel" if self.block_size is None else f"block {self.block_size}"
        return (f"int{self.bits} {gran}, {'symmetric' if self.symmetric else 'asymmetric'}, "
                f"{self.rounding.upper()} rounding")
