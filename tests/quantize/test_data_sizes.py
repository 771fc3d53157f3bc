"""Calibration on samples of different sizes (issue 14 item 1): a model with dynamic H, W takes a
list of arrays, a list of feed dicts or a CalibrationDataReader whose samples differ in size.
Batches hold one size each; ranges, histograms, bias correction and the per-layer report equal
what ONNX Runtime computes on the same samples one by one; bad sizes are a CalibrationError."""
from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.cli.main import main  # noqa: E402
from quantir.errors import CalibrationError  # noqa: E402
from quantir.quantize.calibrate import input_specs  # noqa: E402
from quantir.quantize.data import as_dataset  # noqa: E402
from quantir.quantize.observers import HistogramObserver  # noqa: E402
from quantir.report.layers import add_sums, compare, error_sums, from_sums  # noqa: E402
from quantir.runtime import run  # noqa: E402

# (H, W) of the samples, in order: runs of one size and sizes that come back
SIZES = [(6, 9), (6, 9), (8, 5), (6, 9), (11, 7), (11, 7), (11, 7), (8, 5)]
TENSORS = ["r1", "y"]   # with x, what calibration observes (Conv+Relu and Conv+Add are one region each)
pytestmark = pytest.mark.filterwarnings("ignore::quantir.errors.QuantizationWarning")   # 8 samples, on purpose


@pytest.fixture
def model(make_onnx_model, rng):
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", strides=[2, 2], pads=[1, 0, 1, 1]),
             helper.make_node("Add", ["c2", "k"], ["y"], name="add2")]
    inits = {"w1": rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.4,
             "b1": rng.standard_normal(4).astype(np.float32) * 0.1,
             "w2": rng.standard_normal((5, 4, 3, 3)).astype(np.float32) * 0.3,
             "k": rng.standard_normal((1, 5, 1, 1)).astype(np.float32)}
    return make_onnx_model(nodes, [("x", np.float32, ("N", 3, "H", "W"))], [("y", np.float32, None)], inits)


@pytest.fixture
def samples(rng):
    return [(rng.standard_normal((1, 3, h, w)) + 0.3).astype(np.float32) for h, w in SIZES]


