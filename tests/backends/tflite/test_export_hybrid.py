"""Dynamic-range (hybrid) modules -> .tflite -> LiteRT BUILTIN_REF: every hybrid op's output bit-exact.

A float ONNX model goes through quantize_hybrid and the TFLite exporter; LiteRT's reference
kernels run the file with every tensor kept, and each hybrid op's output is compared, bit for
bit, with quantir's interpreter on the IR. The written file is checked the way LiteRT reads it:
int8 weights with per-channel scales along quantized_dimension 0 (3 for DEPTHWISE_CONV_2D), zero
points 0, float32 biases, and the options. The .tflite read back imports as the same hybrid ops.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from quantir.backends.tflite.export import export_tflite
from quantir.backends.tflite.schema import BuiltinOperator as OP
from quantir.backends.tflite.schema import TensorType as TFLType
from quantir.frontends.tflite import import_tflite
from quantir.ir import Function, Module, StringAttr
from quantir.ir.builder import OpBuilder
from quantir.ir.dialects import func, hybrid, quant
from quantir.quantize.hybrid import HybridConfig, quantize_hybrid
from quantir.runtime import run
from quantir.types import FloatType, IntegerType, TensorType, UniformQuantizedPerAxisType

from ...quantize.test_hybrid import _load, conv_model, text_model

pytest.importorskip("ai_edge_litert.interpreter")
from quantir.backends.tflite.litert import run_model, run_model_tensors  # noqa: E402

pytestmark = pytest.mark.oracle
F32 = FloatType("f32")


def _hybrid_outputs(module) -> list[str]:
    return [op.results[0].name_hint for op in module.main.ops if op.opdef in hybrid.HYBRID_OPS]


def assert_bit_exact_with_litert(module, feeds: dict) -> dict:
    """Run the IR and its .tflite; every hybrid op's output must be equal bit for bit. Returns the export."""
    ex = export_tflite(module)
    names = _hybrid_outputs(module)
    ours = run(module, feeds, intermediates=names)
    sub = ex.model.subgraphs[0]
    order = [sub.tensors[i].name for i in sub.inputs]
    outs, theirs = run_model_tensors(ex.to_bytes(), [feeds[n] for n in order], [ex.bindings[n][0] for n in names])
    for n in names:
        idx, perm = ex.bindings[n]
        mine = np.transpose(ours[n], perm) if perm else ours[n]
        assert mine.dtype == theirs[idx].dtype == np.float32, n
        assert np.array_equal(mine.view(np.int32), theirs[idx].view(np.int32)), \
            f"{n}: {np.sum(mine != theirs[idx])} of {mine.size} differ"
    return {"export": ex, "outputs": outs}


def _ops(ex) -> list[tuple]:
    m = ex.model
    sub = m.subgraphs[0]
    return [(m.operator_codes[o.opcode_index], o, [sub.tensors[i] if i >= 0 else None for i in o.inputs])
            for o in sub.operators]


@pytest.mark.parametrize("asym", [True, False])
def test_text_model_is_bit_exact_with_litert(tmp_path, asym):
    rng = np.random.default_rng(10)
    module, _ = _load(text_model(rng), tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100, asymmetric_quantize_inputs=asym))
    for trial in range(3):
        ids = rng.integers(0, 300, 6)
        if trial == 2:
            ids[:] = ids[0]   # the same row six times
        assert_bit_exact_with_litert(r.module, {"ids": ids})
    ex = export_tflite(r.module)
    fcs = [(code, o, t) for code, o, t in _ops(ex) if code.builtin_code == OP.FULLY_CONNECTED]
    assert len(fcs) == 3
    for code, o, (x, w, b) in fcs:
        assert code.version == (9 if asym else 3)
        assert o.options.asymmetric_quantize_inputs == asym
        assert x.type is TFLType.FLOAT32 and w.type is TFLType.INT8 and (b is None or b.type is TFLType.FLOAT32)
        assert w.quantization.quantized_dimension == 0 and len(w.quantization.scale) == w.shape[0]
        assert set(w.quantization.zero_point) == {0}
    assert [t[2] is not None for _, _, t in fcs] == [True, False, True]   # fc1's Add and fc3's C; fc2 has none
    assert fcs[0][1].options.fused_activation_function.name == "RELU"
    (emb,) = [(code, t) for code, o, t in _ops(ex) if code.builtin_code == OP.EMBEDDING_LOOKUP]
    assert emb[1][0].type is TFLType.INT32 and len(emb[1][1].quantization.scale) == 300   # ids CAST to int32


def test_a_skipped_layer_and_an_all_zero_input_row(tmp_path):
    rng = np.random.default_rng(11)
    module, _ = _load(text_model(rng), tmp_path)
    r = quantize_hybrid(module)   # fc3 (640 weights) stays a float Gemm: not exportable without float ops
    assert [x.label for x in r.layers] == ["embed", "fc1", "fc2"]
    r = quantize_hybrid(module, HybridConfig(min_elements=100))
    ids = np.zeros(6, np.int64)
    assert_bit_exact_with_litert(r.module, {"ids": ids})


