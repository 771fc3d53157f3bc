"""What a weight-only quantization did: per weight quantized or left float, and the bytes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ...ir import Function, Module
from .config import WeightOnlyConfig, WeightOnlyError


@dataclass
class WeightLayer:
    name: str           # the weight
    op: str             # the op reading it
    kind: str
    shape: tuple[int, ...]
    granularity: str
    sqnr_db: float
    sqnr_rtn_db: float
    float_bytes: int
    quantized_bytes: int
    rounding: str = "mse"   # "rtn", "mse", "mse, E[x^2]-weighted" or "gptq"

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class FloatWeight:
    name: str
    op: str
    kind: str
    elements: int
    reason: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class WeightOnlyResult:
    """The module with quantized weights (float ops, ``quant.dcast`` before each), the float
    function it came from, and what was done: ``layers`` (per weight: SQNR, bytes), ``left_float``
    (each weight kept float and why), the constants' bytes before and after."""

    module: Module
    float_function: Function
    config: WeightOnlyConfig
    layers: list[WeightLayer]
    left_float: list[FloatWeight]
    bytes_before: int
    bytes_after: int
    calibrated: bool = False
    _writer: Callable[..., Any] | None = field(default=None, repr=False)

    def summary_dict(self) -> dict:
        return {"config": self.config.describe(), "calibration_weighted": self.calibrated,
                "quantized": [x.as_dict() for x in self.layers], "left_float": [x.as_dict() for x in self.left_float],
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                "ratio": self.bytes_after / self.bytes_before if self.bytes_before else None}

    def summary(self) -> str:
        lines = [f"weight-only {self.config.describe()}"
                 + (" with calibration data (GPTQ on MatMul/Gemm weights, E[x^2]-weighted search on the others)"
                    if self.calibrated else "")
                 + f": {len(self.layers)} weights quantized, {len(self.left_float)} left float"]
        lines.append(f"  {'SQNR dB':>8} {'RTN dB':>8}  weight (op, shape, granularity[, rounding])")
        for x in self.layers:
            how = f", {x.rounding}" if x.rounding != self.config.rounding else ""
            lines.append(f"  {x.sqnr_db:8.2f} {x.sqnr_rtn_db:8.2f}  {x.name} ({x.op}, {x.kind} "
                         f"{'x'.join(map(str, x.shape))}, {x.granularity}{how})")
        if self.left_float:
            lines.append("left float:")
            lines += [f"  {x.name} ({x.op}, {x.kind}, {x.elements} elements): {x.reason}" for x in self.left_float]
        ratio = self.bytes_after / self.bytes_before if self.bytes_before else float("nan")
        lines.append(f"constants: {self.bytes_before / 1e6:.2f} MB float -> {self.bytes_after / 1e6:.2f} MB "
                     f"({ratio:.3f}x)")
        return "\n".join(lines)

    def save(self, path, **options) -> Any:
        """Write the model atomically: ``.onnx`` (by default 4-bit blocked MatMul weights and Gather
        tables as ONNX Runtime's MatMulNBits / GatherBlockQuantized; ``matmul_nbits=False``: standard
        DequantizeLinear for every weight), ``.tflite`` (int8/int4 per-channel weights + DEQUANTIZE;
        block-wise weights are refused) or ``.mlir``."""
        if self._writer is None:
            raise WeightOnlyError("this result has no writer: make it with quantir.quantize_weights")
        return self._writer(self, path, **options)
