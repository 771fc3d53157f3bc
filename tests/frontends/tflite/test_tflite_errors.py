"""What the TFLite frontend refuses, and how; what it imports although the spec forbids it (for
``quantir check``); names, bindings and the import boundary. Needs no LiteRT."""
import subprocess
import sys

import numpy as np
import pytest

from .tfl_graph import OP, Graph
from quantir.backends.tflite import (ActivationFunctionType, Conv2DOptions, FullyConnectedOptions, Padding,
                                     Pool2DOptions, SoftmaxOptions, read_model)
from quantir.errors import ModelFormatError, UnsupportedOpError
from quantir.frontends.tflite import SUPPORTED_OPS, import_tflite, load_tflite
from quantir.quantize.check import check_module


def _conv_model(x_scale=0.05, w_zp=0, bias_scales=None, out_shape=(1, 4, 4, 2), weights_const=True,
                dtype=np.int8, act=ActivationFunctionType.NONE) -> bytes:
    rng = np.random.default_rng(0)
    g = Graph()
    quantized = dtype == np.int8
    x = g.input("x", (1, 4, 4, 3), x_scale if quantized else None, 0, dtype=dtype)
    w_scales = np.array([0.01, 0.02], np.float32)
    w_data = rng.integers(-127, 128, (2, 3, 3, 3)).astype(dtype)
    if weights_const:
        w = g.const("filter", w_data, w_scales if quantized else None, w_zp)
    else:
        w = g.act("filter", w_data.shape, w_scales, w_zp)
    bias_scales = (np.float32(x_scale) * w_scales) if bias_scales is None else bias_scales
    b = g.const("bias", np.array([10, -10], np.int32 if quantized else np.float32),
                bias_scales if quantized else None)
    y = g.act("conv_out", out_shape, 0.1 if quantized else None, 0, dtype=dtype)
    g.op(OP.CONV_2D, [x, w, b], [y], Conv2DOptions(padding=Padding.SAME, fused_activation_function=act))
    return g.finish([y])


# -- corrupt files: the reader's ModelFormatError --------------------------------------------------

@pytest.mark.parametrize("damage", ["truncated", "identifier", "random", "empty"])
def test_corrupt_bytes_raise_model_format_error(damage):
    data = _conv_model()
    bad = {"truncated": data[: len(data) // 2], "identifier": data[:4] + b"XXXX" + data[8:],
           "random": np.random.default_rng(1).integers(0, 256, 600).astype(np.uint8).tobytes(), "empty": b""}[damage]
    with pytest.raises(ModelFormatError):
        import_tflite(bad)


def test_unreadable_path_raises_model_format_error(tmp_path):
    with pytest.raises(ModelFormatError, match="cannot read"):
        load_tflite(tmp_path / "missing.tflite")


# -- unsupported: float compute ops, unknown ops -------------------------------------------------------

def test_float_op_without_a_float_converter_is_unsupported_with_a_hint():
    # (a float CONV_2D was the example until quantir read float32 ops: tests/frontends/tflite/test_tflite_float.py)
    g = Graph()
    x = g.input("x", (1, 4, 4, 3), dtype=np.float32)
    y = g.act("y", (1, 2, 2, 3), dtype=np.float32)
    g.op(OP.L2_POOL_2D, [x], [y], Pool2DOptions(padding=Padding.VALID, stride_w=2, stride_h=2, filter_width=2,
                                                filter_height=2))
    with pytest.raises(UnsupportedOpError, match=r"L2_POOL_2D -> 'y'.*float L2_POOL_2D.*ONNX"):
        import_tflite(g.finish([y]))


def test_float16_conv_is_unsupported():
    with pytest.raises(UnsupportedOpError, match=r"'x'.*FLOAT16"):
        import_tflite(_conv_model(dtype=np.float16))


def test_unknown_op_names_the_op_and_its_output():
    g = Graph()
    x = g.input("x", (2, 3), 0.1)
    y = g.act("y", (3, 3), 0.1)
    g.op(OP.L2_POOL_2D, [x], [y])   # (GATHER was the example until quantir read it)
    with pytest.raises(UnsupportedOpError, match=r"operator 0 \(L2_POOL_2D -> 'y'\): op L2_POOL_2D is not supported"):
        import_tflite(g.finish([y]))


def test_fused_tanh_activation_is_unsupported():
    with pytest.raises(UnsupportedOpError, match="fused activation TANH"):
        import_tflite(_conv_model(act=ActivationFunctionType.TANH))


def test_padv2_with_a_constant_quantized_unlike_the_output_is_unsupported():
    g = Graph()
    x = g.input("x", (1, 2, 2, 1), 0.1, 3)
    y = g.act("y", (1, 4, 4, 1), 0.1, 3)
    g.op(OP.PADV2, [x, g.const("p", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)),
                    g.const("v", np.array([7], np.int8), 0.2, 3)], [y])
    with pytest.raises(UnsupportedOpError, match=r"PADV2 with constant_values \[7\].*quantized like the output"):
        import_tflite(g.finish([y]))


