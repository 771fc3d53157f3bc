"""The summary lists integer shape computation (Shape -> Gather -> Unsqueeze -> Mul -> Concat on i64
feeding a run-time Reshape) apart from the float islands: those ops are kept as they are, exact,
and "left float" names only ops that compute float values in float (issue 14 item 2)."""
from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.cli.main import main  # noqa: E402
from quantir.quantize.patterns import is_integer_computation  # noqa: E402
from quantir.runtime import run  # noqa: E402

SHAPE_KINDS = {"nn.gather": 2, "nn.unsqueeze": 2, "nn.mul": 2, "nn.concat": 1}


@pytest.fixture
def model(make_onnx_model, rng):
    """x.view(n * c, h * w) after a conv, batch and width dynamic; then a three-way Sum (no LiteRT
    op: a real float island) and a Cast of the data to i64 (reads float values: float too)."""
    def dim(i):
        return [helper.make_node("Shape", ["c"], [f"s{i}"], name=f"shape{i}"),
                helper.make_node("Gather", [f"s{i}", f"i{i}"], [f"g{i}"], axis=0, name=f"gather{i}"),
                helper.make_node("Unsqueeze", [f"g{i}", "axes0"], [f"d{i}"], name=f"unsqueeze{i}")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), *dim(0), *dim(1), *dim(2), *dim(3),
             helper.make_node("Mul", ["d0", "d1"], ["nc"], name="mul_nc"),
             helper.make_node("Mul", ["d2", "d3"], ["hw"], name="mul_hw"),
             helper.make_node("Concat", ["nc", "hw"], ["t"], axis=0, name="target"),
             helper.make_node("Reshape", ["c", "t"], ["y"], name="reshape"),
             helper.make_node("Relu", ["y"], ["z"], name="relu"),
             helper.make_node("Sum", ["z", "z", "z"], ["s"], name="sum3"),
             helper.make_node("Cast", ["z"], ["k"], to=onnx.TensorProto.INT64, name="cast_data")]
    inits = {**{f"i{i}": np.int64(i) for i in range(4)}, "axes0": np.array([0], np.int64),
             "w": rng.standard_normal((3, 2, 1, 1)).astype(np.float32)}
    return make_onnx_model(nodes, [("x", np.float32, ("N", 2, 4, "W"))],
                           [("s", np.float32, None), ("k", np.int64, None)], inits)


@pytest.fixture
def samples(rng):
    return {"x": rng.standard_normal((16, 2, 4, 5)).astype(np.float32)}


def test_shape_ops_are_listed_apart_from_the_float_islands(model, samples):
    result = qr.quantize(model, samples, qr.Config(progress=False, method="minmax"))
    s = result.summary_dict()
    kinds: dict[str, int] = {}
    for f in s["integer_ops"]:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    assert kinds == SHAPE_KINDS
    # the static dims (c = 3, h = 4) fold at import; the dynamic batch and width are computed at run time
    assert sorted(f["op"] for f in s["integer_ops"]) == [
        "gather0", "gather3", "mul_hw", "mul_nc", "target", "unsqueeze0", "unsqueeze3"]
    assert [(f["op"], f["kind"]) for f in s["left_float"]] == [("sum3", "nn.sum"), ("cast_data", "nn.cast")]
    # every op the annotation keeps out of the integer path is in exactly one of the two lists
    assert len(s["integer_ops"]) + len(s["left_float"]) == len(result.annotation.float_ops)
    text = result.summary()
    assert ("integer shape ops kept as they are: 7 (nn.gather 2, nn.unsqueeze 2, nn.mul 2, nn.concat 1; exact "
            "integer arithmetic on shapes or integer inputs, never quantized)\nleft float: 2\n") in text
    assert "gather0" not in text and "sum3 (nn.sum)" in text


def test_the_shape_ops_stay_i64_in_the_integer_module_and_follow_the_size(model, samples, rng):
    result = qr.quantize(model, samples, qr.Config(progress=False, method="minmax"))
    fn = result.module.main
    kept = [op for op in fn.ops if op.name in SHAPE_KINDS]   # the integer module has no nn.* float arithmetic
    assert sorted(op.name for op in kept) == sorted(k for k, n in SHAPE_KINDS.items() for _ in range(n))
    assert all(str(r.type.element_type) == "i64" for op in kept for r in op.results)
    # the quantized module still reshapes to (n * 3, 4 * w) at a size calibration never saw
    x = rng.standard_normal((3, 2, 4, 7)).astype(np.float32)
    out = run(result.module, {"x": x})
    assert out["s"].shape == (9, 28) and out["k"].shape == (9, 28)


def test_an_op_reading_float_values_is_not_integer_computation(model, samples):
    result = qr.quantize(model, samples, qr.Config(progress=False, method="minmax"))
    by_label = {op.label: op for op, _ in result.annotation.float_ops}
    assert not is_integer_computation(by_label["cast_data"])   # i64 result, float operand
    assert is_integer_computation(by_label["target"])
    shape = next(op for op in result.float_function.ops if op.name == "nn.shape")
    assert is_integer_computation(shape)                         # reads the shape of a float tensor only


def test_cli_prints_and_writes_the_integer_ops(model, samples, tmp_path, capsys):
    onnx.save(model, tmp_path / "m.onnx")
    np.savez(tmp_path / "calib.npz", **samples)
    summary = tmp_path / "s.json"
    assert main(["quantize", str(tmp_path / "m.onnx"), "--data", str(tmp_path / "calib.npz"), "--method", "minmax",
                 "-o", str(tmp_path / "q.onnx"), "--summary", str(summary)]) == 0
    out = capsys.readouterr().out
    assert "integer shape ops kept as they are: 7 (" in out and "left float: 2\n" in out
    s = json.loads(summary.read_text())
    assert len(s["integer_ops"]) == 7 and [f["op"] for f in s["left_float"]] == ["sum3", "cast_data"]
    # one quantize for the input; one dequantize of the Relu, read by both float islands (Sum, Cast)
    assert (s["quantize_ops"], s["dequantize_ops"]) == (1, 1)


def test_the_qoperator_export_has_the_summarys_quantize_and_dequantize_ops(model, samples, rng):
    import onnxruntime as ort
    from quantir.backends.onnx import to_onnx_quantized
    result = qr.quantize(model, samples, qr.Config(progress=False, method="minmax"))
    exported = to_onnx_quantized(result.module, format="qoperator")
    kinds = [n.op_type for n in exported.graph.node]
    assert (kinds.count("QuantizeLinear"), kinds.count("DequantizeLinear")) == result.cast_counts() == (1, 1)
    shapes = [n for n in exported.graph.node if n.op_type == "Shape" and n.name in ("shape0", "shape3")]   # the model's
    int8 = {n.output[0] for n in exported.graph.node if n.op_type == "QLinearConv"}
    assert len(shapes) == 2 and all(n.input[0] in int8 for n in shapes)   # the dims of the int8 tensor
    sess = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    scale = result.params[next(r for r in result.annotation.regions if r.output.name_hint == "z").output].scale
    for size in ((1, 2, 4, 5), (3, 2, 4, 2)):
        x = rng.standard_normal(size).astype(np.float32)
        want = run(result.module, {"x": x})
        got = dict(zip(["s", "k"], sess.run(["s", "k"], {"x": x})))
        assert got["s"].shape == want["s"].shape == (size[0] * 3, 4 * size[3])
        assert np.max(np.abs(got["s"] - want["s"])) <= 3 * scale * 1.01   # Sum of three z, each within a step