def _ort_values(model, samples) -> dict[str, list[np.ndarray]]:
    """Every tensor of TENSORS on each sample, computed by ONNX Runtime one sample at a time."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.extend(helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in TENSORS)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    per = [sess.run(TENSORS, {"x": s}) for s in samples]
    return {n: [p[i] for p in per] for i, n in enumerate(TENSORS)}


def _observed(result) -> dict[str, list]:
    return {v.name_hint: obs for v, obs in result.statistics.observers.items()}


def test_batches_hold_one_size_and_keep_the_order(samples):
    ds = as_dataset(samples, ["x"])
    spec = input_specs(qr.load(_one_input_model()).main)
    batches = [b["x"] for b in ds.batches(spec, batch_size=2)]
    assert [b.shape for b in batches] == [(2, 3, 6, 9), (1, 3, 8, 5), (1, 3, 6, 9), (2, 3, 11, 7), (1, 3, 11, 7),
                                          (1, 3, 8, 5)]
    flat = [s for b in batches for s in b]
    assert len(flat) == len(samples) and all(np.array_equal(a, b[0]) for a, b in zip(flat, samples))


def _one_input_model():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 17)])
    m.ir_version = 8
    return m


class _Reader:
    """An ONNX Runtime CalibrationDataReader yielding samples of several sizes."""

    def __init__(self, samples):
        self.samples, self.i = samples, 0

    def get_next(self):
        self.i += 1
        return {"x": self.samples[self.i - 1]} if self.i <= len(self.samples) else None

    def rewind(self):
        self.i = 0


@pytest.mark.parametrize("form", ["arrays", "feeds", "reader"])
def test_minmax_ranges_equal_the_samples_one_by_one(model, samples, form):
    data = {"arrays": samples, "feeds": [{"x": s} for s in samples], "reader": _Reader(samples)}[form]
    result = qr.quantize(model, data, qr.Config(method="minmax", progress=False, batch_size=2))
    assert result.statistics.num_samples == len(samples)
    want = {"x": samples, **_ort_values(model, samples)}
    observed = _observed(result)
    assert set(want) <= set(observed)
    for name in want:
        lo = min(float(a.min()) for a in want[name])
        hi = max(float(a.max()) for a in want[name])
        got = observed[name][0].range()
        np.testing.assert_allclose(got, (min(lo, 0.0), max(hi, 0.0)) if lo == hi else (lo, hi), rtol=1e-6, atol=1e-7)


def test_histograms_count_every_sample(model, samples):
    result = qr.quantize(model, samples, qr.Config(method="entropy", progress=False, batch_size=2))
    want = {"x": samples, **_ort_values(model, samples)}
    observed = _observed(result)
    assert set(want) <= set(observed)
    for name in want:
        obs = observed[name]
        hist = next(o for o in obs if isinstance(o, HistogramObserver)).histogram
        data = np.concatenate([a.ravel() for a in want[name]]).astype(np.float64)
        counts, _ = np.histogram(data, bins=hist.edges)
        # np.histogram closes its last bin on the right; quantir's edges lie beyond the data
        assert np.array_equal(hist.counts, counts), name


@pytest.mark.parametrize("method", ["entropy", "percentile", "mse", "minmax"])
def test_one_size_as_a_list_equals_one_stacked_array(model, rng, method):
    # the single-size reference: per-sample arrays are batched back into the same batches
    x = rng.standard_normal((6, 3, 7, 10)).astype(np.float32)
    config = qr.Config(method=method, progress=False, batch_size=4)
    a = qr.quantize(model, {"x": x}, config)
    b = qr.quantize(model, [x[i:i + 1] for i in range(6)], config)
    assert {n: o[0].range() for n, o in _observed(a).items()} == {n: o[0].range() for n, o in _observed(b).items()}
    assert {v.name_hint: p for v, p in a.params.items() if hasattr(p, "zero_point")} == \
        {v.name_hint: p for v, p in b.params.items() if hasattr(p, "zero_point")}


def _conv_weights(result, name):
    region = next(r for r in result.annotation.regions if r.pattern.weighted and r.output.name_hint == name)
    return region, result.params[region.match.values["w"]]


def _mean_error_output(w, dw, pads, strides, inputs):
    """Per output channel: the mean of conv(x, dw) over every sample and output position (ORT)."""
    nodes = [helper.make_node("Conv", ["x", "dw"], ["e"], pads=pads, strides=strides)]
    g = helper.make_graph(nodes, "e", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, None)],
                          initializer=[onnx.numpy_helper.from_array(dw.astype(np.float32), "dw")])
    m = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 17)])
    m.ir_version = 8
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = [sess.run(None, {"x": x})[0] for x in inputs]
    total = sum(o.sum(axis=(0, 2, 3), dtype=np.float64) for o in outs)
    return total / sum(o.shape[0] * o.shape[2] * o.shape[3] for o in outs)


@pytest.mark.parametrize("out, conv_input, pads, strides", [("r1", "x", [1, 1, 1, 1], [1, 1]),
                                                            ("y", "r1", [1, 0, 1, 1], [2, 2])])
def test_bias_correction_is_the_mean_error_over_every_size(model, samples, out, conv_input, pads, strides):
    result = qr.quantize(model, samples, qr.Config(method="minmax", progress=False, batch_size=2))
    region, wp = _conv_weights(result, out)
    w = region.match.consts["w"].astype(np.float64)
    scale = np.asarray(wp.scale, np.float64).reshape(-1, 1, 1, 1)
    dw = np.clip(np.round(w / scale), -127, 127) * scale - w
    inputs = samples if conv_input == "x" else _ort_values(model, samples)["r1"]
    want = _mean_error_output(w, dw, pads, strides, inputs)
    np.testing.assert_allclose(wp.correction, want, rtol=1e-4, atol=1e-6)


def test_empirical_bias_correction_on_mixed_sizes_falls_back_to_the_weights(model, samples):
    weights = qr.quantize(model, samples, qr.Config(method="minmax", progress=False, batch_size=2))
    empirical = qr.quantize(model, samples, qr.Config(method="minmax", progress=False, batch_size=2,
                                                      bias_correction="empirical"))
    for out in ("r1", "y"):
        np.testing.assert_array_equal(_conv_weights(empirical, out)[1].correction,
                                      _conv_weights(weights, out)[1].correction)


def test_per_layer_report_on_mixed_sizes(model, samples):
    result = qr.quantize(model, samples, qr.Config(method="minmax", progress=False, batch_size=2))
    errors = {e.name: e for e in result.layer_errors()}
    assert errors and "WARNING" not in result.summary().split("lowest SQNR")[1]
    # the output layer's SQNR is float (ONNX Runtime) against the integer module, over every kept sample
    float_y = np.concatenate([a.ravel() for a in _ort_values(model, samples)["y"]])
    int_y = np.concatenate([run(result.module, {"x": s})["y"].ravel() for s in samples])
    sqnr, cosine, _ = compare(float_y, int_y)
    assert [r.output.name_hint for r in result.annotation.regions] == ["r1", "y"] and len(errors) == 2
    last = result.layer_errors()[-1]   # in the regions' order
    assert last.sqnr_db == pytest.approx(sqnr, rel=1e-4) and last.cosine == pytest.approx(cosine, rel=1e-6)


def test_error_sums_of_batches_of_several_sizes_compare_as_the_whole(rng):
    """The per-layer report adds each batch's error sums: the same figures as one concatenated array."""
    xs = [rng.standard_normal(n) for n in (7, 40, 1)]
    ys = [x + rng.standard_normal(x.size) * 0.01 for x in xs]
    total = error_sums(xs[0], ys[0])
    for x, y in zip(xs[1:], ys[1:]):
        total = add_sums(total, error_sums(x, y))
    whole = compare(np.concatenate(xs), np.concatenate(ys))
    assert from_sums(total) == pytest.approx(whole, rel=1e-12)


