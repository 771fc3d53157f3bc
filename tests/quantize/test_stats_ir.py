"""Calibration statistics as IR (``quantize.stats_ir``): ``quant.stats`` ops written by
``--emit-stats`` / ``quantir.api.calibration_stats``, quantizing from them without data, merging runs.

The oracle for "quantize from statistics" is the direct calibration run: the printed integer module
must be the same text. For merging it is the statistics of the whole calibration set (and, for
histograms re-binned across different windows, ``np.histogram`` of all the data)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import quantir as qr
from quantir.cli.main import main
from quantir.errors import CalibrationError, QuantirError, VerifyError
from quantir.ir import Module
from quantir.quantize import stats_ir
from quantir.quantize.calibrate import Statistics
from quantir.quantize.observers import HistogramObserver
from quantir.text import parse_module, print_module

pytest.importorskip("onnxruntime")
fashion = pytest.importorskip("quantir.datasets.fashion_mnist")

MODEL = "models/fashion_mnist_cnn.onnx"


@pytest.fixture(scope="module")
def calib() -> np.ndarray:
    if not fashion.is_available():
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    images, _ = fashion.load_fashion_mnist("train")
    return fashion.to_model_input(images[:160])


def _round_trip(module: Module) -> Module:
    """The module as its .mlir file gives it back."""
    return parse_module(print_module(module), "stats.mlir")


@pytest.mark.parametrize("method", ["minmax", "entropy"])
def test_quantize_from_emitted_stats_is_byte_identical(calib, method):
    # the default config: its budget holds 32 samples out of calibration in both runs
    config = qr.Config(method=method, progress=False)
    direct = qr.quantize(MODEL, {"input": calib}, config)
    assert direct.promotion is not None and not direct.promotion.promoted   # nothing the stats could not carry
    stats = _round_trip(qr.calibration_stats(MODEL, {"input": calib}, config))
    ops = [op for op in stats.main.ops if op.name == "quant.stats"]
    assert len(ops) == len(direct.statistics.observers)
    assert all("quantir.histogram" in op.attributes for op in ops) == (method == "entropy")
    from_stats = qr.quantize(stats, None, config)
    assert print_module(from_stats.module) == print_module(direct.module)
    assert from_stats.statistics.num_samples == direct.statistics.num_samples
    assert any(op.name == "quant.stats" for op in stats.main.ops)   # the caller's module is left as it was


def test_cli_emit_stats_then_quantize_without_data(calib, tmp_path):
    data, stats, direct, again = (tmp_path / n for n in ("calib.npz", "stats.mlir", "direct.tflite", "again.tflite"))
    np.savez(data, input=calib[:48])
    common = ["--method", "minmax", "--budget", "off", "-q"]
    assert main(["quantize", MODEL, "--data", str(data), "--emit-stats", str(stats), *common]) == 0
    assert main(["quantize", str(stats), "-o", str(again), *common]) == 0
    assert main(["quantize", MODEL, "--data", str(data), "-o", str(direct), *common]) == 0
    assert again.read_bytes() == direct.read_bytes()


@pytest.mark.parametrize("method", ["minmax", "entropy"])
def test_two_halves_merged_are_the_whole(calib, method, tmp_path):
    config = qr.Config(method=method, progress=False, budget=None)   # no hold-out: every sample observed
    whole = qr.calibration_stats(MODEL, {"input": calib}, config)
    halves = [tmp_path / "a.mlir", tmp_path / "b.mlir"]   # as two machines would write them
    for path, part in zip(halves, (calib[:64], calib[64:])):
        path.write_text(print_module(qr.calibration_stats(MODEL, {"input": part}, config)))
    merged = qr.merge_stats(*halves)
    _, sw = stats_ir.read(_round_trip(whole))
    _, sm = stats_ir.read(_round_trip(merged))
    assert [v.name_hint for v in sw.observers] == [v.name_hint for v in sm.observers]
    assert sm.num_samples == sw.num_samples == len(calib)
    for v, u in zip(sw.observers, sm.observers):
        assert sm.range(u, config) == sw.range(v, config), v.name_hint
        if method == "entropy":   # power-of-two grids: the halves' histograms re-bin onto the whole's exactly
            ow, om = sw.observers[v][0], sm.observers[u][0]
            assert np.array_equal(om.histogram.counts, ow.histogram.counts)
            assert om.histogram.width == ow.histogram.width
            assert np.array_equal(om.abs_histogram.counts, ow.abs_histogram.counts)
    # and so the integer modules agree (bias-correction sums added: equal here to the whole's)
    assert print_module(qr.quantize(merged, None, config).module) == \
        print_module(qr.quantize(whole, None, config).module)


def _tiny_stats(observers: dict[str, HistogramObserver]):
    t = "tensor<?x4xf32>"
    text = (f'func.func @main(%x: {t} {{quantir.name = "x"}}) -> ({t} {{quantir.name = "y"}}) {{\n'
            f'  %w = arith.constant {_W} : tensor<4x4xf32>\n'
            f'  %0 = "nn.matmul"(%x, %w) : ({t}, tensor<4x4xf32>) -> {t}\n'
            f'  return %0 : {t}\n}}')
    fn = parse_module(text).main
    fn.arguments[0].name_hint = "x"
    return stats_ir.to_module(fn, Statistics({fn.arguments[0]: [observers["x"]]}, 10))


def test_merge_rebins_histograms_of_different_windows():
    rng = np.random.default_rng(7)
    a_data, b_data = rng.normal(size=4000), rng.normal(scale=9.0, size=3000) - 2.0
    a, b = HistogramObserver(bins=64, name="x"), HistogramObserver(bins=256, name="x")
    a.update(a_data)
    b.update(b_data)
    merged = qr.merge_stats(_tiny_stats({"x": a}), _tiny_stats({"x": b}))
    (op,) = [op for op in merged.main.ops if op.name == "quant.stats"]
    assert op.attributes["quantir.bins"].value == 64   # the smaller window
    _, s = stats_ir.read(merged)
    obs = next(iter(s.observers.values()))[0]
    every = np.concatenate([a_data, b_data])
    h = obs.histogram
    assert h.width >= max(a.bin_width, b.bin_width) and math.frexp(h.width)[0] == 0.5
    assert np.array_equal(h.counts, np.histogram(every, bins=h.edges)[0])
    ah = obs.abs_histogram
    assert np.array_equal(ah.counts, np.histogram(np.abs(every), bins=ah.edges)[0])
    assert (obs.min, obs.max) == (every.min(), every.max())


_T = "tensor<1x4xf32>"
_W = "dense<[[0.5, -0.25, 0.125, 1.0], [1.0, 0.5, 0.25, -1.0], [0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 0.0, 0.0]]>"
_OUTPUT_STATS = (f'  %1 = "quant.stats"(%0) {{layerStats = dense<[-2.5, 3.0]> : tensor<2xf64>, quantir.name = "y", '
                 f'quantir.samples = 100}} : ({_T}) -> {_T}\n')
_BAD = (f'func.func @main(%x: {_T} {{quantir.name = "x"}}) -> ({_T} {{quantir.name = "y"}}) {{\n'
        f'  %s = "quant.stats"(%x) {{layerStats = dense<LAYER> : tensor<2xf64>AXIS, quantir.name = "x", '
        f'quantir.samples = 100}} : ({_T}) -> {_T}\n'
        f'  %w = arith.constant {_W} : tensor<4x4xf32>\n'
        f'  %0 = "nn.matmul"(%s, %w) : ({_T}, tensor<4x4xf32>) -> {_T}\n'
        + _OUTPUT_STATS +
        f'  return %1 : {_T}\n}}')
_PLAIN = qr.Config(method="minmax", progress=False, budget=None, bias_correction="off")


@pytest.mark.parametrize("layer, axis, message", [
    ("[0x7FF8000000000000, 1.0]", "", "layerStats holds NaN or Inf"),
    ("[2.0, 1.0]", "", "layerStats has min > max (2.0 > 1.0)"),
    ("[-1.0, 1.0]", ", axis = 1 : i64, axisStats = dense<[[-1.0, 1.0], [0.0, 2.0], [0.0, 1.0], [0.0, 1.0]]> : "
                    "tensor<4x2xf64>", "is not the min and max of its axisStats"),
])
def test_bad_statistics_name_the_op(layer, axis, message):
    module = parse_module(_BAD.replace("LAYER", layer).replace("AXIS", axis), "bad.mlir")
    with pytest.raises(CalibrationError) as e:
        qr.quantize(module, None, _PLAIN)
    assert "bad.mlir:2:8: error: 'quant.stats' op on tensor 'x'" in str(e.value) and message in str(e.value)


def test_wrong_number_of_axis_statistics_is_refused_when_parsed():
    text = _BAD.replace("LAYER", "[-1.0, 1.0]").replace(
        "AXIS", ", axis = 1 : i64, axisStats = dense<[[-1.0, 1.0], [0.0, 1.0]]> : tensor<2x2xf64>")
    with pytest.raises(VerifyError, match=r"bad.mlir:2:8: error: 'quant.stats' op axisStats must have shape \[N,2\]"):
        parse_module(text, "bad.mlir")


def test_statistics_the_config_cannot_use_are_refused():
    good = _BAD.replace("LAYER", "[-1.0, 1.0]").replace("AXIS", "")
    module = parse_module(good, "ok.mlir")
    params = qr.quantize(module, None, _PLAIN).params
    # the ranges are the stats ops' own: [-1, 1] -> scale 2/255, [-2.5, 3] -> 5.5/255
    (x,) = [v for v in params if v.name_hint == "x"]
    (y,) = [v for v in params if v.name_hint == "y"]
    assert (params[x].scale, params[y].scale) == pytest.approx((2.0 / 255, 5.5 / 255), rel=1e-6)
    no_output = parse_module(good.replace(_OUTPUT_STATS, "").replace("return %1", "return %0"), "ok.mlir")
    with pytest.raises(CalibrationError, match="no quant.stats op on 1 tensor"):
        qr.quantize(no_output, None, _PLAIN)
    with pytest.raises(CalibrationError, match="method 'entropy' needs histograms"):
        qr.quantize(module, None, qr.Config(method="entropy", progress=False, bias_correction="off"))
    with pytest.raises(CalibrationError, match="bias correction needs the sample sums"):
        qr.quantize(module, None, qr.Config(method="minmax", progress=False))
    with pytest.raises(QuantirError, match="weight_rounding='hessian' needs the samples"):
        qr.quantize(module, None, qr.Config(method="minmax", progress=False, weight_rounding="hessian"))


def test_same_scale_classes_are_coupled_and_data_replaces_the_stats(calib):
    config = qr.Config(method="minmax", progress=False, budget=None)
    stats = _round_trip(qr.calibration_stats(MODEL, {"input": calib[:64]}, config))
    direct = qr.quantize(MODEL, {"input": calib[64:]}, config)
    # the solver's classes: members of one class end with the same (scale, zero point)
    keys: dict[str, list[str]] = {}
    for op in stats.main.ops:
        if op.name == "quant.coupled_ref":
            keys.setdefault(op.attr("coupledKey"), []).append(op.operands[0].op.attributes["quantir.name"].value)
    assert keys and all(len(names) > 1 for names in keys.values())
    by_name = {v.name_hint: p for v, p in direct.params.items()}
    for names in keys.values():
        assert len({(by_name[n].scale, by_name[n].zero_point) for n in names}) == 1, names
    # statistics in the module and data given: the data's statistics, as for the float model
    again = qr.quantize(stats, {"input": calib[64:]}, config)
    assert print_module(again.module) == print_module(direct.module)
