"""Real models quantized by quantir, written as .tflite, run by LiteRT's reference kernels:
every output and every intermediate tensor equals quantir's interpreter, on real inputs."""
from pathlib import Path

import numpy as np
import pytest

import quantir as qr
from quantir.backends.tflite import read_model
from quantir.backends.tflite.export import export_tflite
from quantir.runtime import run

pytest.importorskip("ai_edge_litert.interpreter")
from quantir.backends.tflite.litert import run_model, run_model_tensors  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
EFFNET = ROOT / ".cache" / "models" / "efficientnet_lite0.onnx"
pytestmark = pytest.mark.oracle


def compare_every_tensor(module, exported, feeds: dict, batch: int) -> tuple[int, int]:
    """(tensors compared, elements compared); asserts every element equal."""
    names = list(exported.bindings)
    data = exported.to_bytes()
    (name, x), = feeds.items()
    tensors = elements = 0
    for start in range(0, len(x), batch):
        chunk = x[start:start + batch]
        _, theirs = run_model_tensors(data, [chunk], [exported.bindings[n][0] for n in names])
        ours = run(module, {name: chunk}, intermediates=names)
        for n in names:
            idx, perm = exported.bindings[n]
            mine = np.transpose(ours[n], perm) if perm else ours[n]
            bad = np.count_nonzero(mine != theirs[idx])
            assert bad == 0, f"{n}: {bad} of {mine.size} elements differ from LiteRT on samples {start}.."
            elements += mine.size
        tensors = len(names)
    return tensors, elements


@pytest.fixture(scope="module")
def fashion():
    fm = pytest.importorskip("quantir.datasets.fashion_mnist")
    if not fm.is_available():
        pytest.skip("Fashion-MNIST is not installed (make data)")
    xtr, _ = fm.load_fashion_mnist("train")
    xte, yte = fm.load_fashion_mnist("test")
    result = qr.quantize(ROOT / "models" / "fashion_mnist_cnn.onnx", {"input": fm.to_model_input(xtr[:500])},
                         qr.Config(progress=False))
    return result, fm.to_model_input(xte[:200]), yte[:200]


def test_fashion_cnn_every_tensor_bit_exact_on_200_test_images(fashion):
    result, x, _ = fashion
    exported = export_tflite(result.module)
    tensors, elements = compare_every_tensor(result.module, exported, {"input": x}, batch=100)
    assert tensors >= 25 and elements > 10**6


def test_fashion_tflite_layout_and_ops(fashion):
    result, x, y = fashion
    model = export_tflite(result.module).model
    sub = model.subgraphs[0]
    ops = [model.operator_name(o) for o in sub.operators]
    assert ops[0] == "QUANTIZE" and ops[-1] == "DEQUANTIZE"
    assert ops.count("QUANTIZE") == 1 and ops.count("DEQUANTIZE") == 1
    assert ops.count("TRANSPOSE") == 0   # one input channel: NCHW -> NHWC is a reshape
    inp = sub.tensors[sub.inputs[0]]
    assert inp.name == "input" and inp.shape == (1, 1, 28, 28) and inp.shape_signature == (-1, 1, 28, 28)
    probs = run_model(export_tflite(result.module).to_bytes(), [x])[0]
    assert probs.shape == (len(x), 10)
    assert (probs.argmax(1) == y).mean() > 0.85


def test_int8_io(fashion):
    result, x, _ = fashion
    exported = export_tflite(result.module, io="int8")
    sub = exported.model.subgraphs[0]
    t_in, t_out = sub.tensors[sub.inputs[0]], sub.tensors[sub.outputs[0]]
    assert t_in.dtype == np.int8 and t_out.dtype == np.int8
    ops = [exported.model.operator_name(o) for o in sub.operators]
    assert "QUANTIZE" not in ops and "DEQUANTIZE" not in ops
    q = t_in.quantization
    xq = np.clip(np.round(x[:20] / np.float32(q.scale[0])) + q.zero_point[0], -128, 127).astype(np.int8)
    float_model = export_tflite(result.module).to_bytes()
    # LiteRT's own QUANTIZE of the float input, then the int8 model: the same int8 probabilities
    _, t = run_model_tensors(float_model, [x[:20]], [1])
    got = run_model(exported.to_bytes(), [t[1]])[0]
    want = run(result.module, {"input": x[:20]}, intermediates=["probs__q"])["probs__q"]
    assert np.array_equal(got, want)
    assert xq.shape == t[1].shape


def test_save_is_atomic_and_readable(fashion, tmp_path):
    result, _, _ = fashion
    out = result.save(tmp_path / "cnn.tflite")
    assert read_model(out.read_bytes()).subgraphs[0].operators
    assert [p.name for p in tmp_path.iterdir()] == ["cnn.tflite"]


def test_float_op_left_in_the_module_is_written_as_a_float32_builtin(fashion):
    """An op the quantizer left float (mixed precision) is LiteRT's float32 SOFTMAX after a DEQUANTIZE;
    it runs in LiteRT as in quantir's interpreter, up to float rounding (exp and the sum in LiteRT's order)."""
    result, x, _ = fashion
    from quantir.api import quantize
    from quantir.backends.tflite.schema import BuiltinOperator, TensorType
    excluded = quantize(ROOT / "models" / "fashion_mnist_cnn.onnx",
                        {"input": fashion[1][:50]}, qr.Config(progress=False, exclude=("nn.softmax",)))
    model = export_tflite(excluded.module).model
    sg = model.subgraphs[0]
    softmax = [op for op in sg.operators
               if model.operator_codes[op.opcode_index].builtin_code == BuiltinOperator.SOFTMAX]
    assert len(softmax) == 1 and sg.tensors[softmax[0].outputs[0]].type is TensorType.FLOAT32
    (theirs,) = run_model(model, [x[:50]])
    (ours,) = run(excluded.module, {"input": x[:50]}).values()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def effnet():
    if not EFFNET.exists():
        pytest.skip(f"{EFFNET} is missing: run `make models`")
    photos = pytest.importorskip("quantir.datasets.photos")
    pytest.importorskip("skimage")
    model = qr.load(EFFNET)
    name = model.main.arguments[0].name_hint
    # 16 crops: bit-exactness does not depend on how good the ranges are (test_efficientnet checks that);
    # all int8 (budget off): the default's search and hessian rounding took 47 of the fixture's ~55 s, and
    # a promoted real model's .tflite is checked against BUILTIN_REF in tests/real (PP-OCRv6 tiny rec)
    result = qr.quantize(model, {name: photos.calibration_crops(16, seed=0)}, qr.Config(progress=False, budget=None))
    return result, name, photos


def test_efficientnet_every_tensor_bit_exact_on_real_photos(effnet):
    result, name, photos = effnet
    x = photos.preprocess_efficientnet_lite([p.image for p in photos.load_photos()])
    tensors, _ = compare_every_tensor(result.module, export_tflite(result.module), {name: x}, batch=4)
    assert tensors > 60


@pytest.mark.slow
def test_efficientnet_every_tensor_bit_exact_on_100_real_crops(effnet):
    result, name, photos = effnet
    x = photos.calibration_crops(100, seed=1)   # seeded crops of the real photos, not the calibration ones
    compare_every_tensor(result.module, export_tflite(result.module), {name: x}, batch=10)


def test_spec_check_passes_on_the_written_models(fashion, effnet):
    from quantir.frontends.tflite import import_tflite
    from quantir.quantize.check import check_module
    for result in (fashion[0], effnet[0]):
        report = check_module(import_tflite(export_tflite(result.module).to_bytes()).module)
        assert report.ok and report.checked > 20, [str(v) for v in report.violations]