def test_a_static_dim_names_the_input_the_sample_and_the_dims(make_onnx_model, rng):
    model = make_onnx_model([helper.make_node("Conv", ["x", "w"], ["y"])], [("x", np.float32, ("N", 3, 48, "W"))],
                            [("y", np.float32, None)], {"w": rng.standard_normal((2, 3, 1, 1)).astype(np.float32)})
    good = [rng.standard_normal((1, 3, 48, w)).astype(np.float32) for w in (20, 31)]
    bad = rng.standard_normal((2, 3, 32, 40)).astype(np.float32)
    with pytest.raises(CalibrationError) as e:
        qr.quantize(model, [*good, bad], qr.Config(progress=False))
    assert str(e.value) == ("calibration input 'x', samples 2-3: shape (2, 3, 32, 40); dim 2 must be 48, as in the "
                            "model's (?, 3, 48, ?) (only the dims shown as ? are dynamic and take any size)")
    with pytest.raises(CalibrationError, match=r"input 'x', sample 1: shape \(1, 2, 48, 9\); dim 1 must be 3"):
        qr.quantize(model, [{"x": good[0]}, {"x": rng.standard_normal((1, 2, 48, 9)).astype(np.float32)}],
                    qr.Config(progress=False))
    with pytest.raises(CalibrationError, match="samples of different sizes go as a list of feed dicts"):
        qr.quantize(model, {"x": [g[0] for g in good]}, qr.Config(progress=False))


def test_a_fixed_batch_needs_enough_samples_of_one_size(make_onnx_model, rng):
    model = make_onnx_model([helper.make_node("Relu", ["x"], ["y"])], [("x", np.float32, (2, 3, "H", "W"))],
                            [("y", np.float32, None)])
    alternating = [rng.standard_normal((1, 3, 4, w)).astype(np.float32) for w in (5, 6, 5, 6)]
    with pytest.raises(CalibrationError, match="fixed at 2: give at least 2 samples in a row of one size"):
        qr.quantize(model, alternating, qr.Config(progress=False))
    paired = [rng.standard_normal((1, 3, 4, w)).astype(np.float32) for w in (5, 5, 6, 6, 7)]
    result = qr.quantize(model, paired, qr.Config(progress=False, method="minmax"))
    assert result.statistics.num_samples == 4   # the last, lone 7 cannot be fed with a batch of 2


