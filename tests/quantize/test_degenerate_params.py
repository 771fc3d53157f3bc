"""Issue 11: parameters the integer kernels cannot run. Degenerate or extreme scales (a callback's
zero range, an input scale blown up by absurd weights, weights out of all proportion with a clipped
output) either get the finest parameters the kernel accepts or a typed error naming the layer and
its numbers, never a kernel ValueError at run time."""
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir as qr
from quantir.errors import CalibrationError, QuantizationWarning
from quantir.quantize.methods import Range
from quantir.quantize.solver import ActParams, WeightParams
from quantir.quantize.spec import Violation

from .tiny_models import cnn, save_model

CFG = qr.Config(progress=False, budget=None)   # int8 arithmetic: no mixed precision


def _params_of(r, name):
    return next(p for v, p in r.params.items() if getattr(v, "name_hint", None) == name)


def _run_integer(r, x):
    return qr.run(r.module, {"x": x})


# -- conv: a multiplier whose left shift overflows int32 ---------------------------------------

def _huge_weight_conv(path):
    """conv -> Clip(0, 6) with one channel of weights around 1e9 (an int32 tensor read as weights)."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 2, 3, 3)).astype(np.float32) * 0.3
    w[2] = rng.integers(-1_000_000_000, 1_000_000_000, size=(2, 3, 3)).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv/huge"),
             h.make_node("Clip", ["c", "lo", "hi"], ["y"], name="relu6")]
    return save_model(path, nodes, {"W": w, "lo": np.float32(0), "hi": np.float32(6)}, [2, 6, 6], [4, 6, 6],
                      output="y")


def test_conv_whose_requantization_overflows_int32_is_refused_naming_the_layer(tmp_path):
    model = _huge_weight_conv(tmp_path / "huge.onnx")
    x = np.random.default_rng(1).normal(size=(8, 2, 6, 6)).astype(np.float32)
    with pytest.raises(CalibrationError) as e:
        qr.quantize(model, {"x": x}, CFG)
    msg = str(e.value)
    assert msg.startswith("conv 'conv/huge': output channel 2 cannot be requantized in int32: its multiplier "
                          "input scale × weight scale / output scale = "), msg
    assert "which overflows int32 (undefined behaviour in LiteRT) for accumulators up to " in msg
    assert "out of proportion with the output range [0, 6]. Check this layer's weights, or keep it float with " \
           "--exclude 'conv/huge'" in msg
    # the remedy it names works: the layer stays float and the rest runs
    r = qr.quantize(model, {"x": x}, qr.Config(progress=False, exclude=("conv/huge",), budget=None))
    assert [op.label for op, _ in r.annotation.float_ops] == ["conv/huge"]


def test_ordinary_conv_with_a_multiplier_above_one_is_kept(tmp_path):
    """A multiplier above 1 is fine while the worst accumulator, shifted, fits int32."""
    model = _huge_weight_conv(tmp_path / "ok.onnx")
    m = onnx.load(str(model))
    w = nh.to_array(m.graph.initializer[0]).copy()
    w[2] = w[0] * 500.0   # output saturates often, multiplier a few units: representable
    m.graph.initializer[0].CopyFrom(nh.from_array(w, "W"))
    onnx.save(m, str(model))
    x = np.random.default_rng(1).normal(size=(8, 2, 6, 6)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuantizationWarning)
        r = qr.quantize(model, {"x": x}, CFG)
    w_scale = next(p for p in r.params.values() if isinstance(p, WeightParams)).scale
    assert _params_of(r, "x").scale * w_scale[2] / _params_of(r, "y").scale > 1.0
    assert np.isfinite(_run_integer(r, x[:2])["y"]).all()


# -- MEAN: an input scale 2**20 times its output's ---------------------------------------------

def test_mean_of_a_huge_input_range_gets_the_finest_output_scale_the_kernel_accepts(tmp_path):
    """+-1e7 in two positions of channel 0 cancel in its mean: input scale ~8e4, mean range ~1."""
    model = save_model(tmp_path / "gap.onnx", [h.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")], {},
                       [2, 8, 8], [2, 1, 1], output="y")
    x = np.random.default_rng(0).normal(size=(8, 2, 8, 8)).astype(np.float32)
    x[:, 0, 0, 0], x[:, 0, 0, 1] = 1e7, -1e7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuantizationWarning)
        r = qr.quantize(model, {"x": x}, CFG)
    s_in, out = _params_of(r, "x").scale, _params_of(r, "y")
    assert isinstance(out, ActParams)
    assert s_in / out.scale <= 2.0 ** 20 < s_in / ((out.rmax - min(out.rmin, 0.0)) / 255.0)
    assert out.rmax < 1.0            # rmin/rmax keep the calibrated range
    y = _run_integer(r, x[:2])["y"]  # the kernel's shift was 51 before: a ValueError
    assert y.shape == (2, 2, 1, 1) and np.isfinite(y).all()


# -- ADD: a callback's zero range ------------------------------------------------------------------

def test_zero_range_from_a_callback_on_an_add_runs_and_is_named(tmp_path):
    model = tmp_path / "cnn.onnx"
    cnn(model)
    x = np.random.default_rng(0).normal(size=(32, 1, 8, 8)).astype(np.float32)

    def collapse(info):
        return Range(0.0, 0.0) if info.region.output.name_hint == "a" else info.output_range()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = qr.quantize(model, {"x": x}, qr.Config(progress=False, callback=collapse, budget=None))
    emitted = [str(w.message) for w in caught if issubclass(w.category, QuantizationWarning)]
    assert len(emitted) == 1 and emitted[0].startswith(
        "1 activation tensor got a zero range from a calibration callback although the values vary: 'a' (output of "
        "'res') from 0 to "), emitted
    a, r1, r2 = _params_of(r, "a"), _params_of(r, "r1"), _params_of(r, "r2")
    # LiteRT's ADD needs 2·max(s1, s2) / (2**20 · s_out) < 1: the finest output scale it accepts
    assert (a.rmin, a.rmax) == (0.0, 0.0)
    assert 1.0 - 2.0 ** -8 < 2 * max(r1.scale, r2.scale) / (2 ** 20 * a.scale) < 1.0
    assert np.isfinite(_run_integer(r, x[:2])["probs"]).all()



def test_zero_range_from_a_callback_on_a_conv_gets_the_finest_scale_without_overflow(tmp_path):
    """A degenerate conv output range is widened (nothing to keep), never refused: with the finest
    scale, no channel's worst accumulator shifted left overflows int32."""
    from quantir.numerics import conv_multiplier, quantize_multipliers
    model = tmp_path / "cnn.onnx"
    cnn(model)
    x = np.random.default_rng(0).normal(size=(32, 1, 8, 8)).astype(np.float32)

    def collapse(info):
        return Range(0.0, 0.0) if info.region.output.name_hint == "r1" else info.output_range()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuantizationWarning)
        r = qr.quantize(model, {"x": x}, qr.Config(progress=False, callback=collapse, budget=None))
    out, s_in = _params_of(r, "r1"), _params_of(r, "x").scale
    w_scale = next(p for v, p in r.params.items() if isinstance(p, WeightParams) and p.scale.shape == (8,)).scale
    _, shift = quantize_multipliers(conv_multiplier(np.float32(s_in), w_scale, np.float32(out.scale)))
    assert (out.rmin, out.rmax) == (0.0, 0.0) and 10 <= shift.max() <= 14
    assert np.isfinite(_run_integer(r, x[:2])["probs"]).all()


# -- quantir check: labels from the file are escaped ----------------------------------------------

def test_violation_escapes_the_op_label():
    v = Violation("conv\nquantir check: 0 violations", "CONV_2D", "output 0", "must be int8")
    assert str(v) == "CONV_2D 'conv\\nquantir check: 0 violations' output 0: must be int8"
    assert "\n" not in str(v)
    assert str(Violation("it's", "ADD", "input 1", "x")) == "ADD 'it\\'s' input 1: x"
