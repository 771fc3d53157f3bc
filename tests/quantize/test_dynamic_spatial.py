"""Dynamic H and W (issue 14): SAME padding with stride 1 and power-of-two nearest/linear Resize
quantize on ``?x C x ? x ?`` inputs and run at any size; what cannot follow every size stays float
with its reason (never a raw error)."""
from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.ir.dialects import qnn
from quantir.numerics import resize_nearest_indices
from quantir.quantize.ops.resize import dynamic_nearest_mode, onnx_nearest_indices
from quantir.runtime import run
from quantir.verify import verify_tflite

RNG = np.random.default_rng(0)
C = 4


def _model(tmp_path, nodes, inits=(), out_c=C, opset=17) -> str:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, C, None, None])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, out_c, None, None])],
                          list(inits))
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _weights(name, shape):
    return numpy_helper.from_array(RNG.normal(size=shape).astype(np.float32) * 0.3, name)


def _quantize(path, hw=(12, 10)):
    calib = RNG.normal(size=(16, C, *hw)).astype(np.float32)
    return qr.quantize(path, {"x": calib}, qr.Config(progress=False))


def _float_reasons(r) -> dict[str, str]:
    return {op.label or op.name: why for op, why in r.annotation.float_ops}


def _ort(path_or_bytes, x):
    s = ort.InferenceSession(path_or_bytes, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def _input_q(r, x):
    """``x`` as the model's quantize op leaves it, dequantized."""
    q = next(op for op in r.module.main.ops if op.name == "quant.qcast").results[0].type.element_type
    s, z = float(q.scale), int(q.zero_point)
    return ((np.clip(np.rint(x / np.float32(s)) + z, -128, 127) - z) * np.float32(s)).astype(np.float32)


def _step(r) -> float:
    dcast = next(op for op in r.module.main.ops if op.name == "quant.dcast")
    return float(dcast.operands[0].type.element_type.scale)


def _exports_agree(r, tmp_path, sizes, exact=False):
    """The QDQ and QOperator exports run in ONNX Runtime at each size, within a step of the
    interpreter (``exact``: equal, for ops that only copy stored integers)."""
    step = _step(r)
    for fmt in ("qdq", "qoperator"):
        path = r.save(tmp_path / f"{fmt}.onnx", format=fmt)
        for hw in sizes:
            x = RNG.normal(size=(2, C, *hw)).astype(np.float32)
            ours = run(r.module, {"x": x})["y"]
            theirs = _ort(str(path), x)
            assert theirs.shape == ours.shape, (fmt, hw)
            tol = 0.0 if exact else step * 1.01
            assert np.abs(theirs - ours).max() <= tol, (fmt, hw)


# -- padding ----------------------------------------------------------------------------------------

def _verify_tflite(r, tmp_path, sizes):
    """The .tflite (dynamic H, W in its shape signatures) is bit-exact with LiteRT's reference
    kernels at each size."""
    path = r.save(tmp_path / "m.tflite")
    for hw in sizes:
        report = verify_tflite(path, {"x": RNG.normal(size=(2, C, *hw)).astype(np.float32)}, intermediates=False)
        assert report.ok, report.text()
        assert report.outputs[0].shape[2:] == run(r.module, {"x": np.zeros((1, C, *hw), np.float32)})["y"].shape[2:]


def test_same_upper_stride_one_has_fixed_pads_at_any_size(tmp_path):
    # PP-OCRv6's detectors: Conv and MaxPool, kernel 2, stride 1, auto_pad SAME_UPPER on ?x?, and a
    # one-channel head (its NCHW and NHWC forms hold the same order, with two dynamic dims)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[1, 1], auto_pad="SAME_UPPER"),
             helper.make_node("Conv", ["p", "w2"], ["y"], kernel_shape=[1, 1])]
    path = _model(tmp_path, nodes, [_weights("w", (C, C, 2, 2)), _weights("b", (C,)), _weights("w2", (1, C, 1, 1))],
                  out_c=1)
    r = _quantize(path)
    assert not r.annotation.float_ops
    conv, pool, _ = (op for op in r.module.main.ops if op.name in ("qnn.conv", "qnn.max_pool"))
    assert tuple(conv.attr("pads")) == tuple(pool.attr("pads")) == (0, 0, 1, 1)   # the odd pixel at the end
    assert r.module.main.ops[-1].operands[0].type.shape == (None, 1, None, None)
    for hw in ((12, 10), (7, 9)):
        x = RNG.normal(size=(1, C, *hw)).astype(np.float32)
        y = run(r.module, {"x": x})["y"]
        want = _ort(path, x)
        assert y.shape == want.shape
        assert np.abs(y - want).max() <= 0.1 * np.abs(want).max()   # int8 of the float function
    _exports_agree(r, tmp_path, ((12, 10), (7, 9)))
    _verify_tflite(r, tmp_path, ((12, 10), (7, 9)))


