"""Reading dynamic-range (hybrid) .tflite files written the way LiteRT's weight quantizer writes them.

The files are assembled by hand with quantir's flatbuffer writer, as ``QuantizeWeights`` leaves a
float model: float32 graph input and output, FULLY_CONNECTED with int8 weights (per channel along
dimension 0, or per tensor as that tool writes FC weights), float32 biases,
asymmetric_quantize_inputs set and operator version 9, CONV_2D / DEPTHWISE_CONV_2D with
per-channel filters. They import as hybrid ops, run bit-exact with LiteRT BUILTIN_REF in quantir's
interpreter (``quantir verify``: every tensor), and pass ``quantir check``; a broken weight (a
-128, a nonzero zero point, the wrong per-channel axis) gives its violation.
"""
from __future__ import annotations

import numpy as np
import pytest

from quantir.backends.tflite import (ActivationFunctionType, Conv2DOptions, DepthwiseConv2DOptions,
                                     FullyConnectedOptions, ModelBuilder, Padding, Quantization, write_model)
from quantir.backends.tflite import read_model
from quantir.backends.tflite.check import check_tflite, litert_file_violations
from quantir.backends.tflite.schema import BatchMatMulOptions
from quantir.backends.tflite.schema import TensorType as TFLType
from quantir.backends.tflite.schema import BuiltinOperator as OP
from quantir.frontends.tflite import import_tflite
from quantir.ir.dialects import hybrid

pytest.importorskip("ai_edge_litert.interpreter")
from quantir.verify import verify_tflite  # noqa: E402

pytestmark = pytest.mark.oracle


def _int8_weight(rng, shape, per_channel: bool, axis: int = 0):
    w = rng.integers(-127, 128, shape).astype(np.int8)
    n = shape[axis] if per_channel else 1
    scales = tuple(float(s) for s in (10 ** rng.uniform(-3, -1, n)).astype(np.float32))
    return w, Quantization(scales, (0,) * n, axis)


def fc_model(rng, *, weight=None, quantization=None, asym=True) -> bytes:
    """float [?, 32] -> FC(64, int8 per channel, f32 bias, RELU) -> FC(10, int8 per tensor, f32 bias) -> float."""
    b = ModelBuilder(description="dynamic range, as QuantizeWeights writes it")
    x = b.add_tensor("input", (1, 32), np.float32, shape_signature=(-1, 32))
    w1, q1 = _int8_weight(rng, (64, 32), True)
    if weight is not None:
        w1, q1 = weight, quantization or q1
    wt1 = b.add_constant("dense/kernel", w1, q1)
    b1 = b.add_constant("dense/bias", rng.standard_normal(64).astype(np.float32))
    h = b.add_tensor("dense/Relu", (1, 64), np.float32, shape_signature=(-1, 64))
    b.add_operator(OP.FULLY_CONNECTED, [x, wt1, b1], [h],
                   FullyConnectedOptions(fused_activation_function=ActivationFunctionType.RELU,
                                         asymmetric_quantize_inputs=asym), version=9 if asym else 3)
    w2, q2 = _int8_weight(rng, (10, 64), False)
    wt2 = b.add_constant("logits/kernel", w2, q2)
    b2 = b.add_constant("logits/bias", rng.standard_normal(10).astype(np.float32))
    y = b.add_tensor("logits", (1, 10), np.float32, shape_signature=(-1, 10))
    b.add_operator(OP.FULLY_CONNECTED, [h, wt2, b2], [y], FullyConnectedOptions(asymmetric_quantize_inputs=asym),
                   version=9 if asym else 3)
    b.set_io([x], [y])
    return write_model(b.build())


def conv_model(rng) -> bytes:
    """float NHWC [1, 7, 7, 3] -> CONV_2D 3x3 SAME (8, per channel) -> DEPTHWISE 3x3 VALID (x2, per channel)."""
    b = ModelBuilder(description="dynamic range convolutions")
    x = b.add_tensor("image", (1, 7, 7, 3), np.float32)
    wc, qc = _int8_weight(rng, (8, 3, 3, 3), True, 0)
    c = b.add_tensor("conv", (1, 7, 7, 8), np.float32)
    b.add_operator(OP.CONV_2D, [x, b.add_constant("conv/filter", wc, qc),
                                b.add_constant("conv/bias", rng.standard_normal(8).astype(np.float32))], [c],
                   Conv2DOptions(padding=Padding.SAME, stride_w=1, stride_h=1,
                                 fused_activation_function=ActivationFunctionType.RELU6), version=5)
    wd, qd = _int8_weight(rng, (1, 3, 3, 16), True, 3)
    y = b.add_tensor("depthwise", (1, 5, 5, 16), np.float32)
    b.add_operator(OP.DEPTHWISE_CONV_2D, [c, b.add_constant("dw/filter", wd, qd),
                                          b.add_constant("dw/bias", rng.standard_normal(16).astype(np.float32))], [y],
                   DepthwiseConv2DOptions(padding=Padding.VALID, stride_w=1, stride_h=1, depth_multiplier=2),
                   version=6)
    b.set_io([x], [y])
    return write_model(b.build())


def _save(tmp_path, data: bytes, name="m.tflite") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("asym", [True, False])
def test_converter_style_fully_connected_file_imports_runs_bit_exact_and_checks(tmp_path, asym):
    rng = np.random.default_rng(20)
    path = _save(tmp_path, fc_model(rng, asym=asym))
    module = import_tflite(path).module
    ops = [op for op in module.main.ops if op.opdef in hybrid.HYBRID_OPS]
    assert [op.name for op in ops] == ["hybrid.fully_connected"] * 2
    assert [op.attr("asymmetric_quantize_inputs") for op in ops] == [asym, asym]
    assert ops[0].attr("activation") == "RELU"
    x = rng.standard_normal((12, 32)).astype(np.float32)
    x[5] = 0              # an all-zero row
    x[8:] = np.abs(x[8:])  # rows of one sign
    report = verify_tflite(path, {"input": x})
    assert report.ok, report
    compared = [d.name for d in report.outputs + report.intermediates]
    assert compared == ["logits", "input", "dense/Relu"]
    check = check_tflite(path)
    assert check.ok and check.checked == 2 and check.unknown == [], check


