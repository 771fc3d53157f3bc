"""Runtimes and peer quantizers for bench/methods_runtimes.py.

Every runner takes a whole evaluation array and returns the model's first output for it, fed in
batches of at most ``batch`` samples, one thread each (the machine is shared; speed is not
measured here).

Peers, configured as quantir's defaults are (int8 per-channel weights, int8 activations):

* ONNX Runtime ``quantize_static``: QDQ, per-channel, QInt8 activations and weights, MinMax /
  Entropy / Percentile with ONNX Runtime's own defaults for each, fed the same calibration
  samples (in equal batches: its histogram collectors need them).
* NNCF ``nncf.quantize`` (ONNX backend) with its defaults (preset PERFORMANCE: symmetric
  activations; fast bias correction; ``subset_size`` = every calibration sample), one sample per
  dataset item.

Both write QDQ models that run in ONNX Runtime.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
from pathlib import Path

import numpy as np

ORT_METHODS = ("MinMax", "Entropy", "Percentile")


def _batches(x: np.ndarray, batch: int):
    for i in range(0, len(x), batch):
        yield x[i:i + batch]


def ort_runner(model: bytes | str | Path, input_name: str):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])

    def run(x: np.ndarray, batch: int) -> np.ndarray:
        return np.concatenate([session.run(None, {input_name: b})[0] for b in _batches(x, batch)])
    return run


def interpreter_runner(module, input_name: str):
    from quantir.runtime import run as interpret

    def run(x: np.ndarray, batch: int) -> np.ndarray:
        outs = []
        for b in _batches(x, batch):
            result = interpret(module, {input_name: b})
            outs.append(next(iter(result.values())))
        return np.concatenate(outs)
    return run


def litert_runner(tflite: bytes, resolver: str = "default"):
    """LiteRT on the .tflite bytes: ``default`` is the AUTO resolver (XNNPACK delegate where it
    takes the ops, optimized builtin kernels elsewhere); ``reference`` is BUILTIN_REF."""
    from ai_edge_litert import interpreter as lite
    kind = {"default": lite.OpResolverType.AUTO, "reference": lite.OpResolverType.BUILTIN_REF}[resolver]
    interp = lite.Interpreter(model_content=tflite, experimental_op_resolver_type=kind, num_threads=1)
    inp = interp.get_input_details()[0]
    out_index = interp.get_output_details()[0]["index"]
    shape: list = []

    def run(x: np.ndarray, batch: int) -> np.ndarray:
        outs = []
        for b in _batches(x, batch):
            if list(b.shape) != shape:
                interp.resize_tensor_input(inp["index"], list(b.shape))
                interp.allocate_tensors()
                shape[:] = list(b.shape)
            interp.set_tensor(inp["index"], np.ascontiguousarray(b, dtype=inp["dtype"]))
            interp.invoke()
            outs.append(interp.get_tensor(out_index).copy())
        return np.concatenate(outs)
    return run


def _reader(input_name: str, x: np.ndarray, batch: int):
    """An ONNX Runtime CalibrationDataReader over ``x`` in equal batches of at most ``batch``."""
    from onnxruntime.quantization import CalibrationDataReader
    size = next(b for b in (batch, 50, 32, 25, 20, 16, 10, 8, 5, 4, 2, 1) if b <= batch and len(x) % b == 0)
    items = [{input_name: b} for b in _batches(x, size)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self._it = iter(items)

        def get_next(self):
            return next(self._it, None)

        def rewind(self):
            self._it = iter(items)
    return Reader()


def ort_quantize_static(path: Path, input_name: str, calib: np.ndarray, method: str, out: Path, batch: int) -> Path:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    with contextlib.redirect_stdout(io.StringIO()), _quiet_logs():
        quantize_static(str(path), str(out), _reader(input_name, calib, batch), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=getattr(CalibrationMethod, method))
    return out


def nncf_quantize(path: Path, input_name: str, calib: np.ndarray) -> tuple[bytes, list[str]]:
    """NNCF's quantized model and the warnings NNCF logged while making it (kept, not printed)."""
    os.environ.setdefault("NNCF_TELEMETRY_ENABLED", "0")
    import nncf
    import onnx
    model = onnx.load(str(path))
    dataset = nncf.Dataset([calib[i:i + 1] for i in range(len(calib))], lambda x: {input_name: x})
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), _quiet_logs(), \
            _collected("nncf") as notes:
        quantized = nncf.quantize(model, dataset, subset_size=len(calib))
    return quantized.SerializeToString(), notes


class _Collector(logging.Handler):
    def __init__(self, into: list[str]):
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() not in self.into:
            self.into.append(record.getMessage())


@contextlib.contextmanager
def _collected(name: str):
    """Warnings of logger ``name`` go into the yielded list instead of its own handlers."""
    logger, notes = logging.getLogger(name), []
    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [_Collector(notes)], False
    try:
        yield notes
    finally:
        logger.handlers, logger.propagate = handlers, propagate


@contextlib.contextmanager
def _quiet_logs():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