def test_conv_and_depthwise_are_bit_exact_with_litert(tmp_path):
    rng = np.random.default_rng(12)
    module, _ = _load(conv_model(rng), tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100))
    x = rng.standard_normal((2, 8, 9, 9)).astype(np.float32)
    x[1] = np.abs(x[1])   # one image of one sign
    ex = assert_bit_exact_with_litert(r.module, {"x": x})["export"]
    (conv, cw), (dw, dww) = [(c, t) for c, o, t in _ops(ex) if c.builtin_code in (OP.CONV_2D, OP.DEPTHWISE_CONV_2D)]
    assert conv.builtin_code == OP.CONV_2D and cw[1].quantization.quantized_dimension == 0
    assert dw.builtin_code == OP.DEPTHWISE_CONV_2D and dww[1].quantization.quantized_dimension == 3
    assert dww[1].shape == (1, 3, 3, 16) and dww[2].type is TFLType.FLOAT32
    assert {conv.version, dw.version} == {5, 6}


def test_exported_file_imports_as_the_same_hybrid_ops(tmp_path):
    # an FC-only model: the input stays float and in its own layout (a conv model's NCHW -> NHWC TRANSPOSE is a
    # float op, and EMBEDDING_LOOKUP's int32 first input is not routed to the hybrid converters by the importer)
    rng = np.random.default_rng(13)
    model = text_model(rng)
    graph = model.graph
    nodes = [n for n in graph.node if n.name != "embed"]
    nodes[0].input[0] = "emb"
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("emb", TP.FLOAT, [6, 16])], list(graph.output),
                     [t for t in graph.initializer if t.name != "table"])
    module, _ = _load(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path)
    for asym in (True, False):
        r = quantize_hybrid(module, HybridConfig(min_elements=100, asymmetric_quantize_inputs=asym))
        ex = export_tflite(r.module)
        back = import_tflite(ex.to_bytes()).module
        ops = [op for op in back.main.ops if op.opdef in hybrid.HYBRID_OPS]
        assert [op.name for op in ops] == ["hybrid.fully_connected"] * 3
        assert [op.attr("asymmetric_quantize_inputs") for op in ops] == [asym] * 3
        assert ops[0].attr("activation") == "RELU"
        x = rng.standard_normal((6, 16)).astype(np.float32)
        (want,) = run_model(ex.to_bytes(), [x])
        assert np.array_equal(run(back, {"emb": x})["y"], want)
        assert np.array_equal(run(r.module, {"emb": x})["y"], want)


def _batch_matmul_module(w: np.ndarray, scales: np.ndarray, lhs_shape, axis: int, **attrs) -> Module:
    fn = Function.create("main", [TensorType(lhs_shape, F32)], [], arg_attrs=[{"quantir.name": StringAttr("x")}])
    fn.arguments[0].name_hint = "x"
    b = OpBuilder.at_end(fn)
    qtype = UniformQuantizedPerAxisType(storage_type=IntegerType(8), expressed_type=F32,
                                        scales=scales.astype(np.float64).tolist(), zero_points=[0] * scales.size,
                                        quantized_dimension=axis, storage_min=-127, storage_max=127)
    c = b.constant(w, IntegerType(8), name="rhs_quantized")
    rhs = b.insert(quant.SCAST.build([c], [TensorType(w.shape, qtype)])).result
    rhs.name_hint = "rhs"
    y = b.insert(hybrid.HYBRID_BATCH_MATMUL.build([fn.arguments[0], rhs], **attrs)).result
    y.name_hint = "y"
    b.insert(func.RETURN.build([y], []))
    fn.res_attrs = [{"quantir.name": StringAttr("y")}]
    fn.update_type()
    return Module([fn])


@pytest.mark.parametrize("adj_y,asym", [(False, True), (True, False)])
def test_batch_matmul_with_a_constant_rhs_is_bit_exact_with_litert(adj_y, asym):
    rng = np.random.default_rng(14)
    w = rng.integers(-127, 128, (2, 6, 7) if adj_y else (2, 7, 6)).astype(np.int8)
    scales = (10 ** rng.uniform(-3, -1, 6)).astype(np.float32)
    module = _batch_matmul_module(w, scales, (2, 5, 7), 1 if adj_y else 2, adj_y=adj_y,
                                  asymmetric_quantize_inputs=asym)
    x = rng.standard_normal((2, 5, 7)).astype(np.float32)
    ex = assert_bit_exact_with_litert(module, {"x": x})["export"]
    ((code, o, (_, rhs)),) = _ops(ex)
    assert code.builtin_code == OP.BATCH_MATMUL and o.options.adj_y == adj_y
    assert rhs.quantization.quantized_dimension == (1 if adj_y else 2)
    back = import_tflite(ex.to_bytes()).module
    assert np.array_equal(run(back, {"x": x})["y"], run(module, {"x": x})["y"])


