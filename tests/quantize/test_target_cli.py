"""``quantir quantize --target``: parsed, and by default chosen from the output's extension."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from quantir.cli import quantize as cli_quantize
from quantir.cli.main import main

from .tiny_models import cnn

pytest.importorskip("onnxruntime")


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cli_quantize.add_arguments(p)
    return p.parse_args(["m.onnx", "--data", "d.npz", *argv])


@pytest.mark.parametrize("output, given, expected", [
    ("q.onnx", None, "onnxruntime"), ("q.tflite", None, "litert"), ("q.mlir", None, "litert"),
    ("q.onnx", "litert", "litert"), ("q.tflite", "onnxruntime", "onnxruntime"),
])
def test_target_from_flag_or_extension(output, given, expected):
    args = _parse("-o", output, *(["--target", given] if given else []))
    assert args.target == given
    assert cli_quantize.target_for(args.output, args.target) == expected


def test_unknown_target_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        _parse("-o", "q.onnx", "--target", "tensorrt")
    assert e.value.code == 2
    assert "invalid choice: 'tensorrt'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def model_and_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("target_cli")
    cnn(d / "cnn.onnx")
    np.savez(d / "calib.npz", x=np.random.default_rng(0).normal(size=(48, 1, 8, 8)).astype(np.float32))
    return d


@pytest.mark.parametrize("output, flag, expected", [
    ("q.onnx", [], "onnxruntime"), ("q.mlir", [], "litert"), ("q.onnx", ["--target", "litert"], "litert"),
])
def test_summary_reports_the_target_used(model_and_data, tmp_path, output, flag, expected):
    d = model_and_data
    summary = tmp_path / "s.json"
    assert main(["quantize", str(d / "cnn.onnx"), "--data", str(d / "calib.npz"), "-o", str(tmp_path / output),
                 "-q", "--summary", str(summary), *flag]) == 0
    s = json.loads(summary.read_text())
    assert s["target"] == expected
    assert isinstance(s["onnxruntime_float_ops"], list)
    if expected == "litert":
        assert s["onnxruntime_float_ops"] == []
