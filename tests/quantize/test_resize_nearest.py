"""Resize nearest becomes LiteRT's RESIZE_NEAREST_NEIGHBOR exactly where it copies the same pixels.

LiteRT picks source pixels with its own float32 formula; ONNX with its coordinate and
nearest modes. The quantizer compares both index arrays at the model's static sizes, so a
quantized Resize moves the very integers the float op would move, and one that would not stays
float with the first output index where the two disagree."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir as qr
from quantir.ir import Block
from quantir.ir.dialects import nn, qnn
from quantir.ir.dialects.nn_index import resize_plan
from quantir.quantize.patterns import onnx_nearest_indices
from quantir.runtime import run
from quantir.runtime.kernels.resize import resize as float_resize
from quantir.types import FloatType, TensorType

CFG = qr.Config(progress=False)


def conv_resize_conv(in_hw=(8, 8), *, scales=None, hw_sizes=None, mode="nearest", cmode="asymmetric",
                     nearest_mode="floor", dynamic_hw=False, seed=0) -> onnx.ModelProto:
    """Conv → Resize → Conv, as PyTorch exports ``nn.Upsample(scale_factor=2)`` between convs.
    ``hw_sizes`` are output sizes of H and W (opset 18 ``axes``: the batch stays dynamic)."""
    rng = np.random.default_rng(seed)
    c_up = 4 * int(scales[1]) if scales is not None else 4
    arrays = {"W1": rng.normal(size=(4, 3, 3, 3)).astype(np.float32) * 0.3,
              "B1": rng.normal(size=4).astype(np.float32) * 0.1,
              "W2": rng.normal(size=(2, c_up, 3, 3)).astype(np.float32) * 0.3,
              "roi": np.zeros(0, np.float32)}
    inputs, extra = ["c1", "roi"], {}
    if scales is not None:
        arrays["scales"] = np.asarray(scales, np.float32)
        inputs.append("scales")
    else:
        arrays["sizes"] = np.asarray(hw_sizes, np.int64)
        inputs += ["", "sizes"]
        extra["axes"] = [2, 3]
    nodes = [h.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("Resize", inputs, ["up"], mode=mode, coordinate_transformation_mode=cmode,
                         nearest_mode=nearest_mode, name="upsample", **extra),
             h.make_node("Conv", ["up", "W2"], ["y"], pads=[1, 1, 1, 1], name="conv2")]
    hw = ["H", "W"] if dynamic_hw else list(in_hw)
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["N", 3, *hw])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)],
                     [nh.from_array(a, n) for n, a in arrays.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def calibration(in_hw=(8, 8), n=24, seed=1):
    return {"x": np.random.default_rng(seed).normal(size=(n, 3, *in_hw)).astype(np.float32)}


def float_reasons(result) -> dict:
    return {op.label: why for op, why in result.annotation.float_ops}


def test_pytorch_nearest_upsample_is_quantized_end_to_end():
    model = conv_resize_conv(scales=[1, 1, 2, 2])
    r = qr.quantize(model, calibration(), CFG)
    assert r.cast_counts() == (1, 1)
    assert r.annotation.float_ops == []
    assert r.spec_report().ok, [str(v) for v in r.spec_report().violations]
    assert r.quantized_ops()["resize_nearest"] == 1 and "resize" not in r.quantized_ops()
    (op,) = [op for op in r.module.main.ops if op.opdef is qnn.RESIZE_NEAREST]
    assert tuple(op.attr("sizes")) == (16, 16)
    assert (op.attr("align_corners"), op.attr("half_pixel_centers")) == (False, False)
    assert op.operands[0].type.element_type == op.results[0].type.element_type   # one scale, one zero point
    x = calibration(n=16, seed=2)
    got = run(r.module, x)["y"]
    want = run(r.float_function, x)["y"]
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()
    # the integer op copies its input's integers 2x2
    q = run(r.module, x, intermediates=[op.operands[0].name_hint, op.results[0].name_hint])
    src, dst = q[op.operands[0].name_hint], q[op.results[0].name_hint]
    np.testing.assert_array_equal(dst, src.repeat(2, axis=2).repeat(2, axis=3))


@pytest.mark.parametrize("cmode,nearest_mode,hw_sizes,flags", [
    ("half_pixel", "round_prefer_ceil", (13, 20), (False, True)),
    ("align_corners", "round_prefer_ceil", (13, 20), (True, False)),
    ("asymmetric", "floor", (5, 20), (False, False)),
    ("asymmetric", "round_prefer_floor", (16, 16), (False, False)),   # at 2x upsampling the same pixels as floor
    ("half_pixel", "round_prefer_floor", (16, 4), (False, False)),    # ONNX's defaults: so are these
])
def test_modes_map_onto_litert_modes(cmode, nearest_mode, hw_sizes, flags):
    r = qr.quantize(conv_resize_conv(hw_sizes=hw_sizes, cmode=cmode, nearest_mode=nearest_mode), calibration(), CFG)
    assert r.annotation.float_ops == [] and r.cast_counts() == (1, 1)
    (op,) = [op for op in r.module.main.ops if op.opdef is qnn.RESIZE_NEAREST]
    assert (op.attr("align_corners"), op.attr("half_pixel_centers")) == flags


def test_a_size_where_litert_copies_other_pixels_stays_float():
    """26 -> 22 rows, asymmetric floor: output row 11 reads row 11·26/22 = 13, LiteRT's float32
    26/22 makes it 12.999999, row 12; no other LiteRT mode copies the same rows either."""
    r = qr.quantize(conv_resize_conv((26, 4), hw_sizes=[22, 4]), calibration((26, 4)), CFG)
    assert float_reasons(r)["upsample"] == (
        "Resize nearest (asymmetric, floor) from 26x4 to 22x4 copies input row 13 to output row 11, LiteRT "
        "RESIZE_NEAREST_NEIGHBOR (default) copies row 12; no LiteRT mode copies the same pixels")
    assert r.cast_counts() == (2, 2) and r.spec_report().ok


def test_cubic_and_dynamic_sizes_stay_float_with_reasons():
    r = qr.quantize(conv_resize_conv(scales=[1, 1, 2, 2], mode="cubic", cmode="half_pixel"), calibration(), CFG)
    assert float_reasons(r)["upsample"] == "Resize mode 'cubic' is not quantized (only nearest and linear)"
    # (dynamic sizes by 2x are quantized since issue 14: tests/quantize/test_dynamic_spatial.py; 3x is not)
    r = qr.quantize(conv_resize_conv(scales=[1, 1, 3, 3], dynamic_hw=True), calibration(), CFG)
    assert float_reasons(r)["upsample"] == ("Resize with scales (3.0, 3.0) on the dynamic spatial sizes of ?x4x?x?: "
                                            "only power-of-two integer factors (1, 2, 4, ...) map pixels like "
                                            "LiteRT at every size")


def test_channels_are_never_resized():
    r = qr.quantize(conv_resize_conv(scales=[1, 2, 1, 1]), calibration(), CFG)
    assert float_reasons(r)["upsample"] == "only H and W may be resized (input ?x4x8x8, output ?x8x8x8)"


@pytest.mark.parametrize("cmode", ["half_pixel", "pytorch_half_pixel", "half_pixel_symmetric", "align_corners",
                                   "asymmetric"])
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_onnx_indices_are_the_float_kernels(cmode, nearest_mode):
    """The quantizer's ONNX indices (it may not import the runtime) against quantir's float kernel."""
    for n_in, how in [(5, {"sizes": (1, 1, 1, 1)}), (5, {"sizes": (1, 1, 3, 1)}), (4, {"sizes": (1, 1, 11, 1)}),
                      (3, {"scales": (1.0, 1.0, 1.5, 1.0)}), (7, {"scales": (1.0, 1.0, 0.6, 1.0)}),
                      (6, {"scales": (1.0, 1.0, 1.0, 1.0)}), (8, {"scales": (1.0, 1.0, 2.0, 1.0)})]:
        x = Block([TensorType((1, 1, n_in, 1), FloatType("f32"))]).arguments[0]
        op = nn.RESIZE.build([x], None, mode="nearest", coordinate_transformation_mode=cmode,
                             nearest_mode=nearest_mode, **how)
        n_out = op.results[0].type.shape[2]
        scale = resize_plan(x.type.shape, nn.RESIZE.attr_values(op))[1][2]   # a float32 scale, as the kernel's
        want = float_resize(op, np.arange(n_in, dtype=np.float32).reshape(1, 1, n_in, 1)).reshape(-1)
        np.testing.assert_array_equal(onnx_nearest_indices(n_in, n_out, scale, cmode, nearest_mode), want,
                                      err_msg=f"{n_in} -> {n_out} ({how})")


def test_qdq_export_is_checked_as_resize_nearest_neighbor(tmp_path):
    from quantir.frontends.onnx import load_onnx
    from quantir.quantize.check_qdq import views
    r = qr.quantize(conv_resize_conv(scales=[1, 1, 2, 2]), calibration(), CFG)
    r.save(tmp_path / "q.onnx", format="qdq")
    ops = views(load_onnx(tmp_path / "q.onnx", optimize=False, keep_qdq=True))
    (resize,) = [v for v in ops if v.name == "upsample"]
    assert resize.kind == "RESIZE_NEAREST_NEIGHBOR"
    assert resize.inputs[0].scale == resize.outputs[0].scale


def test_empty_and_absurd_spatial_sizes_stay_float_with_reasons():
    """Found by fuzz_models: a size of 0 raised ValueError and 2.7e12 rows tried to allocate
    20 TiB of indices before calibration; both are no image, and the pattern says so."""
    from quantir.quantize.config import Config
    from quantir.quantize.patterns import annotate

    for sizes, shown in (([0, 4], "8x8 to 0x4"), ([2**40, 4], f"8x8 to {2**40}x4")):
        model = conv_resize_conv(hw_sizes=sizes)
        del model.graph.node[-1]                    # no conv after it: end the graph at the resize
        model.graph.output[0].name = "up"
        fn = qr.load(model).main
        reasons = {op.label: why for op, why in annotate(fn, Config()).float_ops}
        assert reasons["upsample"] == (f"Resize nearest from {shown}: spatial sizes must be in [1, 16777216] to "
                                       "be compared with LiteRT's index rule")