@pytest.mark.parametrize("op_type", ["Conv", "MaxPool", "AveragePool"])
def test_same_upper_with_stride_two_is_tflite_same_at_any_size(tmp_path, op_type):
    # TF-exported graphs with dynamic H, W: SAME_UPPER with a stride, whose pads follow the size
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    first = helper.make_node("Conv", ["x", "w1"], ["h"], kernel_shape=[1, 1])
    node = helper.make_node(op_type, ["h", "w"] if op_type == "Conv" else ["h"], ["y"], name="win", **attrs)
    path = _model(tmp_path, [first, node], [_weights("w1", (C, C, 1, 1)), _weights("w", (C, C, 3, 3))])
    r = _quantize(path)
    assert not r.annotation.float_ops
    (win,) = (op for op in r.module.main.ops if op.label == "win")
    assert win.attr("auto_pad") == "SAME_UPPER" and win.attr("pads") is None
    sizes = ((9, 8), (12, 7))   # odd and even: the extra pixel at the end, or none
    for hw in sizes:
        x = RNG.normal(size=(1, C, *hw)).astype(np.float32)
        out = run(r.module, {"x": x}, intermediates=["h__q"])
        y, h = out["y"], _dequantized(r, "h__q", out["h__q"])
        want = _ort(_single(path, node), h)   # the float op on the integer op's input values
        assert y.shape == want.shape == (1, C, -(-hw[0] // 2), -(-hw[1] // 2))
        if op_type == "MaxPool":
            np.testing.assert_array_equal(y, want)
        else:
            assert np.abs(y - want).max() <= 1.01 * _step(r) * (0.5 if op_type == "AveragePool" else 1.0)
    _exports_agree(r, tmp_path, sizes)
    _verify_tflite(r, tmp_path, sizes)


def _dequantized(r, name, stored):
    (v,) = (o.results[0] for o in r.module.main.ops if o.results and o.results[0].name_hint == name)
    q = v.type.element_type
    return ((stored.astype(np.float32) - q.zero_point) * np.float32(q.scale)).astype(np.float32)


def _single(path, node) -> bytes:
    """The model's last op alone, fed with its input ``h``."""
    m = onnx.load(path)
    g = helper.make_graph([m.graph.node[-1]], "one", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [i for i in m.graph.initializer if i.name == "w"])
    g.node[0].input[0] = "x"
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_same_lower_with_stride_two_on_a_dynamic_size_stays_float_with_the_reason(tmp_path):
    first = helper.make_node("Conv", ["x", "w1"], ["h"], kernel_shape=[1, 1])
    node = helper.make_node("MaxPool", ["h"], ["y"], name="win", kernel_shape=[2, 2], strides=[2, 2],
                            auto_pad="SAME_LOWER")
    r = _quantize(_model(tmp_path, [first, node], [_weights("w1", (C, C, 1, 1))]))
    why = _float_reasons(r)["win"]   # no QuantirError from the lowering: the pattern's check refuses first
    assert why.startswith("auto_pad SAME_LOWER with strides (2, 2) on the dynamic spatial size ?x? puts an odd pixel")


def test_average_pool_counting_same_padding_stays_float(tmp_path):
    first = helper.make_node("Conv", ["x", "w1"], ["h"], kernel_shape=[1, 1])
    node = helper.make_node("AveragePool", ["h"], ["y"], name="win", kernel_shape=[3, 3], strides=[2, 2],
                            auto_pad="SAME_UPPER", count_include_pad=1)
    r = _quantize(_model(tmp_path, [first, node], [_weights("w1", (C, C, 1, 1))]))
    assert _float_reasons(r)["win"].startswith("AveragePool with count_include_pad=1 and padding")


# -- Resize ----------------------------------------------------------------------------------------

def _resize_model(tmp_path, scale, mode="nearest", cmode="asymmetric", nearest_mode="floor", conv=False):
    scales = numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "scales")
    node = helper.make_node("Resize", ["h" if conv else "x", "", "scales"], ["y"], name="resize", mode=mode,
                            coordinate_transformation_mode=cmode, nearest_mode=nearest_mode)
    first = [helper.make_node("Conv", ["x", "w1"], ["h"], kernel_shape=[1, 1])] if conv else []
    return _model(tmp_path, first + [node], [scales] + [_weights("w1", (C, C, 1, 1))] * conv)


@pytest.mark.parametrize("scale,cmode,nmode", [(2.0, "asymmetric", "floor"), (4.0, "asymmetric", "floor"),
                                               (2.0, "half_pixel", "round_prefer_ceil")])
def test_nearest_resize_by_a_power_of_two_copies_stored_integers_at_any_size(tmp_path, scale, cmode, nmode):
    # PP-OCRv5 / v6 detectors, PicoDet: Resize nearest, asymmetric + floor, scales 2 and 4 on ?x?
    path = _resize_model(tmp_path, scale, cmode=cmode, nearest_mode=nmode)
    r = _quantize(path)
    assert not r.annotation.float_ops
    (op,) = (o for o in r.module.main.ops if o.opdef is qnn.RESIZE_NEAREST)
    assert tuple(op.attr("factors")) == (int(scale),) * 2 and not op.attr("sizes")
    f = int(scale)
    for hw in ((12, 10), (5, 7)):
        x = RNG.normal(size=(1, C, *hw)).astype(np.float32)
        y = run(r.module, {"x": x})["y"]
        # the integer op copies what the quantize step produced: y is the input's dequantized
        # values, each repeated f x f (the float op's pixels, the input's one rounding)
        x_q = y[:, :, ::f, ::f]
        np.testing.assert_array_equal(y, np.repeat(np.repeat(x_q, f, axis=2), f, axis=3))
        np.testing.assert_allclose(x_q, _input_q(r, x), atol=1e-6)
        np.testing.assert_array_equal(_ort(path, x_q), y)   # the float model on those values
    if scale == 2.0:   # (the exports do not depend on the factor)
        _exports_agree(r, tmp_path, ((12, 10), (5, 7)), exact=True)
        _verify_tflite(r, tmp_path, ((12, 10), (5, 7)))   # size = SHAPE → STRIDED_SLICE → MUL, read back as factors


def test_nearest_resize_by_three_on_dynamic_sizes_stays_float(tmp_path):
    r = _quantize(_resize_model(tmp_path, 3.0, conv=True))
    why = _float_reasons(r)["resize"]
    assert "only power-of-two integer factors" in why


def test_linear_resize_by_two_on_dynamic_sizes(tmp_path):
    path = _resize_model(tmp_path, 2.0, mode="linear", cmode="half_pixel")
    r = _quantize(path)
    assert not r.annotation.float_ops
    for hw in ((12, 10), (5, 7)):
        x = RNG.normal(size=(1, C, *hw)).astype(np.float32)
        y = run(r.module, {"x": x})["y"]
        want = _ort(path, _input_q(r, x))   # the float op on the integer op's input values
        assert y.shape == want.shape
        assert np.abs(y - want).max() <= 1.01 * _step(r)   # LiteRT's fixed-point weights and rounding
    _exports_agree(r, tmp_path, ((12, 10), (5, 7)))
    _verify_tflite(r, tmp_path, ((12, 10), (5, 7)))


MODES = [(c, n) for c in ("asymmetric", "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners")
         for n in ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil")]


@pytest.mark.parametrize("cmode,nmode", MODES)
def test_the_dynamic_nearest_proof_holds_at_every_size(cmode, nmode):
    """What ``dynamic_nearest_mode`` claims from sizes 1-3 holds, index for index, at sizes 1-200."""
    for f in (1, 2, 4, 8):
        found = dynamic_nearest_mode((None, C, None, None), (None, C, None, None), [1.0, 1.0, f, f], cmode, nmode)
        if isinstance(found, str):
            continue
        for n in range(1, 201):
            onnx_idx = onnx_nearest_indices(n, n * f, float(f), cmode, nmode)
            litert = resize_nearest_indices(n, n * f, align_corners=found[0], half_pixel_centers=found[1])
            assert np.array_equal(onnx_idx, litert), (f, n)


def test_the_modes_real_exporters_write_are_proven():
    for (cmode, nmode), f in itertools.product([("asymmetric", "floor"), ("half_pixel", "round_prefer_ceil")], (2, 4)):
        found = dynamic_nearest_mode((None, C, None, None), (None, C, None, None), [1.0, 1.0, f, f], cmode, nmode)
        assert found == ((False, False) if cmode == "asymmetric" else (False, True))


def test_nearest_resize_to_fixed_sizes_from_dynamic_sizes_stays_float(tmp_path):
    sizes = numpy_helper.from_array(np.array([16, 16], np.int64), "sizes")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], kernel_shape=[1, 1]),
             helper.make_node("Resize", ["h", "", "", "sizes"], ["y"], name="resize", mode="nearest", axes=[2, 3])]
    r = _quantize(_model(tmp_path, nodes, [sizes, _weights("w1", (C, C, 1, 1))], opset=18))
    assert _float_reasons(r)["resize"] == (
        "Resize to given sizes from dynamic spatial sizes (input ?x4x?x?, output ?x4x16x16): its scale follows the "
        "input size; quantized on dynamic sizes only with constant scales")
