"""ONNX LSTM quantized as LiteRT's integer UNIDIRECTIONAL_SEQUENCE_LSTM (quantize/ops/recurrent.py).

A CRNN-shaped model (Conv -> Reshape -> Transpose -> bidirectional LSTM, zero initial states written
as ConstantOfShape on a shape computed at run time, as exporters do) becomes integer end to end: the
bidirectional LSTM splits into a forward and a reverse integer LSTM, the cell state's int16 scale
comes from the calibrated float recurrence, the .tflite is bit-exact with LiteRT, and the ONNX
exports run in ONNX Runtime at two sequence lengths. LSTMs LiteRT's kernel cannot express stay float
with the reason.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.ir.dialects import qnn
from quantir.quantize.ops import recurrent

RNG = np.random.default_rng(0)
HIDDEN = 6


def _crnn(tmp_path, *, attrs=None, initial="zeros", read_state=False, name="crnn") -> str:
    """x [1, 1, 8, W] -> Conv(4) -> Relu -> Reshape [1, 32, W] -> Transpose [W, 1, 32] -> LSTM -> y."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(size=(4, 1, 3, 3)).astype(np.float32), "cw"),
             numpy_helper.from_array(np.array([1, 32, -1], np.int64), "shape"),
             numpy_helper.from_array(rng.normal(size=(2, 4 * HIDDEN, 32)).astype(np.float32) * 0.3, "W"),
             numpy_helper.from_array(rng.normal(size=(2, 4 * HIDDEN, HIDDEN)).astype(np.float32) * 0.5, "R"),
             numpy_helper.from_array(rng.normal(size=(2, 8 * HIDDEN)).astype(np.float32) * 0.3, "B"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([2], np.int64), "dirs"),
             numpy_helper.from_array(np.array([HIDDEN], np.int64), "hid"),
             numpy_helper.from_array(np.full((2, 1, HIDDEN), 0.5, np.float32), "half")]
    nodes = [helper.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["s"]),
             helper.make_node("Transpose", ["s"], ["t"], perm=[2, 0, 1]),
             # the batch from the input's shape, as PyTorch exports the zero states
             helper.make_node("Shape", ["t"], ["ts"]), helper.make_node("Gather", ["ts", "one"], ["b"], axis=0),
             helper.make_node("Concat", ["dirs", "b", "hid"], ["state_shape"], axis=0),
             helper.make_node("ConstantOfShape", ["state_shape"], ["zeros"])]
    state = {"zeros": "zeros", "half": "half", "none": ""}[initial]
    outputs = ["y", "y_h" if read_state else "", ""]
    nodes.append(helper.make_node("LSTM", ["t", "W", "R", "B", "", state, state], outputs, hidden_size=HIDDEN,
                                  direction="bidirectional", **(attrs or {})))
    graph_outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if read_state:
        graph_outputs.append(helper.make_tensor_value_info("y_h", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, "W"])],
                          graph_outputs, inits)
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path


def _samples(n: int, width: int = 12) -> list[dict]:
    return [{"x": RNG.normal(size=(1, 1, 8, width)).astype(np.float32)} for _ in range(n)]


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    path = _crnn(tmp_path_factory.mktemp("lstm"))
    return path, qr.quantize(path, _samples(24), qr.Config(progress=False, budget=None))


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_a_bidirectional_lstm_becomes_two_integer_lstms_with_one_quantize_and_one_dequantize(quantized):
    _, r = quantized
    names = [op.name for op in r.module.main.ops]
    assert names.count("qnn.unidirectional_lstm") == 2 and "nn.lstm" not in names
    assert sorted(op.attr("reverse") for op in r.module.main.ops if op.opdef is qnn.UNIDIRECTIONAL_LSTM) == \
        [False, True]
    assert r.cast_counts() == (1, 1) and not r.annotation.float_ops
    assert r.rewritten().get("lstm_directions") == 1
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in r.summary()


