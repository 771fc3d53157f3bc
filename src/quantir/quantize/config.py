"""Options of a quantization run: one explicit object, passed from the CLI down. No globals."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .methods import MethodOptions, options_for

Engine = Literal["ort", "interpreter"]


@dataclass(frozen=True)
class Config:
    """What to quantize and how.

    The defaults follow the LiteRT int8 spec: per-channel symmetric int8 weights, asymmetric
    per-tensor int8 activations, int32 bias, ranges from min/max over the calibration data.

    >>> Config(method="percentile", exclude=("head/Gemm",)).method_options.percentile
    99.999
    """

    method: str = "minmax"                    # minmax | percentile | entropy | mse
    method_options: MethodOptions | None = None
    per_channel: bool = True                  # per-axis weights (False: one scale per weight tensor)
    exclude: tuple[str, ...] = ()             # op labels (ONNX node names) or nn op names (nn.softmax) to keep float
    engine: Engine = "ort"                    # fp32 calibration executor; the numpy interpreter is the fallback
    batch_size: int = 32                      # samples per calibration batch
    max_samples: int | None = None            # stop after this many calibration samples
    progress: bool = True                     # show a progress bar while calibrating

    def __post_init__(self) -> None:
        if self.method_options is None:
            object.__setattr__(self, "method_options", options_for(self.method))
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.engine not in ("ort", "interpreter"):
            raise ValueError(f"engine must be 'ort' or 'interpreter', got {self.engine!r}")

    def excludes(self, label: str | None, op_name: str) -> bool:
        return op_name in self.exclude or (label is not None and label in self.exclude)