# -- inconsistent files: ModelFormatError naming the tensor ------------------------------------------

def test_declared_shape_that_the_op_does_not_compute():
    with pytest.raises(ModelFormatError, match=r"conv_out"):
        import_tflite(_conv_model(out_shape=(1, 4, 4, 5)))


def test_weights_without_constant_data():
    with pytest.raises(ModelFormatError, match=r"'filter', the weights\) must be a constant tensor"):
        import_tflite(_conv_model(weights_const=False))


def test_int8_tensor_without_quantization():
    g = Graph()
    x = g.input("x", (1, 4), 0.1)
    y = g.act("y", (1, 4))
    g.op(OP.RELU, [x], [y])
    with pytest.raises(ModelFormatError, match="tensor 'y' is int8 but has no quantization"):
        import_tflite(g.finish([y]))


def test_missing_subgraph():
    with pytest.raises(ModelFormatError, match="subgraph 3 does not exist"):
        import_tflite(_conv_model(), subgraph=3)


# -- spec violations are imported, and the checker flags them -----------------------------------------

def test_asymmetric_weights_are_flagged_by_the_checker():
    report = check_module(import_tflite(_conv_model(w_zp=5)).module)
    assert any("symmetric" in v.message and v.where == "input 1" for v in report.violations), report.violations


def test_bias_scale_other_than_input_times_weight_is_flagged():
    report = check_module(import_tflite(_conv_model(bias_scales=np.array([0.3, 0.3], np.float32))).module)
    assert any("bias scale must equal" in v.message for v in report.violations), report.violations


def test_softmax_output_parameters_are_flagged():
    g = Graph()
    x = g.input("x", (1, 10), 0.1, 0)
    y = g.act("y", (1, 10), 1 / 255, -127)
    g.op(OP.SOFTMAX, [x], [y], SoftmaxOptions(beta=1.0))
    report = check_module(import_tflite(g.finish([y])).module)
    assert [v.kind for v in report.violations] == ["SOFTMAX"]
    assert "output parameters must be" in report.violations[0].message


def test_depthwise_weight_axis_is_reported_in_tflite_terms():
    """IR [C, 1, KH, KW] per-axis dim 0 is TFLite dim 3: a clean depthwise conv passes the check."""
    g = Graph()
    x = g.input("x", (1, 3, 3, 2), 0.05)
    ws = np.array([0.01, 0.02, 0.03, 0.04], np.float32)
    w = g.const("dw", np.ones((1, 3, 3, 4), np.int8), ws, 0, axis=3)
    b = g.const("b", np.zeros(4, np.int32), np.float32(0.05) * ws)
    y = g.act("y", (1, 3, 3, 4), 0.1)
    from quantir.backends.tflite import DepthwiseConv2DOptions
    g.op(OP.DEPTHWISE_CONV_2D, [x, w, b], [y], DepthwiseConv2DOptions(padding=Padding.SAME, depth_multiplier=2))
    report = check_module(import_tflite(g.finish([y])).module)
    assert report.checked >= 1 and report.ok, report.violations


def test_a_clean_model_passes_the_checker():
    report = check_module(import_tflite(_conv_model()).module)
    assert report.checked >= 1 and report.ok, report.violations


# -- names, signature, bindings -----------------------------------------------------------------------

def test_names_are_unique_non_empty_and_bindings_cover_every_computed_tensor(tmp_path):
    g = Graph()
    x = g.input("", (1, 2, 2, 3), 0.1, 1)
    a = g.act("t", (1, 2, 2, 3), 0.1, 1)
    b = g.act("t", (1, 2, 2, 3), 0.1, 1)
    y = g.act("", (1, 12), 0.1, 1)
    g.op(OP.RELU, [x], [a])
    g.op(OP.RELU6, [a], [b])
    g.op(OP.RESHAPE, [b, g.const("shape", np.array([1, 12], np.int32))], [y])
    path = tmp_path / "m.tflite"
    path.write_bytes(g.finish([y]))
    result = import_tflite(path)
    names = [bd.name for bd in result.bindings.values()]
    assert len(set(names)) == 4 and all(names) and names.count("t") == 1
    fn = result.module.main
    assert fn.arg_attrs[0]["quantir.name"].value == result.bindings[x].name
    assert fn.res_attrs[0]["quantir.name"].value == result.bindings[y].name
    assert all(bd.to_tflite is None for bd in result.bindings.values())
    assert load_tflite(path).main.type == fn.type


