"""Float32 TFLite operators, written as TFLite's converter writes them around dynamic-range ops (fused
activations, keep_num_dims off, adj_y, a softmax beta, run-time shapes), imported as ``nn`` ops: every
tensor the import binds equals LiteRT's BUILTIN_REF within float rounding.

Tolerance: |ours − LiteRT| <= 2e-5 + 2e-5·|LiteRT|: both compute in float32, but LiteRT's kernels
call libm (exp, tanh, erf) and sum in their own order where numpy uses its own functions and
pairwise sums — a few ulp, never a different result.
"""
from __future__ import annotations

import numpy as np
import pytest

from quantir.backends.tflite.schema import (ActivationFunctionType, AddOptions, BatchMatMulOptions, DivOptions,
                                            FullyConnectedOptions, GeluOptions, MulOptions, ReducerOptions,
                                            ReshapeOptions, ShapeOptions, SoftmaxOptions, SquaredDifferenceOptions,
                                            TensorType)
from quantir.errors import UnsupportedOpError
from quantir.frontends.tflite import import_tflite
from quantir.runtime import input_names, run

from .tfl_graph import OP, Graph, litert

F = np.float32
RELU, RELU6 = ActivationFunctionType.RELU, ActivationFunctionType.RELU6


def compare_close(data: bytes, feeds: list[np.ndarray]):
    """Import ``data``, run it and LiteRT, and compare every bound tensor within the tolerance."""
    litert()
    from quantir.backends.tflite.litert import run_model_tensors
    result = import_tflite(data)
    named = dict(zip(input_names(result.module.main), feeds))
    ours = run(result.module, named, intermediates=[b.name for b in result.bindings.values()])
    _, tensors = run_model_tensors(data, feeds, list(result.bindings))
    for idx, binding in result.bindings.items():
        got = ours[binding.name] if binding.to_tflite is None else np.transpose(ours[binding.name], binding.to_tflite)
        assert got.shape == tensors[idx].shape and got.dtype == tensors[idx].dtype, (binding.name, got.shape)
        np.testing.assert_allclose(got, tensors[idx], rtol=2e-5, atol=2e-5, err_msg=binding.name)
    return result


def _names(result) -> list[str]:
    return [op.name for op in result.module.main.ops]


