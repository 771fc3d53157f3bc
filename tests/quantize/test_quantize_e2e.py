"""End-to-end static int8 quantization of small real ONNX models, with the bad inputs of issue 4."""
import hashlib

import numpy as np
import onnxruntime as ort
import pytest

import quantir as qr
from quantir.errors import CalibrationError, QuantirError
from quantir.ir.dialects import nn, qnn, quant
from quantir.runtime import run
from quantir.text import parse_module, print_module

from .tiny_models import cnn, constant_branch, sum_residuals, unquantizable

CFG = qr.Config(progress=False)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "cnn.onnx"
    rng = cnn(path)
    calib = rng.normal(size=(96, 1, 8, 8)).astype(np.float32)
    test = rng.normal(size=(256, 1, 8, 8)).astype(np.float32)
    return path, calib, test


@pytest.fixture(scope="module")
def result(model):
    path, calib, _ = model
    return qr.quantize(path, {"x": calib}, CFG)


def test_integer_graph_has_one_quantize_in_and_one_dequantize_out(result):
    assert result.cast_counts() == (1, 1)
    ops = result.module.main.ops
    assert ops[0].opdef is quant.QCAST and ops[-2].opdef is quant.DCAST
    float_ops = [op.name for op in ops if op.name.startswith("nn.") and op.opdef not in qnn.DATA_MOVEMENT]
    assert float_ops == []
    assert result.annotation.float_ops == []


def test_fusions_and_fixed_outputs(result):
    convs = [op for op in result.module.main.ops if op.opdef is qnn.CONV]
    assert [c.attr("activation") for c in convs] == ["RELU", "RELU6", "NONE"]
    assert convs[1].attr("group") == 8
    softmax = next(op for op in result.module.main.ops if op.opdef is qnn.SOFTMAX)
    out = softmax.results[0].type.element_type
    assert (out.scale, out.zero_point) == (1 / 256, -128)


def test_spec_check_is_clean_and_layers_are_close_to_float(result):
    assert result.spec_report().ok
    errors = result.layer_errors()
    assert len(errors) == 9
    assert min(e.sqnr_db for e in errors) > 25, [(e.name, e.sqnr_db) for e in errors]
    assert min(e.cosine for e in errors) > 0.995


def test_accuracy_against_float_on_held_out_samples(model, result):
    path, _, test = model
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": test})[0]
    got = run(result.module, {"x": test})["probs"]
    assert np.mean(ref.argmax(1) == got.argmax(1)) >= 0.95
    assert np.abs(ref - got).max() < 0.05


def test_text_round_trip_runs_bit_identically(model, result):
    _, _, test = model
    again = parse_module(print_module(result.module, large_elements="resource"))
    np.testing.assert_array_equal(run(again, {"x": test})["probs"], run(result.module, {"x": test})["probs"])


def test_summary_names_what_happened(result):
    s = result.summary_dict()
    assert s["quantized"]["conv"] == 3 and s["quantize_ops"] == 1 and s["dequantize_ops"] == 1
    assert len(s["worst_layers"]) == 9 and s["spec_check"]["violations"] == []
    assert "LiteRT int8 spec check: 10 ops, 0 violations" in result.summary()


def test_excluded_node_stays_float_with_a_reason(model):
    path, calib, test = model
    r = qr.quantize(path, {"x": calib}, qr.Config(progress=False, exclude=("pw",)))
    assert ("pw", "excluded by the configuration (pw)") in [(op.label, why) for op, why in r.annotation.float_ops]
    names = [op.name for op in r.module.main.ops]
    assert "nn.conv" in names and r.cast_counts() == (2, 2)  # one dcast before pw, one qcast after it
    ref = run(r.float_function, {"x": test})["probs"]
    assert np.mean(ref.argmax(1) == run(r.module, {"x": test})["probs"].argmax(1)) >= 0.95


@pytest.mark.parametrize("method", ["minmax", "percentile", "entropy", "mse"])
def test_every_calibration_method_gives_a_clean_model(model, method):
    path, calib, _ = model
    r = qr.quantize(path, {"x": calib}, qr.Config(progress=False, method=method))
    assert r.spec_report().ok and r.cast_counts() == (1, 1)
    assert min(e.sqnr_db for e in r.layer_errors()) > 15


def test_per_tensor_weights(model):
    path, calib, _ = model
    r = qr.quantize(path, {"x": calib}, qr.Config(progress=False, per_channel=False))
    w = next(op for op in r.module.main.ops if op.opdef is qnn.CONV).operands[1].type.element_type
    assert not hasattr(w, "scales") and w.storage_min == -127
    assert r.spec_report().ok


def test_input_file_is_not_modified_and_output_is_written_atomically(model, result, tmp_path):
    path = model[0]
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    out = tmp_path / "q.mlir"
    result.save(out)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert parse_module(out.read_text()) is not None
    assert [p.name for p in tmp_path.iterdir()] == ["q.mlir"]   # no temp file left behind