def test_function_signature_is_tflite_layout_and_fc_reads_keep_num_dims():
    g = Graph()
    x = g.input("x", (2, 3, 4), 0.1, 1)
    y = g.act("y", (2, 3, 5), 0.2, -1)
    g.op(OP.FULLY_CONNECTED, [x, g.const("w", np.ones((5, 4), np.int8), 0.01), -1], [y],
         FullyConnectedOptions(keep_num_dims=True))
    fn = import_tflite(g.finish([y])).module.main
    assert fn.type.inputs[0].shape == (2, 3, 4) and fn.type.results[0].shape == (2, 3, 5)
    assert [op.name for op in fn.ops].count("nn.reshape") == 0


def test_supported_ops_table():
    assert {OP.CONV_2D, OP.DEPTHWISE_CONV_2D, OP.FULLY_CONNECTED, OP.SOFTMAX, OP.PADV2, OP.EXPAND_DIMS} <= SUPPORTED_OPS


def test_reads_a_parsed_model_too():
    data = _conv_model()
    assert import_tflite(read_model(data)).module.main.type == import_tflite(data).module.main.type


def test_importing_the_frontend_does_not_import_litert():
    code = ("import sys, quantir.frontends.tflite as t; t.import_tflite; "
            "print('ai_edge_litert' in sys.modules, 'tflite_runtime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_tensor_read_before_it_is_written():
    g = Graph()
    x = g.input("x", (1, 4), 0.1)
    hidden = g.act("hidden", (1, 4), 0.1)
    y = g.act("y", (1, 4), 0.1)
    g.op(OP.ADD, [x, hidden], [y])
    with pytest.raises(ModelFormatError, match="reads tensor 'hidden', which is neither a graph input"):
        import_tflite(g.finish([y]))


def test_tensor_written_twice():
    g = Graph()
    x = g.input("x", (1, 4), 0.1)
    y = g.act("y", (1, 4), 0.1)
    g.op(OP.RELU, [x], [y])
    g.op(OP.RELU6, [x], [y])
    with pytest.raises(ModelFormatError, match=r"operator 1 \(RELU6 -> 'y'\): tensor 'y' is written twice"):
        import_tflite(g.finish([y]))


def test_value_names_say_which_layout_they_hold():
    fn = import_tflite(_conv_model()).module.main
    names = [r.name_hint for op in fn.ops for r in op.results if r.name_hint]
    assert names == ["x__nchw", "filter__oihw", "bias", "conv_out__nchw", "conv_out"]


def test_bias_without_quantization_gets_the_scale_litert_uses():
    """LiteRT's int8 conv never reads the bias scale; the IR needs one: input_scale × weight_scale."""
    g = Graph()
    x = g.input("x", (1, 2, 2, 1), 0.5)
    w = g.const("w", np.ones((2, 1, 1, 1), np.int8), np.array([0.25, 0.125], np.float32))
    b = g.const("b", np.array([1, 2], np.int32))
    y = g.act("y", (1, 2, 2, 2), 0.1)
    g.op(OP.CONV_2D, [x, w, b], [y], Conv2DOptions(padding=Padding.VALID))
    fn = import_tflite(g.finish([y])).module.main
    conv = next(op for op in fn.ops if op.name == "qnn.conv")
    assert conv.operands[2].type.element_type.scales == (0.125, 0.0625)
    assert check_module(fn).ok


def test_conv_weights_quantized_on_the_wrong_axis_are_reported_in_tflite_terms():
    """CONV_2D per-axis weights must use dim 0 (output channels); dim 3 (input channels) is flagged as dim 3."""
    g = Graph()
    x = g.input("x", (1, 4, 4, 3), 0.05)
    ws = np.array([0.01, 0.02, 0.03], np.float32)
    w = g.const("filter", np.ones((2, 3, 3, 3), np.int8), ws, 0, axis=3)
    b = g.const("bias", np.zeros(2, np.int32), np.float32(0.05) * ws[:1])
    y = g.act("y", (1, 4, 4, 2), 0.1)
    g.op(OP.CONV_2D, [x, w, b], [y], Conv2DOptions(padding=Padding.SAME))
    report = check_module(import_tflite(g.finish([y])).module)
    assert "CONV_2D 'y' input 1: per-axis weights must be quantized along dimension 0, found 3" in \
        [str(v) for v in report.violations]