def test_transformer_block_pieces_as_the_converter_writes_them():
    """LayerNorm as TF decomposes it, a FULLY_CONNECTED with bias and fused RELU on a 3-D input
    (keep_num_dims off: flattened rows), then GELU, attention scores with adj_y and a softmax beta."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input("x", (2, 5, 8), dtype=F)
    mean = g.act("mean", (2, 5, 1), dtype=F)
    g.op(OP.MEAN, [x, g.const("axis", np.asarray([2], np.int32))], [mean], ReducerOptions(keep_dims=True))
    sq = g.act("sq", (2, 5, 8), dtype=F)
    g.op(OP.SQUARED_DIFFERENCE, [x, mean], [sq], SquaredDifferenceOptions())
    var = g.act("var", (2, 5, 1), dtype=F)
    g.op(OP.MEAN, [sq, g.const("axis2", np.asarray([-1], np.int32))], [var], ReducerOptions(keep_dims=True))
    var_eps = g.act("var_eps", (2, 5, 1), dtype=F)
    g.op(OP.ADD, [var, g.const("eps", np.asarray([1e-5], F))], [var_eps], AddOptions())
    inv = g.act("inv", (2, 5, 1), dtype=F)
    g.op(OP.RSQRT, [var_eps], [inv])
    centered = g.act("centered", (2, 5, 8), dtype=F)
    g.op(OP.SUB, [x, mean], [centered])
    normed = g.act("normed", (2, 5, 8), dtype=F)
    g.op(OP.MUL, [centered, inv], [normed], MulOptions())
    fc = g.act("fc", (10, 6), dtype=F)
    g.op(OP.FULLY_CONNECTED, [normed, g.const("w", rng.standard_normal((6, 8)).astype(F)),
                              g.const("b", rng.standard_normal(6).astype(F))], [fc],
         FullyConnectedOptions(fused_activation_function=RELU, keep_num_dims=False))
    act = g.act("gelu", (10, 6), dtype=F)
    g.op(OP.GELU, [fc], [act], GeluOptions(approximate=True))
    rows = g.act("rows", (2, 5, 6), dtype=F)
    g.op(OP.RESHAPE, [act, g.const("shape", np.asarray([2, 5, 6], np.int32))], [rows],
         ReshapeOptions(new_shape=(2, 5, 6)))
    scores = g.act("scores", (2, 5, 5), dtype=F)
    g.op(OP.BATCH_MATMUL, [rows, rows], [scores], BatchMatMulOptions(adj_y=True))
    probs = g.act("probs", (2, 5, 5), dtype=F)
    g.op(OP.SOFTMAX, [scores], [probs], SoftmaxOptions(beta=0.25))
    result = compare_close(g.finish([probs]), [rng.standard_normal((2, 5, 8)).astype(F)])
    names = _names(result)
    assert {"nn.gelu", "nn.softmax", "nn.matmul", "nn.relu", "nn.reduce_mean"} <= set(names)
    assert not any(n.startswith(("qnn.", "quant.")) for n in names)


def test_fused_activations_division_and_reductions():
    rng = np.random.default_rng(1)
    g = Graph()
    x = g.input("x", (3, 4), dtype=F)
    d = g.act("d", (3, 4), dtype=F)
    g.op(OP.DIV, [x, g.const("den", np.asarray([0.5, -2, 4, 0.25], F))], [d],
         DivOptions(fused_activation_function=RELU6))
    s = g.act("s", (3,), dtype=F)
    g.op(OP.SUM, [d, g.const("ax", np.asarray([1], np.int32))], [s], ReducerOptions(keep_dims=False))
    m = g.act("m", (4,), dtype=F)
    g.op(OP.REDUCE_MAX, [d, g.const("ax0", np.asarray([0], np.int32))], [m], ReducerOptions(keep_dims=False))
    mx = g.act("mx", (3, 4), dtype=F)
    g.op(OP.MAXIMUM, [x, g.const("floor", np.asarray(0.1, F))], [mx])
    result = compare_close(g.finish([s, m, mx]), [3 * rng.standard_normal((3, 4)).astype(F)])
    assert "nn.clip" in _names(result)   # RELU6 fused into the DIV


def test_broadcast_to_constant_and_run_time_shape():
    """BROADCAST_TO to a constant shape, and to a shape computed from another input's SHAPE."""
    rng = np.random.default_rng(2)
    g = Graph()
    x = g.input("x", (3, 1), dtype=F)
    z = g.input("z", (1, 5), dtype=F, signature=(-1, 5))
    y = g.act("y", (3, 5), dtype=F)
    g.op(OP.BROADCAST_TO, [x, g.const("target", np.asarray([3, 5], np.int32))], [y], version=2)
    zs = g.act("zs", (2,), dtype=np.int32)
    g.op(OP.SHAPE, [z], [zs], ShapeOptions(out_type=TensorType.INT32))
    w = g.act("w", (1, 5), dtype=F, signature=(-1, 5))
    g.op(OP.BROADCAST_TO, [g.const("row", np.linspace(0, 1, 5).astype(F)), zs], [w], version=2)
    result = compare_close(g.finish([y, w]), [rng.standard_normal((3, 1)).astype(F),
                                               rng.standard_normal((4, 5)).astype(F)])
    assert {"nn.expand", "nn.dynamic_expand"} <= set(_names(result))


def test_float16_weights_are_refused_by_name():
    g = Graph()
    x = g.input("x", (2, 4), dtype=F)
    y = g.act("y", (2, 3), dtype=F)
    g.op(OP.FULLY_CONNECTED, [x, g.const("w16", np.ones((3, 4), np.float16)), -1], [y], FullyConnectedOptions())
    with pytest.raises(UnsupportedOpError, match=r"FULLY_CONNECTED -> 'y'.*'w16' is FLOAT16"):
        import_tflite(g.finish([y]))


