"""``quantir verify --isolated`` (issue 16): each op of a .tflite run on LiteRT's own input tensors.
A dynamic-range model keeps float ops (LayerNorm, softmax) whose LiteRT kernels sum in their own
order, so its tensors differ from quantir's end to end by float rounding that the hybrid ops'
run-time quantization can turn into a step; in isolation every hybrid op must still be bit-exact."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir.verify as verify

from .test_run_show import quantir

pytest.importorskip("ai_edge_litert.interpreter")
pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """MatMul+Add -> Softmax -> LayerNorm -> MatMul: two hybrid FULLY_CONNECTED with float ops between."""
    d = tmp_path_factory.mktemp("verify_isolated")
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("w1", rng.standard_normal((64, 96)).astype(np.float32) * 0.2),
        ("b1", rng.standard_normal(96).astype(np.float32)),
        ("g", (1 + 0.1 * rng.standard_normal(96)).astype(np.float32)),
        ("be", rng.standard_normal(96).astype(np.float32)),
        ("w2", rng.standard_normal((96, 40)).astype(np.float32) * 0.2)]]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Softmax", ["hb"], ["p"], axis=-1),
             helper.make_node("LayerNormalization", ["p", "g", "be"], ["n"], axis=-1),
             helper.make_node("MatMul", ["n", "w2"], ["y"], name="fc2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 40])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, d / "m.onnx")
    assert quantir("quantize", d / "m.onnx", "--dynamic", "-o", d / "m.tflite", "-q").returncode == 0
    np.savez(d / "x.npz", x=(rng.standard_normal((200, 64)) * 3).astype(np.float32))
    return d


def test_every_hybrid_op_is_bit_exact_on_litert_inputs(work):
    report = verify.verify_tflite(work / "m.tflite", work / "x.npz", batch=50, isolated=True)
    hybrid = [d for d in report.ops if d.op.startswith("hybrid.")]
    assert len(hybrid) == 2 and all(d.output.equal for d in hybrid), hybrid
    assert report.ops_ok
    assert all(not d.in_float or d.relative <= verify.FLOAT_TOLERANCE for d in report.ops)
    r = quantir("verify", work / "m.tflite", "--inputs", work / "x.npz", "--isolated")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hybrid.fully_connected: 2 ops, 0 differ" in r.stdout


def test_a_wrong_hybrid_kernel_is_caught_in_isolation(work, monkeypatch):
    from quantir.runtime import interpreter
    real = interpreter.kernel_for

    def off_by_one_ulp(opdef):
        kernel = real(opdef)
        if opdef.name != "hybrid.fully_connected":
            return kernel
        return lambda op, *args: np.nextafter(kernel(op, *args), np.float32(np.inf))
    monkeypatch.setattr(interpreter, "kernel_for", off_by_one_ulp)
    report = verify.verify_tflite(work / "m.tflite", work / "x.npz", batch=50, isolated=True)
    bad = [d for d in report.ops if not d.ok]
    assert not report.ops_ok and len(bad) == 2 and all(d.op == "hybrid.fully_connected" for d in bad), bad