def test_the_integer_model_follows_the_float_one_at_two_widths(quantized):
    path, r = quantized
    for width in (12, 20):
        x = _samples(1, width)[0]
        ref = _session(path).run(None, x)[0]
        ours = qr.run(r.module, x)["y"]
        assert ours.shape == ref.shape == (width, 2, 1, HIDDEN)
        cos = float(np.sum(ours * ref) / np.sqrt(np.sum(ours * ours) * np.sum(ref * ref)))
        assert cos > 0.995, (width, cos)


def test_the_cell_state_scale_covers_the_calibrated_float_recurrence(quantized):
    """cell_scale_log2 is the finest power of two holding the largest |c| the float recurrence reaches on
    the calibration samples (within LiteRT's 2**-15 .. 2**-9)."""
    _, r = quantized
    cells = [op.attr("cell_scale_log2") for op in r.module.main.ops if op.opdef is qnn.UNIDIRECTIONAL_LSTM]
    assert all(-15 <= k <= -9 for k in cells)
    for region in r.annotation.regions:
        if region.pattern.name != "lstm":
            continue
        op = region.match.ops["op"]
        interior, = recurrent._interior(region)
        assert r.params[interior.carrier].scale == 2.0 ** recurrent.cell_scale_log2(
            r.params[interior.carrier].rmin, r.params[interior.carrier].rmax)
        assert op.results[2] is interior.carrier


@pytest.mark.parametrize("amax, want", [(1.0, -14), (0.5, -15), (3.99, -13), (4.0, -12), (16.0, -10), (63.9, -9),
                                        (500.0, -9), (0.0, -15), (float("inf"), -9)])
def test_cell_scale_is_the_finest_power_of_two_that_holds_the_range(amax, want):
    assert recurrent.cell_scale_log2(-amax, amax / 2) == want
    if np.isfinite(amax) and want > -15 and amax < 64:
        assert amax <= 32767 * 2.0 ** want and amax > 32767 * 2.0 ** (want - 1)


def test_the_gate_scale_search_never_loses_to_the_largest_magnitude():
    """Each gate's searched scale has at most the error of the max-magnitude scale (one of its candidates),
    under the Gram matrix when given and in plain squared error otherwise."""
    rng = np.random.default_rng(3)
    w = (rng.standard_t(2, size=(4, 32, 16)) * 0.05).astype(np.float32)   # heavy tails, as trained LSTMs have
    x = rng.normal(size=(200, 16))
    gram = x.T @ x
    for g_ in (None, gram):
        ints, scales = recurrent._weights(w, g_, hessian=False)
        for g in range(4):
            top = np.abs(w[g]).max() / 127
            near = np.clip(np.rint(w[g] / top), -127, 127) * top
            ours = ints[g] * scales[g]
            def err(e):
                return np.sum((e @ g_) * e) if g_ is not None else np.sum(e * e)
            assert err(w[g] - ours) <= err(w[g] - near) * (1 + 1e-6)


def test_the_tflite_is_bit_exact_with_litert(quantized, tmp_path):
    pytest.importorskip("ai_edge_litert")
    _, r = quantized
    out = tmp_path / "crnn.tflite"
    r.save(out)
    from quantir.verify import verify_tflite
    report = verify_tflite(out, {"x": np.concatenate([s["x"] for s in _samples(4)])})
    assert report.ok and report.intermediates, report.text()


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
def test_the_onnx_exports_run_in_onnx_runtime_at_two_widths(quantized, tmp_path, fmt):
    """ONNX Runtime has no LSTM on int8 activations: QDQ runs a float LSTM on int8 weights, within a
    few int8 steps of quantir's integers; QOperator writes LiteRT's integer recurrence as a Scan of
    integer ops (backends/onnx/integer_lstm.py): one QuantizeLinear, and the interpreter's integers."""
    from tests.backends.onnx.test_qoperator_16bit import on_input_grid
    _, r = quantized
    path = r.save(tmp_path / f"m.{fmt}.onnx", format=fmt)
    if fmt == "qoperator":
        ops = [n.op_type for n in onnx.load(path).graph.node]
        assert ops.count("QuantizeLinear") == 1 and ops.count("Scan") == 2, ops
    for width in (12, 20):
        x = {k: on_input_grid(r.module, v) for k, v in _samples(1, width)[0].items()}
        ours = qr.run(r.module, x)["y"]
        got = _session(path).run(None, x)[0]
        step = float(qnn.scales_of(next(op for op in r.module.main.ops
                                        if op.opdef is qnn.UNIDIRECTIONAL_LSTM).results[0].type))
        assert got.shape == ours.shape and np.abs(got - ours).max() <= 8 * step