def test_two_dimensional_ids_are_flattened_and_reshaped_back(tmp_path):
    rng = np.random.default_rng(15)
    table = rng.standard_normal((64, 32)).astype(np.float32)
    g = h.make_graph([h.make_node("Gather", ["table", "ids"], ["emb"], name="embed")], "g",
                     [h.make_tensor_value_info("ids", TP.INT64, [2, 3])],
                     [h.make_tensor_value_info("emb", TP.FLOAT, [2, 3, 32])], [nh.from_array(table, "table")])
    module, _ = _load(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path)
    r = quantize_hybrid(module)
    ids = rng.integers(0, 64, (2, 3))
    out = assert_bit_exact_with_litert(r.module, {"ids": ids})["outputs"]
    assert out[0].shape == (2, 3, 32)
    assert np.max(np.abs(out[0] - table[ids])) <= np.max(np.abs(table)) / 127 / 2 * 1.0001


def test_cli_dynamic_to_tflite_writes_litert_dynamic_range_model(tmp_path, capsys):
    import json

    from quantir.api import quantize_hybrid
    from quantir.cli.main import main as cli

    rng = np.random.default_rng(16)
    _, model_path = _load(text_model(rng), tmp_path)
    out, js = tmp_path / "m.tflite", tmp_path / "s.json"
    # (by default fc3's 640 weights stay a float Gemm, which the int8 exporter does not write: min_elements 100)
    assert cli(["quantize", str(model_path), "--dynamic", "--min-elements", "100", "-o", str(out),
                "--summary", str(js)]) == 0
    assert "4 weights int8 per channel, 0 weights float" in capsys.readouterr().out
    summary = json.loads(js.read_text())
    assert [x["label"] for x in summary["layers"]] == ["embed", "fc1", "fc2", "fc3"]
    assert summary["bytes_after"] < summary["bytes_before"] / 3 and out.stat().st_size < summary["bytes_before"] / 2
    sym = tmp_path / "sym.tflite"
    assert cli(["quantize", str(model_path), "--dynamic", "--min-elements", "100", "--symmetric-inputs",
                "-o", str(sym)]) == 0
    ids = rng.integers(0, 300, 6)
    (litert,) = run_model(sym.read_bytes(), [ids])
    ir = quantize_hybrid(str(model_path), HybridConfig(min_elements=100, asymmetric_quantize_inputs=False)).module
    assert np.array_equal(litert, run(ir, {"ids": ids})["y"])
    assert cli(["quantize", str(model_path), "--dynamic", "--symmetric-inputs", "-o", str(tmp_path / "x.onnx")]) == 1
    assert "--symmetric-inputs" in capsys.readouterr().err


def test_ids_with_a_dynamic_batch_are_reshaped_from_their_shape_at_run_time(tmp_path):
    rng = np.random.default_rng(17)
    table = rng.standard_normal((64, 32)).astype(np.float32)
    g = h.make_graph([h.make_node("Gather", ["table", "ids"], ["emb"], name="embed")], "g",
                     [h.make_tensor_value_info("ids", TP.INT64, ["batch", "sequence"])],
                     [h.make_tensor_value_info("emb", TP.FLOAT, ["batch", "sequence", 32])],
                     [nh.from_array(table, "table")])
    module, _ = _load(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path)
    r = quantize_hybrid(module)
    codes = [c.builtin_code for c, _, _ in _ops(export_tflite(r.module))]
    assert codes == [OP.CAST, OP.RESHAPE, OP.EMBEDDING_LOOKUP, OP.SHAPE, OP.CONCATENATION, OP.RESHAPE]
    for shape in ((2, 5), (3, 1)):
        out = assert_bit_exact_with_litert(r.module, {"ids": rng.integers(0, 64, shape)})["outputs"]
        assert out[0].shape == (*shape, 32)


@pytest.mark.parametrize("asym", [True, False])
def test_a_batched_constant_b_is_bit_exact_with_litert(tmp_path, asym):
    from ...quantize.test_hybrid import batched_model

    rng = np.random.default_rng(18)
    model = batched_model(rng)
    model.graph.node.pop()   # the 1-D Conv stays float: keep the BATCH_MATMUL alone
    model.graph.output.pop()
    model.graph.input.pop()
    module, _ = _load(model, tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100, asymmetric_quantize_inputs=asym))
    ex = assert_bit_exact_with_litert(r.module, {"x": rng.standard_normal((4, 3, 64)).astype(np.float32)})["export"]
    ((code, o, (_, rhs)),) = _ops(ex)
    assert code.builtin_code == OP.BATCH_MATMUL and o.options.asymmetric_quantize_inputs == asym
    assert rhs.quantization.quantized_dimension == 2 and len(rhs.quantization.scale) == 32


@pytest.mark.parametrize("bounds", [(0.0, 6.0), (-1.0, 1.0)])
def test_fused_relu6_and_relu_n1_to_1_are_bit_exact_with_litert(tmp_path, bounds):
    from ...quantize.test_hybrid import clip_model

    rng = np.random.default_rng(19)
    module, _ = _load(clip_model(rng, bounds), tmp_path)
    r = quantize_hybrid(module)
    ex = assert_bit_exact_with_litert(r.module, {"x": (rng.standard_normal((5, 64)) * 2).astype(np.float32)})["export"]
    ((code, o, _),) = _ops(ex)
    assert o.options.fused_activation_function.name == ("RELU6" if bounds[1] == 6 else "RELU_N1_TO_1")
