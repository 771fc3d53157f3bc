"""Real models: import, run in the reference interpreter, compare with ONNX Runtime.

The nine ``light_*`` models of the onnx wheel (opset 9, upgraded on import; their weights
are ConstantOfShape nodes that fold into constants), the Fashion-MNIST CNN
(``models/fashion_mnist_cnn.onnx``) and EfficientNet-Lite0
(``.cache/models/efficientnet_lite0.onnx``, made by ``scripts/export_efficientnet_lite0.py``).

The error measure is ``max |ours - ort| / max |ort|`` on seeded random inputs, for the
model outputs, the first Relu's output and, where the model ends in Softmax, the logits
that feed it (the light models' constant weights make every softmax output equal, which
alone would prove little).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from quantir.frontends.onnx import SUPPORTED_OPS, load_onnx  # noqa: E402
from quantir.runtime import Interpreter  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT = sorted(p.stem.removeprefix("light_") for p in LIGHT_DIR.glob("light_*.onnx"))
TOLERANCE = 1e-4


def rel_err(ours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(ours.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))


def _probes(model: onnx.ModelProto) -> list[str]:
    """Intermediates worth comparing: the first Relu's output and the logits fed to a final Softmax."""
    outputs = {o.name for o in model.graph.output}
    first_relu = [n.output[0] for n in model.graph.node if n.op_type in ("Relu", "Clip")][:1]
    logits = [n.input[0] for n in model.graph.node if n.op_type == "Softmax" and n.output[0] in outputs]
    return first_relu + logits


def _ort_run(model: onnx.ModelProto, feeds: dict, extra: list[str]) -> dict[str, np.ndarray]:
    """ONNX Runtime on the original model, with ``extra`` intermediates exposed as outputs."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for name in extra:
        m.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def check_against_ort(path: Path, batch: int = 1) -> dict[str, float]:
    model = onnx.load(str(path))
    module = load_onnx(path)
    interp = Interpreter(module)
    rng = np.random.default_rng(0)
    feeds = {}
    for name, arg in interp.inputs:
        shape = tuple(batch if d is None else d for d in arg.type.shape)
        feeds[name] = rng.standard_normal(shape).astype(np.float32)
    probes = _probes(model)
    ours = interp.run(feeds, intermediates=probes)
    ref = _ort_run(model, feeds, probes)
    errors = {}
    for name in [*interp.output_names, *probes]:
        assert ours[name].shape == ref[name].shape, name
        errors[name] = rel_err(ours[name], ref[name])
    # a softmax is only as close as its logits allow: light_squeezenet's are ~4e9, where logits equal
    # to 2e-7 relative (their summation order) are hundreds apart, and its probabilities anything.
    # There the logits are compared (above) and the softmax on our own logits (float64)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    for node in (n for n in model.graph.node if n.op_type == "Softmax"):
        out, logits = node.output[0], node.input[0]
        if out in errors and logits in ours and \
                np.abs(ours[logits].astype(np.float64) - ref[logits]).max() > 1e-2:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1 if opset < 13 else -1)
            errors[out] = rel_err(ours[out], _softmax64(ours[logits], axis, flatten=opset < 13))
    return errors


def _softmax64(x: np.ndarray, axis: int, flatten: bool) -> np.ndarray:
    """ONNX Softmax in float64: before opset 13 over every axis from ``axis`` on (flattened)."""
    x = x.astype(np.float64)
    shape = x.shape
    if flatten:
        axis = axis % x.ndim
        x = x.reshape(int(np.prod(shape[:axis])), -1)
        axis = 1
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).reshape(shape)


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_ops_are_supported(name):
    model = onnx.load(str(LIGHT_DIR / f"light_{name}.onnx"), load_external_data=False)
    histogram = Counter(n.op_type for n in model.graph.node)
    assert set(histogram) <= SUPPORTED_OPS, set(histogram) - SUPPORTED_OPS


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_matches_onnxruntime(name):
    errors = check_against_ort(LIGHT_DIR / f"light_{name}.onnx")
    assert len(errors) >= 2, "expected the output and at least the first Relu's output"
    assert max(errors.values()) < TOLERANCE, errors


def test_fashion_mnist_cnn_matches_onnxruntime():
    path = REPO / "models" / "fashion_mnist_cnn.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is absent: run scripts/train_fashion_mnist.py to make it")
    errors = check_against_ort(path, batch=4)
    assert max(errors.values()) < TOLERANCE, errors


def test_efficientnet_lite0_matches_onnxruntime():
    path = REPO / ".cache" / "models" / "efficientnet_lite0.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is absent: run scripts/export_efficientnet_lite0.py to make it")
    errors = check_against_ort(path, batch=2)
    assert max(errors.values()) < TOLERANCE, errors


def _onnx_inferred_types(path: Path) -> dict[str, tuple]:
    from quantir.frontends.onnx.loader import read_model
    model = onnx.shape_inference.infer_shapes(read_model(path).model)
    types = {}
    for vi in model.graph.value_info:
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            types[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    return types


@pytest.mark.parametrize("name", LIGHT + ["efficientnet_lite0"])
def test_shapes_agree_with_onnx_shape_inference(name):
    """quantir's own type rules give every named intermediate the shape ONNX infers."""
    path = LIGHT_DIR / f"light_{name}.onnx" if name in LIGHT else REPO / ".cache" / "models" / f"{name}.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    expected = _onnx_inferred_types(path)
    module = load_onnx(path, optimize=False)
    compared = 0
    for op in module.main.ops:
        for r in op.results:
            if r.name_hint in expected and r.type.shape is not None:
                want = expected[r.name_hint]
                assert len(want) == len(r.type.shape), (r.name_hint, want, r.type)
                assert all(a is None or b is None or a == b for a, b in zip(want, r.type.shape)), \
                    (r.name_hint, want, r.type)
                compared += 1
    assert compared >= 0.5 * len(expected), (compared, len(expected))


@pytest.mark.parametrize("name", ["torch_legacy_small", "torch_dynamo_small"])
def test_torch_exported_models(name):
    """What torch's two exporters write (see data/make_torch_models.py): pad subgraphs, a
    dynamic-batch flatten, BatchNorm, external weights (dynamo) — folded and run."""
    path = Path(__file__).parent / "data" / f"{name}.onnx"
    module = load_onnx(path)
    histogram = Counter(op.name for op in module.main.ops)
    assert histogram["nn.pad"] == 0 and histogram["nn.batch_normalization"] == 0 and histogram["nn.shape"] == 0
    assert histogram["nn.conv"] == 2
    errors = check_against_ort(path, batch=3)
    assert max(errors.values()) < TOLERANCE, errors