def test_not_equal_and_select_v2_broadcasting():
    """An attention-mask pattern: NOT_EQUAL (nn.not of nn.equal) and SELECT_V2 broadcasting a scalar."""
    rng = np.random.default_rng(3)
    g = Graph()
    m = g.input("mask", (2, 6), dtype=F)
    s = g.input("scores", (2, 4, 6), dtype=F)
    keep = g.act("keep", (2, 6), dtype=np.bool_)
    g.op(OP.NOT_EQUAL, [m, g.const("zero", np.asarray(0, F))], [keep])
    keep3 = g.act("keep3", (2, 1, 6), dtype=np.bool_)
    g.op(OP.RESHAPE, [keep, g.const("shape", np.asarray([2, 1, 6], np.int32))], [keep3],
         ReshapeOptions(new_shape=(2, 1, 6)))
    y = g.act("masked", (2, 4, 6), dtype=F)
    g.op(OP.SELECT_V2, [keep3, s, g.const("neg", np.asarray(-1e4, F))], [y])
    result = compare_close(g.finish([y]), [rng.integers(0, 2, (2, 6)).astype(F),
                                           rng.standard_normal((2, 4, 6)).astype(F)])
    assert {"nn.not", "nn.equal", "nn.where"} <= set(_names(result))


def test_a_float_op_with_a_quantized_operand_is_refused():
    """MUL of a float32 tensor by an int8 constant: neither an int8, a float32 nor a dynamic-range op."""
    g = Graph()
    x = g.input("x", (2, 3), dtype=F)
    y = g.act("y", (2, 3), dtype=F)
    g.op(OP.MUL, [x, g.const("k", np.ones((2, 3), np.int8), scale=0.5)], [y], MulOptions())
    with pytest.raises(UnsupportedOpError, match=r"MUL -> 'y'.*'k' is quantized INT8.*computes in float32"):
        import_tflite(g.finish([y]))


@pytest.mark.parametrize("depthwise", [False, True])
def test_conv_of_dequantized_int8_weights(depthwise):
    """Weight-only quantization as TF's converter writes it: DEQUANTIZE of per-channel int8 weights
    feeding a float CONV_2D / DEPTHWISE_CONV_2D with a fused RELU6."""
    from quantir.backends.tflite.schema import Conv2DOptions, DepthwiseConv2DOptions, Padding
    rng = np.random.default_rng(4)
    g = Graph()
    x = g.input("x", (1, 5, 5, 3), dtype=F)
    shape, axis = ((1, 3, 3, 3), 3) if depthwise else ((4, 3, 3, 3), 0)
    scales = np.linspace(0.01, 0.05, shape[axis]).astype(F)
    w8 = g.const("w_int8", rng.integers(-127, 128, shape).astype(np.int8), scales, 0, axis=axis)
    w = g.act("w", shape, dtype=F)
    g.op(OP.DEQUANTIZE, [w8], [w])
    c_out = shape[3] if depthwise else shape[0]
    y = g.act("y", (1, 5, 5, c_out), dtype=F)
    common = dict(padding=Padding.SAME, fused_activation_function=RELU6)
    options = DepthwiseConv2DOptions(depth_multiplier=1, **common) if depthwise else Conv2DOptions(**common)
    g.op(OP.DEPTHWISE_CONV_2D if depthwise else OP.CONV_2D, [x, w, g.const("b", np.full(c_out, 0.1, F))], [y],
         options)
    result = compare_close(g.finish([y]), [3 * rng.standard_normal((1, 5, 5, 3)).astype(F)])
    assert {"quant.dcast", "nn.conv", "nn.clip"} <= set(_names(result))


def test_quantir_check_reads_a_float_model(tmp_path, capsys):
    """`quantir check` imports the float32 ops (nothing for the int8 spec to judge) instead of refusing them."""
    from quantir.cli.main import main
    g = Graph()
    x = g.input("x", (2, 4), dtype=F)
    y = g.act("y", (2, 3), dtype=F)
    g.op(OP.FULLY_CONNECTED, [x, g.const("w", np.ones((3, 4), F)), g.const("b", np.zeros(3, F))], [y],
         FullyConnectedOptions(fused_activation_function=RELU))
    path = tmp_path / "float.tflite"
    path.write_bytes(g.finish([y]))
    assert main(["check", str(path)]) == 0
    assert "0 violations" in capsys.readouterr().out
