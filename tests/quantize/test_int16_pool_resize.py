"""16x8 MAX_POOL_2D, AVERAGE_POOL_2D, RESIZE_NEAREST_NEIGHBOR and TRANSPOSE_CONV end to end.

A small decoder-like graph (max pools with SAME-shaped and explicit pads, an average pool, a
ConvTranspose with bias and ReLU, a nearest 2x upsampling, residual Adds) quantized with
``Config(activations="int16", budget=None)``: none of these ops is kept int8, the .tflite is
bit-exact with LiteRT's BUILTIN_REF, ``quantir check`` passes, and ONNX Runtime runs the QDQ
export. The int8 module of the same graph is unchanged by the 16x8 paths (its ops stay int8).
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.cli.main import main as cli
from quantir.ir.dialects import arith, quant
from quantir.quantize import check
from quantir.runtime import run
from quantir.types import UniformQuantizedType

N = helper.make_node
RNG = np.random.default_rng(16)
C = 4
KINDS = {"qnn.max_pool", "qnn.average_pool", "qnn.resize_nearest", "qnn.transpose_conv"}


def _on_grid() -> np.ndarray:
    """ConvTranspose weights ``[C_in, C_out, 2, 2]`` whose per-output-channel int8 quantization is exact
    (integers times one step, each output channel reaching 127): the int16 gain is the activations'."""
    q = RNG.integers(-100, 101, size=(C, C, 2, 2))
    q[0, :, 0, 0] = 127
    return (q * np.float32(0.3 / 127)).astype(np.float32)


def _model():
    inits = {"w": _on_grid(),
             "b": (RNG.normal(size=C) * 0.1).astype(np.float32),
             "scales": np.array([1, 1, 2, 2], np.float32)}
    nodes = [N("MaxPool", ["x"], ["p1"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),   # SAME
             N("MaxPool", ["p1"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),   # PADV2
             N("AveragePool", ["p2"], ["a"], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1]),
             N("ConvTranspose", ["a", "w", "b"], ["t0"], strides=[2, 2]),
             N("Relu", ["t0"], ["t"]),
             N("Resize", ["p2", "", "scales"], ["u"], mode="nearest", coordinate_transformation_mode="asymmetric",
               nearest_mode="floor"),
             N("Add", ["t", "u"], ["s"]), N("Add", ["s", "x"], ["y"])]
    graph = helper.make_graph(nodes, "decoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", C, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", C, 8, 8])],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])
    m.ir_version = 9
    return m


MODEL = _model()
CALIBRATION = [{"x": RNG.uniform(-1, 1, size=(1, C, 8, 8)).astype(np.float32)} for _ in range(32)]
HELD_OUT = {"x": RNG.uniform(-1, 1, size=(16, C, 8, 8)).astype(np.float32)}


def _widths(module) -> dict[str, set[int]]:
    widths: dict[str, set[int]] = {}
    for op in module.main.ops:
        if op.opdef in (arith.CONSTANT, quant.SCAST):
            continue
        for v in op.results:
            t = getattr(v.type, "element_type", None)
            if isinstance(t, UniformQuantizedType):
                widths.setdefault(op.name, set()).add(t.storage_type.width)
    return widths


def _sqnr(want, got) -> float:
    return float(10 * np.log10((want.astype(np.float64) ** 2).sum() / ((want - got).astype(np.float64) ** 2).sum()))


@pytest.fixture(scope="module")
def results():
    return {act: qr.quantize(MODEL, CALIBRATION, qr.Config(progress=False, activations=act, budget=None,
                                                                    method="minmax"))
            for act in ("int8", "int16")}


def test_no_op_is_kept_int8(results):
    r = results["int16"]
    assert r.summary_dict()["int8_ops"] == []
    assert "(no 16x8 kernel): 0" in r.summary()
    widths = _widths(r.module)
    assert KINDS <= set(widths)
    for name, w in widths.items():
        assert w == {16}, (name, w)
    assert all(w == {8} for w in _widths(results["int8"].module).values())


def test_int16_is_closer_to_float(results):
    want = ort.InferenceSession(MODEL.SerializeToString()).run(None, HELD_OUT)[0]
    got = {act: next(iter(run(r.module, HELD_OUT).values())) for act, r in results.items()}
    sqnr = {act: _sqnr(want, g) for act, g in got.items()}
    assert sqnr["int16"] > sqnr["int8"] + 20.0, sqnr


def test_the_tflite_is_bit_exact_with_litert(results, tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.litert import run_model
    from quantir.verify import verify_tflite
    path = tmp_path / "decoder16.tflite"
    results["int16"].save(path)
    report = verify_tflite(path, HELD_OUT)
    assert all(d.differing == 0 for d in report.outputs + report.intermediates), report
    litert = run_model(path.read_bytes(), [HELD_OUT["x"]])[0]
    np.testing.assert_array_equal(litert, next(iter(run(results["int16"].module, HELD_OUT).values())))


def test_quantir_check_passes(results, tmp_path):
    report = check.check_module(results["int16"].module)
    assert report.ok and not report.unknown, [str(v) for v in report.violations]
    path = tmp_path / "decoder16.tflite"
    results["int16"].save(path)
    assert cli(["check", str(path)]) == 0


def test_the_qdq_export_runs_in_onnx_runtime(results, tmp_path):
    import onnx
    path = tmp_path / "decoder16.onnx"
    results["int16"].save(path)
    model = onnx.load(path)
    inits = {i.name: i for i in model.graph.initializer}
    zps = [inits[n.input[2]] for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert zps and all(z.data_type == onnx.TensorProto.INT16 for z in zps)
    got = ort.InferenceSession(str(path)).run(None, HELD_OUT)[0]
    mine = next(iter(run(results["int16"].module, HELD_OUT).values()))
    y = [op for op in results["int16"].module.main.ops if op.name == "qnn.add"][-1].results[0]
    step = y.type.element_type.scale
    # ONNX Runtime runs the float ops between DQ and Q: within one output step (measured 1.0003)
    assert np.abs(got - mine).max() <= 1.01 * step, np.abs(got - mine).max() / step
