"""Bias correction: the expected conv output from per-position means, and the mean error it removes."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir as qr
from quantir.quantize.calibrate import ensure_names
from quantir.quantize.patterns import annotate
from quantir.quantize.solver import WeightParams, expected_taps, mean_output
from quantir.runtime import run


def single_op_model(path, node, weights, in_shape, out_name="y"):
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", TP.FLOAT, ["N", *in_shape])],
                     [h.make_tensor_value_info(out_name, TP.FLOAT, None)],
                     [nh.from_array(np.asarray(a), n) for n, a in weights.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


CONVS = {
    "strided, asymmetric pads": (dict(strides=[2, 2], pads=[1, 0, 2, 1]), (6, 4, 3, 3), 1),
    "dilated depthwise": (dict(pads=[2, 2, 2, 2], dilations=[2, 2], group=4), (4, 1, 3, 3), 4),
    "same_upper 5x5 depthwise, stride 2": (dict(auto_pad="SAME_UPPER", strides=[2, 2], group=4), (4, 1, 5, 5), 4),
    "grouped 1x1": (dict(group=2), (6, 2, 1, 1), 2),
}


@pytest.mark.parametrize("name", list(CONVS))
def test_mean_output_from_expected_taps_is_exact(tmp_path, name):
    attrs, w_shape, _ = CONVS[name]
    rng = np.random.default_rng(1)
    w = rng.normal(size=w_shape).astype(np.float32)
    path = single_op_model(tmp_path / "conv.onnx", h.make_node("Conv", ["x", "W"], ["y"], name="conv", **attrs),
                           {"W": w}, [4, 9, 7])
    x = (rng.normal(size=(16, 4, 9, 7)) + np.linspace(-2, 3, 9)[:, None]).astype(np.float32)  # position-dependent mean
    fn = qr.load(path).main
    ensure_names(fn)
    (region,) = annotate(fn, qr.Config()).regions
    y = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = mean_output(region, w, expected_taps(region, x.astype(np.float64).mean(axis=0)))
    np.testing.assert_allclose(got, y.astype(np.float64).mean(axis=(0, 2, 3)), rtol=1e-5, atol=1e-5)


def test_mean_output_of_a_gemm_uses_its_transposition_and_alpha(tmp_path):
    rng = np.random.default_rng(2)
    w = rng.normal(size=(5, 3)).astype(np.float32)       # transB=0: (K, C_out)
    path = single_op_model(tmp_path / "fc.onnx", h.make_node("Gemm", ["x", "W"], ["y"], alpha=0.5, name="fc"),
                           {"W": w}, [5])
    x = (rng.normal(size=(64, 5)) + 1.0).astype(np.float32)
    fn = qr.load(path).main
    ensure_names(fn)
    (region,) = annotate(fn, qr.Config()).regions
    from quantir.quantize.solver import region_weights
    w_eff, _ = region_weights(region)
    assert w_eff.shape == (3, 5)
    got = mean_output(region, w_eff, expected_taps(region, x.mean(axis=0)))
    np.testing.assert_allclose(got, (0.5 * x @ w).mean(axis=0), rtol=1e-5)


@pytest.fixture(scope="module")
def depthwise(tmp_path_factory):
    """A depthwise conv with few, coarse weights on inputs with a large mean: weight rounding
    shifts every channel's mean output (what bias correction is for)."""
    rng = np.random.default_rng(3)
    w = (rng.normal(size=(16, 1, 3, 3)) * 0.05).astype(np.float32)
    w[:, 0, 0, 0] = 1.0                                   # one large weight per channel: a coarse scale
    b = rng.normal(size=16).astype(np.float32) * 0.1
    path = single_op_model(tmp_path_factory.mktemp("dw") / "dw.onnx",
                           h.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1], group=16, name="dw"),
                           {"W": w, "B": b}, [16, 6, 6])
    x = (rng.normal(size=(64, 16, 6, 6)) * 0.5 + rng.uniform(1, 3, size=(16, 1, 1))).astype(np.float32)
    return path, x


def mean_error_in_steps(path, x, bias_correction):
    r = qr.quantize(path, {"x": x}, qr.Config(progress=False, bias_correction=bias_correction))
    kept = np.concatenate([b["x"] for b in r.statistics.kept])
    ref = run(r.float_function, {"x": kept})["y"]
    got = run(r.module, {"x": kept})["y"]
    return (got - ref).mean(axis=(0, 2, 3)) / r.params[r.float_function.outputs[0]].scale, r


def test_bias_correction_removes_the_mean_error_of_a_depthwise_conv(depthwise):
    path, x = depthwise
    off, _ = mean_error_in_steps(path, x, "off")
    weights, r = mean_error_in_steps(path, x, "weights")
    empirical, _ = mean_error_in_steps(path, x, "empirical")
    # measured: at most 0.87 output steps off, 0.03 corrected either way
    assert np.abs(off).max() > 0.5                        # rounding the weights shifts the means
    assert np.abs(weights).max() < 0.1
    assert np.abs(empirical).max() < 0.1
    (wp,) = [p for p in r.params.values() if isinstance(p, WeightParams)]
    assert wp.correction.shape == (16,) and wp.bias.dtype == np.float32


def test_sample_mean_observer_streams_exactly_and_refuses_bad_batches():
    from quantir.errors import CalibrationError
    from quantir.quantize.observers import SampleMeanObserver
    rng = np.random.default_rng(4)
    x = rng.normal(size=(50, 3, 4)).astype(np.float32)
    obs = SampleMeanObserver(name="t")
    for i in range(0, 50, 16):
        obs.update(x[i:i + 16])
    obs.update(x[:0])                                      # an empty batch changes nothing
    np.testing.assert_allclose(obs.mean, x.astype(np.float64).mean(axis=0), rtol=1e-5)   # float32 batch sums
    assert obs.num_samples == 50 and obs.num_batches == 5
    bad = x[:2].copy()
    bad[1, 0, 0] = np.nan
    with pytest.raises(CalibrationError, match="1 NaN"):
        obs.update(bad)
    with pytest.raises(CalibrationError, match="sample shape"):
        obs.update(x[:, :2])
    big = np.full((4, 2), 3e38, np.float32)               # finite values whose float32 sum overflows
    other = SampleMeanObserver()
    other.update(big)
    np.testing.assert_allclose(other.mean, 3e38, rtol=1e-6)
    assert obs.num_samples == 50