def _lstm_alone(tmp_path, batch: int) -> str:
    """x [T, B, 16] -> bidirectional LSTM -> y [T, 2, B, H], zero states: the LSTM and nothing else."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.normal(size=(2, 4 * HIDDEN, 16)).astype(np.float32) * 0.4, "W"),
             numpy_helper.from_array(rng.normal(size=(2, 4 * HIDDEN, HIDDEN)).astype(np.float32) * 0.5, "R"),
             numpy_helper.from_array(rng.normal(size=(2, 8 * HIDDEN)).astype(np.float32) * 0.3, "B")]
    g = helper.make_graph([helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=HIDDEN,
                                            direction="bidirectional")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", batch, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = str(tmp_path / "lstm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path


@pytest.mark.parametrize("batch, activations", [(1, "int8"), (3, "int8"), (3, "uint8")])
def test_the_qoperator_lstm_is_litert_s_integer_recurrence(tmp_path, batch, activations):
    """The QOperator export's Scan (backends/onnx/integer_lstm.py) computes the interpreter's integers,
    forward and reverse, at any sequence length, int8 or uint8 storage: one QuantizeLinear in the file."""
    from tests.backends.onnx.test_qoperator_16bit import on_input_grid
    rng = np.random.default_rng(batch)   # its own: the module's RNG feeds the other tests' samples
    path = _lstm_alone(tmp_path, batch)
    r = qr.quantize(path, [{"x": rng.normal(size=(9, batch, 16)).astype(np.float32)} for _ in range(16)],
                    qr.Config(progress=False, budget=None))
    assert sum(op.opdef is qnn.UNIDIRECTIONAL_LSTM for op in r.module.main.ops) == 2
    out = r.save(tmp_path / "lstm.qop.onnx", format="qoperator", activations=activations)
    assert [n.op_type for n in onnx.load(out).graph.node].count("QuantizeLinear") == 1
    for steps in (1, 7, 30):
        x = {"x": on_input_grid(r.module, rng.normal(size=(steps, batch, 16)).astype(np.float32) * 1.5)}
        np.testing.assert_array_equal(_session(out).run(None, x)[0], qr.run(r.module, x)["y"])


@pytest.mark.parametrize("attrs, initial, read_state, reason", [
    ({"clip": 3.0}, "zeros", False, "clip on the gates"),
    ({"activations": ["Sigmoid", "Tanh", "Relu", "Sigmoid", "Tanh", "Tanh"]}, "zeros", False, "activations"),
    ({"input_forget": 1}, "zeros", False, "input_forget"),
    ({}, "half", False, "initial_h is not zero"),
    ({}, "zeros", True, "Y_h or Y_c of a bidirectional LSTM is read"),
])
def test_an_lstm_litert_cannot_express_stays_float_with_the_reason(tmp_path, attrs, initial, read_state, reason):
    path = _crnn(tmp_path, attrs=attrs, initial=initial, read_state=read_state)
    r = qr.quantize(path, _samples(8), qr.Config(progress=False, budget=None))
    whys = [why for op, why in r.annotation.float_ops if op.name == "nn.lstm"]
    assert whys and all(reason in why for why in whys), whys
    assert "qnn.conv" in [op.name for op in r.module.main.ops]        # the rest is still integer
    x = _samples(1)[0]
    ref = _session(path).run(None, x)[0]
    assert np.abs(qr.run(r.module, x)["y"] - ref).max() < 0.1


def test_statistics_written_and_read_back_give_the_same_model(tmp_path):
    """The cell state's statistics travel in the quant.stats IR like every observed tensor: quantizing
    from them gives the cell-state scales quantizing from the samples gives (the weights differ: without
    kept samples the gate scales are searched in plain squared error, not under the input's Gram matrix)."""
    path = _crnn(tmp_path)
    config = qr.Config(progress=False, budget=None, weight_rounding="nearest", bias_correction="off")
    samples = _samples(8)
    stats = qr.calibration_stats(path, samples, config)
    from_stats = qr.quantize(stats, config=config)
    direct = qr.quantize(path, samples, config)

    def lstms(r):
        return [(op.attr("cell_scale_log2"), op.attr("reverse")) for op in r.module.main.ops
                if op.opdef is qnn.UNIDIRECTIONAL_LSTM]
    assert lstms(from_stats) == lstms(direct) and len(lstms(direct)) == 2
    x = _samples(1)[0]
    assert np.abs(qr.run(from_stats.module, x)["y"] - qr.run(direct.module, x)["y"]).max() < 0.1


def test_a_budget_the_promotions_miss_keeps_the_lstms_float(tmp_path):
    """LiteRT has no 16-bit LSTM: when promoting every tensor it can to int16 misses the budget, the ops
    without a 16-bit kernel are kept float, and that is kept when it meets the budget (said in the summary)."""
    path = _crnn(tmp_path)
    rng = np.random.default_rng(7)
    samples = [{"x": rng.normal(size=(1, 1, 8, 12)).astype(np.float32)} for _ in range(80)]
    loose = qr.quantize(path, samples, qr.Config(progress=False, budget=0.995))
    assert loose.promotion.met and not loose.promotion.kept_float and not loose.annotation.float_ops
    strict = qr.quantize(path, samples, qr.Config(progress=False, budget=0.9999))
    p = strict.promotion
    assert p.met and p.after >= 0.9999 and sorted(p.kept_float) == ["y/forward", "y/reverse"]
    whys = [why for op, why in strict.annotation.float_ops if op.name == "nn.lstm"]
    assert len(whys) == 2 and all("kept float to meet the budget" in why for why in whys)
    assert "kept float (no 16-bit kernel" in strict.summary()
    assert "qnn.unidirectional_lstm" not in [op.name for op in strict.module.main.ops]
    # the Concat joining the two float LSTMs (the model's output) stays float with them: one dequantize
    # into the island, none out of it, and no quantize per LSTM (it had been 3 / 2)
    joins = [why for op, why in strict.annotation.float_ops if op.name == "nn.concat"]
    assert len(joins) == 1 and "kept float with its inputs" in joins[0]
    assert strict.cast_counts() == (1, 1)


def test_verify_runs_a_static_time_axis_whole(tmp_path, monkeypatch):
    """A model whose input is time-major with a static T ([5, 1, 4]): ``verify`` runs the inputs' axis 0
    five entries at a time (one sequence), not one step at a time (a length-1 sequence, where the
    recurrence never runs), and refuses a count that is not a multiple of T."""
    pytest.importorskip("ai_edge_litert")
    from quantir import verify as V
    from quantir.runtime.interpreter import FeedError
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(size=(1, 12, 4)).astype(np.float32) * 0.5, "W"),
             numpy_helper.from_array(rng.normal(size=(1, 12, 3)).astype(np.float32) * 0.5, "R"),
             numpy_helper.from_array(np.array([1], np.int64), "axes")]
    nodes = [helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=3),
             helper.make_node("Squeeze", ["y", "axes"], ["out"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, 4])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    path = tmp_path / "seq.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    samples = [{"x": rng.normal(size=(5, 1, 4)).astype(np.float32)} for _ in range(20)]
    r = qr.quantize(str(path), samples, qr.Config(progress=False, budget=None))
    r.save(tmp_path / "seq.tflite")
    runs = []
    chunk = V._Oracle.chunk
    monkeypatch.setattr(V._Oracle, "chunk", lambda self, feeds, *a: runs.append(feeds[0].shape) or
                        chunk(self, feeds, *a))
    report = V.verify_tflite(tmp_path / "seq.tflite", {"x": np.concatenate([s["x"] for s in samples[:2]])})
    assert report.ok and report.samples == 10 and runs == [(5, 1, 4), (5, 1, 4)], (runs, report.text())
    with pytest.raises(FeedError, match="take 5 entries on axis 0 .* give 7, not a multiple of 5"):
        V.verify_tflite(tmp_path / "seq.tflite", {"x": np.zeros((7, 1, 4), np.float32)})