# -- bad input ----------------------------------------------------------------------------------

def test_empty_calibration_set(model):
    with pytest.raises(CalibrationError, match="is empty"):
        qr.quantize(model[0], {"x": np.zeros((0, 1, 8, 8), np.float32)}, CFG)


def test_nan_in_a_sample_is_named(model):
    x = model[1][:10].copy()
    x[7, 0, 2, 2] = np.nan
    with pytest.raises(CalibrationError, match=r"NaN or Inf values in sample\(s\) 7"):
        qr.quantize(model[0], {"x": x}, CFG)


def test_wrong_input_name_shape_and_dtype(model):
    x = model[1][:4]
    with pytest.raises(CalibrationError, match=r"unknown input\(s\) image; missing input\(s\) x"):
        qr.quantize(model[0], {"image": x}, CFG)
    with pytest.raises(CalibrationError, match=r"dim 2 must be 8"):
        qr.quantize(model[0], {"x": np.zeros((4, 1, 9, 8), np.float32)}, CFG)
    with pytest.raises(CalibrationError, match="has dtype int64, the model expects float32"):
        qr.quantize(model[0], {"x": np.zeros((4, 1, 8, 8), np.int64)}, CFG)


def test_nothing_quantizable_is_a_clear_error(tmp_path):
    path = tmp_path / "erf.onnx"
    unquantizable(path)
    with pytest.raises(QuantirError,
                       match=r"nothing to quantize in this model \(erf: no quantizer pattern for 'nn.erf'"):
        qr.quantize(path, {"x": np.ones((2, 1, 8, 8), np.float32)}, CFG)


def test_zero_range_activation_gets_a_sound_scale(tmp_path):
    """A tensor that is 0 on every sample: the 1e-6 range floor, not a NaN or zero scale."""
    path = tmp_path / "const.onnx"
    constant_branch(path)
    x = np.random.default_rng(3).normal(size=(16, 1, 8, 8)).astype(np.float32)
    r = qr.quantize(path, {"x": x}, CFG)
    scales = [v.type.element_type.scale for op in r.module.main.ops for v in op.results
              if hasattr(getattr(v.type, "element_type", None), "scale")]
    assert all(np.isfinite(s) and s > 0 for s in scales)
    ref = run(r.float_function, {"x": x})["probs"]
    got = run(r.module, {"x": x})["probs"]
    assert np.abs(ref - got).max() <= 2 * r.params[r.float_function.outputs[0]].scale


def test_all_zero_weight_channel(tmp_path):
    path = tmp_path / "zero.onnx"
    rng = cnn(path, zero_channel=True)
    r = qr.quantize(path, {"x": rng.normal(size=(32, 1, 8, 8)).astype(np.float32)}, CFG)
    w = next(op for op in r.module.main.ops if op.opdef is qnn.CONV).operands[1].type.element_type
    assert 0 < w.scales[3] < 1e-8      # the 1e-6 range floor: ≈ 3.94e-9, never 0 or NaN
    assert r.spec_report().ok


def test_two_operand_sum_is_an_add_and_wider_sums_stay_float(tmp_path):
    """ONNX-zoo ResNets write residuals as Sum: two operands quantize as ADD (with the fused Relu);
    three stay float with the reason."""
    path = tmp_path / "sum.onnx"
    rng = sum_residuals(path)
    x = rng.normal(size=(32, 1, 8, 8)).astype(np.float32)
    r = qr.quantize(path, {"x": x}, CFG)
    adds = [op for op in r.module.main.ops if op.opdef is qnn.ADD]
    assert len(adds) == 1 and adds[0].attr("activation") == "RELU"
    assert [(f["op"], f["reason"]) for f in r.summary_dict()["left_float"]] == \
        [("sum3", "no quantizer pattern for 'nn.sum'")]
    assert r.spec_report().ok
    ref = run(r.float_function, {"x": x})["probs"]
    got = run(r.module, {"x": x})["probs"]
    assert (ref.argmax(-1) == got.argmax(-1)).mean() >= 0.9


def test_softmax_after_huge_logits(tmp_path):
    """Logits in the thousands put the softmax input scale above 16, where LiteRT caps the exp
    multiplier (only the row maximum survives): a sound model, not a kernel error."""
    path = tmp_path / "big.onnx"
    rng = sum_residuals(path, logit_gain=2000.0)
    x = rng.normal(size=(16, 1, 8, 8)).astype(np.float32)
    r = qr.quantize(path, {"x": x}, CFG)
    softmax = next(op for op in r.module.main.ops if op.opdef is qnn.SOFTMAX)
    assert softmax.operands[0].type.element_type.scale >= 16
    ref = run(r.float_function, {"x": x})["probs"]
    got = run(r.module, {"x": x})["probs"]
    assert (ref.argmax(-1) == got.argmax(-1)).mean() >= 0.9
    assert "softmax" in r.summary()


