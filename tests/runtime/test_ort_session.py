"""The options of the executor's ONNX Runtime session: ORT's defaults for ordinary graphs (so their
results are ORT's own, bit for bit), the quadratic NchwcTransformer left out above NCHWC_MAX_NODES
(checked on the optimized graph ORT writes out), and results that still agree with the interpreter."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import quantir.runtime.ort as ort_module  # noqa: E402
from quantir.backends.onnx import export  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.runtime import run  # noqa: E402
from quantir.runtime.ort import NCHWC_MAX_NODES, OrtExecutor, nchwc_disabled  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FASHION_MNIST = REPO / "models" / "fashion_mnist_cnn.onnx"
NCHWC_DOMAIN = "com.microsoft.nchwc"

needs_fashion = pytest.mark.skipif(not FASHION_MNIST.exists(), reason="models/fashion_mnist_cnn.onnx not built")


def images(n: int = 8) -> np.ndarray:
    return np.random.default_rng(0).random((n, 1, 28, 28), dtype=np.float32)


def test_nchwc_is_disabled_only_above_the_limit():
    assert nchwc_disabled(1) == []
    assert nchwc_disabled(NCHWC_MAX_NODES) == []
    assert nchwc_disabled(NCHWC_MAX_NODES + 1) == ["NchwcTransformer"]
    assert nchwc_disabled(11, max_nodes=10) == ["NchwcTransformer"]
    assert nchwc_disabled(10, max_nodes=10) == []


def optimized_domains(monkeypatch, tmp_path, make) -> tuple[set[str], object]:
    """The op domains of the graph ONNX Runtime optimized for the executor ``make()`` builds."""
    real = ort.InferenceSession
    path = tmp_path / "optimized.onnx"

    def writing(model, options, **kwargs):
        options.optimized_model_filepath = str(path)
        return real(model, options, **kwargs)
    monkeypatch.setattr(ort, "InferenceSession", writing)
    ex = make()
    monkeypatch.setattr(ort, "InferenceSession", real)
    return {node.domain for node in onnx.load(str(path)).graph.node}, ex


@needs_fashion
def test_a_small_graph_keeps_nchwc_and_matches_a_default_session_bit_for_bit(monkeypatch, tmp_path):
    module = load_onnx(FASHION_MNIST)
    domains, ex = optimized_domains(monkeypatch, tmp_path, lambda: OrtExecutor(module, expose="all"))
    assert ex.disabled_optimizers == []
    assert NCHWC_DOMAIN in domains   # ORT's layout optimization still runs on this CNN
    # The same exported graph in a session with ONNX Runtime's default options: identical values.
    exposed = [v for op in module.main.ops for v in op.results if v.name_hint in ex.exposed]
    exported = export(module, extra_outputs=exposed)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    plain = ort.InferenceSession(exported.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = images()
    got = ex.run({"input": x})
    names = [o.name for o in exported.model.graph.output]
    want = dict(zip(names, plain.run(names, {"input": x})))
    assert len(ex.exposed) > 20
    for v in exposed:
        np.testing.assert_array_equal(got[v.name_hint], want[exported.names[v]], err_msg=v.name_hint)


@needs_fashion
def test_above_the_limit_nchwc_is_left_out_and_results_still_match_the_interpreter(monkeypatch, tmp_path):
    module = load_onnx(FASHION_MNIST)
    monkeypatch.setattr(ort_module, "NCHWC_MAX_NODES", 10)   # the CNN exports to ~30 nodes
    domains, ex = optimized_domains(monkeypatch, tmp_path, lambda: OrtExecutor(module, expose="all"))
    assert ex.disabled_optimizers == ["NchwcTransformer"]
    assert NCHWC_DOMAIN not in domains and "" in domains
    x = images()
    got = ex.run({"input": x})
    want = run(module, {"input": x}, intermediates="all")
    assert len(ex.exposed) > 20
    for name in ex.exposed:
        scale = max(float(np.max(np.abs(want[name]))), 1.0)
        assert float(np.max(np.abs(got[name] - want[name]))) <= 1e-4 * scale, name
