"""``quantir run`` and ``quantir show`` end to end, through ``python -m quantir``."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
QDQ_MLIR = """\
func.func @main(%arg0: tensor<2x3xf32> {quantir.name = "x"}) -> (tensor<2x3xf32> {quantir.name = "y"}) {
  %0 = quant.qcast %arg0 : tensor<2x3xf32> to tensor<2x3x!quant.uniform<i8:f32:1, {5.000000e-01:-3,2.500000e-01:2,1.250000e-01}>>
  %1 = quant.dcast %0 : tensor<2x3x!quant.uniform<i8:f32:1, {5.000000e-01:-3,2.500000e-01:2,1.250000e-01}>> to tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
"""  # noqa: E501  (printed IR, one op per line)


def quantir(*args, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "quantir", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def assert_one_line_error(result, *fragments):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, make_onnx_model):
    """A small CNN with two outputs whose names need care ('/' and 'file'), out of alphabetical order."""
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["image", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["conv"], ["file"]),
             helper.make_node("GlobalAveragePool", ["file"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["head/logits"])]
    model = make_onnx_model(nodes, [("image", np.float32, ("N", 3, 8, 8))],
                            [("head/logits", np.float32, ("N", 4)), ("file", np.float32, ("N", 4, 8, 8))],
                            {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
                             "b": rng.standard_normal(4).astype(np.float32)})
    onnx.save(model, d / "cnn.onnx")
    image = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.savez(d / "in.npz", image=image)
    np.savez(d / "wrong_shape.npz", image=image[:, :2])
    np.savez(d / "wrong_key.npz", picture=image)
    np.save(d / "array.npy", image)
    (d / "notes.txt").write_text("not a model")
    data = (d / "cnn.onnx").read_bytes()
    (d / "truncated.onnx").write_bytes(data[: len(data) // 2])
    (d / "qdq.mlir").write_text(QDQ_MLIR)
    np.savez(d / "qdq_in.npz", x=np.array([[0.25, 0.75, 1.25], [-0.25, -0.125, 100.0]], np.float32))
    sess = ort.InferenceSession(str(d / "cnn.onnx"), providers=["CPUExecutionProvider"])
    expected = dict(zip(["head/logits", "file"], sess.run(None, {"image": image})))
    return d, expected


@pytest.mark.parametrize("engine", ["interpreter", "ort"])
def test_run_writes_outputs_in_model_order(model_dir, engine):
    d, expected = model_dir
    out = d / f"out_{engine}.npz"
    result = quantir("run", d / "cnn.onnx", "--inputs", d / "in.npz", "--outputs", out, "--engine", engine)
    assert result.returncode == 0, result.stderr
    assert "'head/logits' (2, 4) float32" in result.stdout
    with zipfile.ZipFile(out) as zf:
        assert zf.namelist() == ["head/logits.npy", "file.npy"]
    with np.load(out) as got:
        assert got.files == ["head/logits", "file"]
        for k, v in expected.items():
            np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6)
    assert not [f for f in os.listdir(d) if f.endswith(".tmp")]   # no temporary files left


def test_run_mlir_qdq_with_ort(model_dir):
    d, _ = model_dir
    result = quantir("run", d / "qdq.mlir", "--inputs", d / "qdq_in.npz", "--outputs", d / "qdq_out.npz",
                     "--engine", "ort")
    assert result.returncode == 0, result.stderr
    with np.load(d / "qdq_out.npz") as got:
        np.testing.assert_array_equal(got["y"], [[0.0, 0.75, 1.25], [0.0, 0.0, 15.875]])


def test_show_elides_large_constants(model_dir):
    d, _ = model_dir
    result = quantir("show", d / "cnn.onnx")
    assert result.returncode == 0, result.stderr
    assert 'func.func @main(%arg0: tensor<?x3x8x8xf32> {quantir.name = "image"})' in result.stdout
    assert "dense_resource<__elided__> : tensor<4x3x3x3xf32>" in result.stdout
    assert '"nn.conv"' in result.stdout and "dialect_resources" not in result.stdout
    small = quantir("show", d / "cnn.onnx", "--elide", "200")
    assert "__elided__" not in small.stdout and "dense<" in small.stdout
    full = quantir("show", d / "qdq.mlir", "--elide", "-1")
    assert full.returncode == 0 and "quant.qcast %arg0" in full.stdout


BAD_RUNS = {
    "missing input key": ("cnn.onnx", "wrong_key.npz", ("quantir run:", "unknown input 'picture'",
                                                         "missing input 'image'")),
    "wrong shape": ("cnn.onnx", "wrong_shape.npz", ("input 'image' expects dim 1 to be 3",)),
    "truncated model": ("truncated.onnx", "in.npz", ("truncated.onnx", "truncated or corrupt")),
    "missing model": ("absent.onnx", "in.npz", ("absent.onnx: no such file",)),
    "unknown format": ("notes.txt", "in.npz", ("unknown model format '.txt'",)),
    "not an npz": ("cnn.onnx", "array.npy", ("expected an .npz archive",)),
    "missing npz": ("cnn.onnx", "absent.npz", ("absent.npz: no such file",)),
}


# Feed errors come from the engine, so both engines are tried; the others fail before one runs.
BAD_RUN_PARAMS = [(case, "interpreter") for case in sorted(BAD_RUNS)] + [
    ("missing input key", "ort"), ("wrong shape", "ort")]


@pytest.mark.parametrize("case,engine", BAD_RUN_PARAMS)
def test_bad_runs_fail_with_one_line(model_dir, case, engine):
    d, _ = model_dir
    model, inputs, fragments = BAD_RUNS[case]
    out = d / "never.npz"
    out.write_bytes(b"old")
    result = quantir("run", d / model, "--inputs", d / inputs, "--outputs", out, "--engine", engine)
    assert_one_line_error(result, *fragments)
    assert out.read_bytes() == b"old"      # a failed run does not touch the outputs file


def test_show_truncated_model_fails_with_one_line(model_dir):
    d, _ = model_dir
    assert_one_line_error(quantir("show", d / "truncated.onnx"), "quantir show:", "truncated")
