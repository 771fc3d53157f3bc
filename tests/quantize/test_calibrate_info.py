"""CalibrationInfo's quantized inputs and outputs are the integer graph's values (the RFC's use case)."""
import doctest

import numpy as np
import pytest

import quantir as qr
from quantir.errors import CalibrationError
from quantir.quantize import calibrate as calibrate_module
from quantir.quantize.calibrate import CalibrationInfo
from quantir.quantize.methods import Range
from quantir.quantize.solver import ActParams, WeightParams
from quantir.runtime import run

from .tiny_models import cnn


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "cnn.onnx"
    rng = cnn(path)
    return path, rng.normal(size=(80, 1, 8, 8)).astype(np.float32)


def recording(seen: dict):
    """A callback that keeps what it saw and returns the default range."""
    def callback(info: CalibrationInfo) -> Range:
        r = info.output_range()
        seen[info.region.output.name_hint] = (info.quantized_inputs(), info.quantized_output(r),
                                              info.input_params(), [v.name_hint for v in info.region.inputs])
        return r
    return callback


def kept_feeds(result) -> dict:
    kept = result.statistics.kept
    return {k: np.concatenate([b[k] for b in kept]) for k in kept[0]}


def dequantized(result, names, feeds) -> dict:
    got = run(result.module, feeds, intermediates=[f"{n}__q" for n in names])
    by_name = {v.name_hint: v for v in result.params if isinstance(result.params[v], ActParams)}
    out = {}
    for n in names:
        p = result.params[by_name[n]]
        out[n] = np.float32(p.scale) * (got[f"{n}__q"].astype(np.float32) - p.zero_point)
    return out


@pytest.mark.parametrize("bias_correction", ["off", "weights", "empirical"])
def test_quantized_outputs_equal_the_final_integer_module(model, bias_correction):
    path, calib = model
    seen: dict = {}
    r = qr.quantize(path, {"x": calib}, qr.Config(progress=False, callback=recording(seen),
                                                  bias_correction=bias_correction))
    assert r.spec_report().ok and r.cast_counts() == (1, 1)
    feeds = kept_feeds(r)
    assert next(iter(feeds.values())).shape[0] == 32           # the kept samples, not all 80
    final = dequantized(r, list(seen), feeds)
    for name, (inputs, output, _, _) in seen.items():
        # bit-identical: the same lowering, the same kernels, the same parameters and biases
        np.testing.assert_array_equal(output, final[name], err_msg=name)
    # a layer's quantized inputs are its producer's integer outputs (dw conv reads relu1's output r1)
    inputs, _, params, input_names = seen["r2"]
    assert input_names == ["r1"]
    np.testing.assert_array_equal(inputs[0], final["r1"])
    assert params[0] == r.params[next(v for v in r.params if v.name_hint == "r1")]


@pytest.mark.parametrize("config", [{}, {"exclude": ("nn.hard_swish",)}, {"method": "percentile"}],
                         ids=["default", "float ops inside", "percentile"])
def test_quantized_outputs_equal_the_final_module_through_concat_and_float_ops(repo_root, config):
    """The Fashion-MNIST CNN: a concatenation (a same-scale class whose members are decided one
    by one), HardSwish, residual adds; excluding HardSwish puts float ops between regions."""
    path = repo_root / "models" / "fashion_mnist_cnn.onnx"
    x = np.random.default_rng(0).normal(size=(48, 1, 28, 28)).astype(np.float32)
    seen: dict = {}
    r = qr.quantize(path, {"input": x}, qr.Config(progress=False, callback=recording(seen), **config))
    final = dequantized(r, list(seen), kept_feeds(r))
    assert len(seen) == len(r.annotation.regions)
    for name, (_, output, _, _) in seen.items():
        np.testing.assert_array_equal(output, final[name], err_msg=name)


def test_quantized_inputs_of_the_first_layer_are_the_quantized_model_input(model):
    path, calib = model
    seen: dict = {}
    r = qr.quantize(path, {"x": calib}, qr.Config(progress=False, callback=recording(seen)))
    (x_q,), _, (p,), _ = seen["r1"]
    x = kept_feeds(r)["x"]
    expected = np.float32(p.scale) * (np.clip(np.round(x / np.float32(p.scale)) + p.zero_point, -128, 127)
                                      - p.zero_point).astype(np.float32)
    np.testing.assert_allclose(x_q, expected, atol=1e-6)
    assert np.abs(x_q - x).max() <= p.scale / 2 + 1e-6   # minmax: nothing is clipped


def test_quantized_output_follows_the_candidate_range(model):
    path, calib = model
    outputs = {}

    def callback(info):
        r = info.output_range()
        if info.region.output.name_hint == "a":   # the residual add (c3 would share the max pool's class)
            outputs["full"] = info.quantized_output(r)
            outputs["half"] = info.quantized_output(Range(r.rmin / 2, r.rmax / 2))
            outputs["float"] = info.float_output()
            outputs["range"] = r
        return r
    qr.quantize(path, {"x": calib}, qr.Config(progress=False, callback=callback))
    full, half, ref, r = outputs["full"], outputs["half"], outputs["float"], outputs["range"]
    step = (r.rmax - r.rmin) / 255
    assert r.rmin - step <= full.min() and full.max() <= r.rmax + step
    assert r.rmin / 2 - step <= half.min() and half.max() <= r.rmax / 2 + step   # clipped to the candidate
    assert np.sum(np.abs(ref) > np.abs(half) + step) > 100                         # (0.8% of them here)
    assert np.abs(full - ref).mean() < np.abs(half - ref).mean()                   # and worse for it


def test_callback_choosing_on_integer_outputs_gives_a_clean_model(model):
    path, calib = model
    chosen = []

    def best_of_clipped(info):
        ref, full = info.float_output(), info.output_range()
        candidates = [Range(full.rmin * f, full.rmax * f) for f in (1.0, 0.9, 0.8, 0.6)]
        err = [np.mean((info.quantized_output(c) - ref) ** 2) for c in candidates]
        chosen.append(int(np.argmin(err)))
        return candidates[chosen[-1]]
    r = qr.quantize(path, {"x": calib}, qr.Config(progress=False, callback=best_of_clipped))
    assert r.spec_report().ok and r.cast_counts() == (1, 1)
    assert len(chosen) == len(r.annotation.regions)


def test_quantized_values_need_the_solver(model):
    path, calib = model
    r = qr.quantize(path, {"x": calib}, qr.Config(progress=False))
    info = CalibrationInfo(r.annotation.regions[0], r.statistics, r.config, r.float_function)
    assert info.float_output().shape[0] == 32
    with pytest.raises(CalibrationError, match="integer trace"):
        info.quantized_output()


def test_weight_params_are_in_the_result(model):
    path, calib = model
    r = qr.quantize(path, {"x": calib}, qr.Config(progress=False))
    weights = [p for p in r.params.values() if isinstance(p, WeightParams)]
    assert len(weights) == 4                                     # conv1, dw, pw, fc
    assert all(p.correction is not None and p.correction.shape == p.scale.shape for p in weights)
    off = qr.quantize(path, {"x": calib}, qr.Config(progress=False, bias_correction="off"))
    assert all(p.correction is None for p in off.params.values() if isinstance(p, WeightParams))


def test_docstring_example_runs():
    assert doctest.testmod(calibrate_module).failed == 0
