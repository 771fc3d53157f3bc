"""Values the solver saturates on purpose (a conv output read only by hard-swish is cut at -3, where
hard-swish is 0 whatever lies below): the per-layer errors and the mixed-precision ranking measure
them within the interval their readers tell apart, not against the discarded tail."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir as qr
from quantir.quantize import precision as pr
from quantir.quantize.solver import told_apart


def _conv_hard_swish(directory, b1=(-20.0, -10.0, 0.0, 1.0)):
    rng = np.random.default_rng(0)
    w1 = np.array([8.0, 6.0, 1.0, 0.5], np.float32).reshape(4, 1, 1, 1)
    b1 = np.array(b1, np.float32)
    w2 = rng.normal(size=(2, 4, 1, 1)).astype(np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "W1", "B1"], ["c"], name="conv"),
                      h.make_node("HardSwish", ["c"], ["s"], name="hswish"),
                      h.make_node("Conv", ["s", "W2"], ["y"], name="head")], "g",
                     [h.make_tensor_value_info("x", TP.FLOAT, ["N", 1, 6, 6])],
                     [h.make_tensor_value_info("y", TP.FLOAT, ["N", 2, 6, 6])],
                     [nh.from_array(w1, "W1"), nh.from_array(b1, "B1"), nh.from_array(w2, "W2")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = directory / "m.onnx"
    onnx.save(m, str(path))
    x = rng.uniform(-2.5, 2.5, size=(32, 1, 6, 6)).astype(np.float32)
    return path, x


@pytest.fixture(scope="module")
def conv_hard_swish(tmp_path_factory):
    """x -> conv (4 channels, outputs from about -40 to +6) -> hard-swish -> conv -> y."""
    return _conv_hard_swish(tmp_path_factory.mktemp("told"))


def test_a_conv_read_by_hard_swish_is_told_apart_above_minus_three(conv_hard_swish):
    path, x = conv_hard_swish
    result = qr.quantize(path, {"x": x}, qr.Config(progress=False, budget=None))
    bounds = told_apart(result.annotation)
    conv_out = next(r.output.name_hint for r in result.annotation.regions if r.label == "conv")
    assert bounds == {conv_out: (-3.0, np.inf)}   # the hard-swish output feeds a conv: all of it matters
    assert result.params[next(r.output for r in result.annotation.regions if r.label == "conv")].rmin == -3.0


def test_layer_error_of_a_saturated_conv_is_its_error_where_hard_swish_looks(conv_hard_swish):
    path, x = conv_hard_swish
    result = qr.quantize(path, {"x": x}, qr.Config(progress=False, budget=None))
    errors = {e.name: e for e in result.layer_errors()}
    # the float conv output: a large part of it lies below -3, which the int8 tensor saturates
    w1 = np.array([8.0, 6.0, 1.0, 0.5]).reshape(1, 4, 1, 1)
    b1 = np.array([-20.0, -10.0, 0.0, 1.0]).reshape(1, 4, 1, 1)
    c = w1 * x.astype(np.float64) + b1   # the 1x1 conv of one input channel
    tail = np.minimum(c + 3.0, 0.0)   # what saturation at -3 alone loses
    assert 10 * np.log10(np.sum(c * c) / np.sum(tail * tail)) < 8   # the tail's error would dominate
    # within [-3, inf) the int8 conv is as good as int8 rounding of that interval gets
    assert errors["conv"].sqnr_db > 25, errors["conv"]
    assert errors["conv"].sqnr_db > errors["hswish"].sqnr_db - 6


def test_rounding_powers_clip_to_the_told_apart_interval():
    rng = np.random.default_rng(1)
    x = rng.normal(-2.0, 4.0, size=4096)
    scale, zp = 9.0 / 255, -128 + round(3.0 / (9.0 / 255))
    param = (scale, zp, -3.0, 6.0)
    clipped = pr.rounding_powers(np.clip(x, -3.0, np.inf), param)
    assert np.array_equal(pr.rounding_powers(x, param, (-3.0, np.inf)), clipped)
    # without the interval the discarded tail counts as int8 noise, and the ranking would put the value first
    s8, n8, _, _ = pr.rounding_powers(x, param)
    assert n8 > 10 * clipped[1]


def test_an_int16_conv_read_by_hard_swish_is_compared_within_the_interval_on_both_sides(tmp_path):
    """An int16 tensor is symmetric: a conv output reaching +40 holds [-40, 40], so its integer
    values below -3 are not saturated though the solver cuts its range at -3. Compared within
    [-3, inf) on both sides (the float side alone clipped measured that kept tail as error: PP-OCRv5
    rec's hard-swish inputs came out its worst layers, at 0.8-5 dB)."""
    path, x = _conv_hard_swish(tmp_path, b1=(-20.0, -10.0, 0.0, 40.0))
    result = qr.quantize(path, {"x": x}, qr.Config(progress=False, budget=None, activations="int16"))
    p = result.params[next(r.output for r in result.annotation.regions if r.label == "conv")]
    assert p.bits == 16 and p.rmin == -3.0 and p.zero_point == 0 and p.scale * 32768 > 30   # holds the tail
    errors = {e.name: e for e in result.layer_errors()}
    assert errors["conv"].sqnr_db > 60, errors["conv"]        # int16 rounding within [-3, inf)
    assert errors["conv"].sqnr_db > errors["hswish"].sqnr_db - 6