def test_converter_style_convolutions_import_run_bit_exact_and_check(tmp_path):
    rng = np.random.default_rng(21)
    path = _save(tmp_path, conv_model(rng))
    module = import_tflite(path).module
    convs = [op for op in module.main.ops if op.opdef is hybrid.HYBRID_CONV]
    assert [op.attr("group") for op in convs] == [1, 8] and convs[0].attr("activation") == "RELU6"
    report = verify_tflite(path, {"image": rng.standard_normal((2, 7, 7, 3)).astype(np.float32)})
    assert report.ok, report
    check = check_tflite(path)
    assert check.ok and check.checked == 2, check


def _violations(tmp_path, data: bytes) -> list[str]:
    return [str(v) for v in check_tflite(_save(tmp_path, data, "broken.tflite")).violations]


def test_a_minus_128_weight_is_a_violation(tmp_path):
    rng = np.random.default_rng(22)
    w, q = _int8_weight(rng, (64, 32), True)
    w[5, 7] = -128
    (v,) = _violations(tmp_path, fc_model(rng, weight=w, quantization=q))
    assert v.startswith("FULLY_CONNECTED (dynamic range) 'dense/Relu' input 1:") and "[-127, 127]" in v
    assert "found -128 (1 of 2048)" in v


def test_a_nonzero_weight_zero_point_is_a_violation(tmp_path):
    rng = np.random.default_rng(23)
    w, q = _int8_weight(rng, (64, 32), True)
    q = Quantization(q.scale, (0,) * 63 + (3,), 0)
    (v,) = _violations(tmp_path, fc_model(rng, weight=w, quantization=q))
    assert "symmetric (zero point 0)" in v and "[0, 3]" in v


def test_per_channel_scales_along_the_wrong_axis_are_a_violation(tmp_path):
    rng = np.random.default_rng(24)
    w, q = _int8_weight(rng, (64, 32), True, axis=1)   # one scale per input feature
    (v,) = _violations(tmp_path, fc_model(rng, weight=w, quantization=q))
    assert "along dimension 0" in v


def _batch_matmul_file(version: int, extra_input: bool = False) -> bytes:
    b = ModelBuilder()
    x = b.add_tensor("x", (2, 3), np.float32)
    inputs = [x, b.add_constant("rhs", np.ones((3, 4), np.int8), Quantization((0.5,), (0,), 0))]
    if extra_input:
        inputs.append(b.add_constant("extra", np.ones(4, np.float32)))
    y = b.add_tensor("y", (2, 4), np.float32)
    b.add_operator(OP.BATCH_MATMUL, inputs, [y], BatchMatMulOptions(), version=version)
    b.set_io([x], [y])
    return write_model(b.build())


def test_what_litert_refuses_in_a_batch_matmul_file_is_reported():
    from quantir.backends.tflite.litert import run_model

    x = np.ones((2, 3), np.float32)
    assert run_model(_batch_matmul_file(4), [x])[0].shape == (2, 4)
    assert litert_file_violations(read_model(_batch_matmul_file(4))) == []
    for data, says in ((_batch_matmul_file(5), "versions 1 to 4"), (_batch_matmul_file(1, True), "takes 2 inputs")):
        with pytest.raises((RuntimeError, ValueError)):   # load (version) or Prepare (inputs)
            run_model(data, [x])
        assert [says in v.message for v in litert_file_violations(read_model(data))] == [True]


def test_embedding_lookup_converter_once_the_importer_routes_it(tmp_path):
    """Importer.is_hybrid wants a float32 first input, and EMBEDDING_LOOKUP's first input is its
    int32 ids, so the importer does not route it to ops_hybrid yet; with a routing that also takes an
    int8 constant feeding a float32 output, the converter reads it as hybrid.embedding_lookup."""
    from quantir.backends.tflite import read_model
    from quantir.backends.tflite.litert import run_model
    from quantir.frontends.tflite import CONVERTERS, HYBRID_CONVERTERS
    from quantir.frontends.tflite.importer import Importer
    from quantir.runtime import run

    class Routing(Importer):
        def is_hybrid(self, op):
            out = self.tensor(op.outputs[0])
            return super().is_hybrid(op) or (out.type is TFLType.FLOAT32 and any(
                i >= 0 and self.tensor(i).type is TFLType.INT8 and self.data(i) is not None for i in op.inputs))

    rng = np.random.default_rng(26)
    b = ModelBuilder()
    ids = b.add_tensor("ids", (5,), np.int32)
    table, q = _int8_weight(rng, (40, 8), True)
    y = b.add_tensor("rows", (5, 8), np.float32)
    b.add_operator(OP.EMBEDDING_LOOKUP, [ids, b.add_constant("table", table, q)], [y], version=3)
    b.set_io([ids], [y])
    data = write_model(b.build())
    module = Routing(read_model(data), 0, "<bytes>", CONVERTERS, HYBRID_CONVERTERS).run().module
    assert [op.name for op in module.main.ops if op.opdef in hybrid.HYBRID_OPS] == ["hybrid.embedding_lookup"]
    feed = rng.integers(0, 40, 5).astype(np.int32)
    (want,) = run_model(data, [feed])
    assert np.array_equal(run(module, {"ids": feed})["rows"], want)