def test_slice_channel_split_is_quantized(tmp_path):
    """Slice with constant bounds (a channel split, as ShuffleNetV2 / YOLO write it) is a copy:
    quantized, same scale in and out, exported to ONNX and TFLite."""
    import onnx
    from onnx import TensorProto as TP, helper as h, numpy_helper as nh
    rng = np.random.default_rng(5)
    inits = {"W": rng.normal(size=(8, 1, 3, 3)).astype(np.float32), "s0": np.array([0], np.int64),
             "s1": np.array([4], np.int64), "e1": np.array([8], np.int64), "ax": np.array([1], np.int64)}
    nodes = [h.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("Slice", ["r", "s0", "s1", "ax"], ["lo"], name="split_lo"),
             h.make_node("Slice", ["r", "s1", "e1", "ax"], ["hi"], name="split_hi"),
             h.make_node("Add", ["lo", "hi"], ["probs"], name="add")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["N", 1, 8, 8])],
                     [h.make_tensor_value_info("probs", TP.FLOAT, ["N", 4, 8, 8])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "split.onnx"
    onnx.save(m, str(path))
    x = rng.normal(size=(16, 1, 8, 8)).astype(np.float32)
    r = qr.quantize(path, {"x": x}, CFG)
    assert r.annotation.float_ops == [] and r.cast_counts() == (1, 1) and r.spec_report().ok
    slices = [op for op in r.module.main.ops if op.opdef is nn.SLICE]
    assert len(slices) == 2 and all(op.operands[0].type.element_type == op.results[0].type.element_type
                                    for op in slices)
    ref, got = run(r.float_function, {"x": x})["probs"], run(r.module, {"x": x})["probs"]
    assert np.abs(ref - got).max() <= 3 * r.params[r.float_function.outputs[0]].scale
    sess = ort.InferenceSession(str(r.save(tmp_path / "q.onnx")), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], got, atol=2 * r.params[r.float_function.outputs[0]].scale)
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    report = verify_tflite(r.save(tmp_path / "q.tflite").read_bytes(), {"x": x})
    assert report.ok, report.text()


@pytest.mark.parametrize("divisor", [np.float32(255.0), np.array([[[0.5]], [[2.0]], [[-4.0]], [[0.25]]], np.float32)])
def test_div_by_a_constant_is_a_mul_by_its_reciprocal(tmp_path, divisor):
    """In-graph normalisation (x / 255, x / std per channel): MUL by 1/b as an int8 constant. A
    divisor holding 0 makes the float model itself produce Inf: a CalibrationError naming the tensor."""
    import onnx
    from onnx import TensorProto as TP, helper as h, numpy_helper as nh
    rng = np.random.default_rng(11)

    def model(d, name):
        # the Relu between keeps the Div out of the conv (a Div right after a conv folds into its
        # weights: tests/passes/test_fold_affine.py)
        nodes = [h.make_node("Conv", ["x", "W"], ["c0"], pads=[1, 1, 1, 1], name="conv"),
                 h.make_node("Relu", ["c0"], ["c"], name="relu0"),
                 h.make_node("Div", ["c", "d"], ["q"], name="div"),
                 h.make_node("Relu", ["q"], ["probs"], name="relu")]
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["N", 1, 6, 6])],
                         [h.make_tensor_value_info("probs", TP.FLOAT, ["N", 4, 6, 6])],
                         [nh.from_array(rng.normal(size=(4, 1, 3, 3)).astype(np.float32), "W"), nh.from_array(d, "d")])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, str(tmp_path / name))
        return tmp_path / name

    x = rng.normal(size=(16, 1, 6, 6)).astype(np.float32)
    r = qr.quantize(model(np.asarray(divisor), "div.onnx"), {"x": x}, CFG)
    assert r.annotation.float_ops == [] and r.cast_counts() == (1, 1) and r.spec_report().ok
    mul = next(op for op in r.module.main.ops if op.opdef is qnn.MUL)
    assert mul.attr("activation") == "RELU"
    ref, got = run(r.float_function, {"x": x})["probs"], run(r.module, {"x": x})["probs"]
    out_scale = r.params[r.float_function.outputs[0]].scale
    assert np.abs(ref - got).max() <= 3 * out_scale
    for fmt in ("qdq", "qoperator"):
        sess = ort.InferenceSession(str(r.save(tmp_path / f"div.{fmt}.onnx", format=fmt)),
                                    providers=["CPUExecutionProvider"])
        assert np.abs(sess.run(None, {"x": x})[0] - got).max() <= 2.5 * out_scale   # one step per op
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    assert verify_tflite(r.save(tmp_path / "div.tflite").read_bytes(), {"x": x}).ok
    zero = np.asarray(divisor).copy()
    zero.reshape(-1)[0] = 0
    with pytest.raises(CalibrationError, match=r"tensor 'q'.* Inf"):   # the float model itself overflows
        qr.quantize(model(zero, "div0.onnx"), {"x": x}, CFG)