def test_one_npz_per_size(model, samples, tmp_path):
    """An .npz holds one size: several files, through the API (a list of paths) and the CLI (--data a b)."""
    paths = []
    for size in sorted(set(SIZES)):
        paths.append(tmp_path / f"calib_{size[0]}x{size[1]}.npz")
        np.savez(paths[-1], x=np.concatenate([s for s in samples if s.shape[2:] == size]))
    ordered = [s for size in sorted(set(SIZES)) for s in samples if s.shape[2:] == size]
    config = qr.Config(method="minmax", progress=False)
    from_files = qr.quantize(model, [str(p) for p in paths], config)
    from_arrays = qr.quantize(model, ordered, config)
    assert from_files.statistics.num_samples == len(samples)
    assert {n: o[0].range() for n, o in _observed(from_files).items()} == \
        {n: o[0].range() for n, o in _observed(from_arrays).items()}

    onnx.save(model, tmp_path / "m.onnx")
    summary = tmp_path / "s.json"
    assert main(["quantize", str(tmp_path / "m.onnx"), "--data", *map(str, paths), "--method", "minmax", "-q",
                 "-o", str(tmp_path / "q.onnx"), "--summary", str(summary)]) == 0
    assert json.loads(summary.read_text())["calibration_samples"] == len(samples)
    sess = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    for s in samples[:3]:   # the export runs at each calibration size
        assert sess.run(None, {"x": s})[0].shape == run(from_files.module, {"x": s})["y"].shape


def test_a_callback_sees_ranges_and_is_told_when_samples_cannot_stack(model, samples):
    seen = []

    def ranges_only(info):   # the observers hold every size
        seen.append(info.region.label)
        return info.output_range()
    qr.quantize(model, samples, qr.Config(method="minmax", progress=False, callback=ranges_only))
    assert len(seen) == 2 and seen[0] == "conv1"

    def arrays(info):
        return info.float_output()
    with pytest.raises(CalibrationError, match=r"region 'conv1': the kept calibration samples differ in size here "
                                               r"\(\(4, 6, 9\), \(4, 8, 5\), \(4, 11, 7\)\), so their values"):
        qr.quantize(model, samples, qr.Config(method="minmax", progress=False, callback=arrays))


def test_input_health_on_samples_of_several_sizes():
    from quantir.quantize.observers import InputObserver
    obs = InputObserver("x")
    base = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    obs.update(base)
    obs.update(np.arange(15, dtype=np.float32).reshape(1, 1, 3, 5))   # another width: not a copy of the first
    obs.update(base)
    assert obs.num_samples == 3 and not obs.identical and obs.problem() is None


@pytest.mark.parametrize("engine", ["ort", "interpreter"])
def test_inputs_that_disagree_on_a_shared_dynamic_dim_name_the_sample(make_onnx_model, rng, engine):
    # each input alone fits its dims (?, 4, ?); together they must share W, which the dims cannot say
    model = make_onnx_model([helper.make_node("Add", ["x", "y"], ["z"]), helper.make_node("Relu", ["z"], ["r"])],
                            [("x", np.float32, ("N", 4, "W")), ("y", np.float32, ("N", 4, "W"))],
                            [("r", np.float32, None)])
    feeds = [{"x": rng.standard_normal((1, 4, w)).astype(np.float32),
              "y": rng.standard_normal((1, 4, w + (i == 2))).astype(np.float32)} for i, w in enumerate((5, 7, 6))]
    with pytest.raises(CalibrationError, match=r"^calibration sample 2 \('x' \(1, 4, 6\), 'y' \(1, 4, 7\)\): the float "
                                               r"model cannot run on them: "):
        qr.quantize(model, feeds, qr.Config(progress=False, engine=engine))
