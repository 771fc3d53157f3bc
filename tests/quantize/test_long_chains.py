"""A 3,000-op chain quantizes and exports whole and correctly, and the exporters' unique-name
generators keep their names while never probing ``name_1, name_2, ...`` from the start again
(issue 11, item 10: that probing and a set rebuilt per region made long models quadratic).
Time itself is measured in bench/scaling.py, not asserted here."""
from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir as qr
from quantir.backends.onnx.exporter import GraphExporter
from quantir.backends.tflite import read_model
from quantir.backends.tflite.export import _Exporter, export_tflite
from quantir.ir import Function

BLOCKS = 750   # 4 ONNX ops each: 3,000 ops


def chain(blocks: int, seed: int = 0) -> onnx.ModelProto:
    """Residual blocks x -> Conv(1x1, bias) -> Clip(0, 6) -> Conv(1x1) -> Add(., x) on 1x4x4x4."""
    rng = np.random.default_rng(seed)
    inits = [nh.from_array(np.array(0, np.float32), "lo"), nh.from_array(np.array(6, np.float32), "hi")]
    nodes, x = [], "input"
    for i in range(blocks):
        inits += [nh.from_array((rng.normal(size=(4, 4, 1, 1)) * 0.1).astype(np.float32), f"w{i}a"),
                  nh.from_array((rng.normal(size=4) * 0.1).astype(np.float32), f"b{i}a"),
                  nh.from_array((rng.normal(size=(4, 4, 1, 1)) * 0.1).astype(np.float32), f"w{i}b")]
        nodes += [h.make_node("Conv", [x, f"w{i}a", f"b{i}a"], [f"c{i}a"], name=f"conv{i}a"),
                  h.make_node("Clip", [f"c{i}a", "lo", "hi"], [f"r{i}"], name=f"clip{i}"),
                  h.make_node("Conv", [f"r{i}", f"w{i}b"], [f"c{i}b"], name=f"conv{i}b"),
                  h.make_node("Add", [f"c{i}b", x], [f"y{i}"], name=f"add{i}")]
        x = f"y{i}"
    graph = h.make_graph(nodes, "chain", [h.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4, 4, 4])],
                         [h.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4, 4, 4])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def result():
    x = np.random.default_rng(1).normal(size=(2, 4, 4, 4)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # 2 calibration samples are (rightly) a warning; not the point here
        # minmax: the entropy search (36 ms per tensor, whatever its size: 82 of this fixture's 95 s)
        # is tested on its own; here the graph's length is the point
        return qr.quantize(chain(BLOCKS), {"input": x},
                           qr.Config(progress=False, engine="interpreter", budget=None, method="minmax"))


def test_every_block_becomes_three_int8_ops(result):
    assert result.quantized_ops() == Counter({"conv": 2 * BLOCKS, "add": BLOCKS})
    assert result.annotation.float_ops == []
    assert result.cast_counts() == (1, 1)
    fused = Counter(r.activation for r in result.annotation.regions if r.pattern.name == "conv")
    assert fused == Counter({"RELU6": BLOCKS, "NONE": BLOCKS})


def test_region_ops_are_in_program_order(result):
    position = {op: i for i, op in enumerate(result.float_function.ops)}
    for region in result.annotation.regions:
        assert [position[o] for o in region.ops] == sorted(position[o] for o in region.ops)
        assert region.ops[-1] is region.root
    first = result.annotation.regions[0]
    assert [o.label for o in first.ops] == ["conv0a", "clip0"]


def test_tflite_export_of_the_chain(result):
    model = read_model(export_tflite(result.module).to_bytes())
    (graph,) = model.subgraphs
    names = [t.name for t in graph.tensors]
    assert len(names) == len(set(names))
    ops = Counter(model.operator_codes[op.opcode_index].name for op in graph.operators)
    assert ops == Counter({"CONV_2D": 2 * BLOCKS, "ADD": BLOCKS, "QUANTIZE": 1, "DEQUANTIZE": 1, "TRANSPOSE": 2})
    # one base, 1,500 filters: the suffixes count up without a gap
    filters = [n for n in names if n.startswith("filter/ohwi")]
    assert filters == ["filter/ohwi"] + [f"filter/ohwi_{k}" for k in range(1, 2 * BLOCKS)]


def test_onnx_qdq_export_of_the_chain(result, tmp_path):
    path = result.save(tmp_path / "chain.onnx")
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    g = model.graph
    nodes = [n.name for n in g.node]
    assert len(nodes) == len(set(nodes))
    tensors = [o for n in g.node for o in n.output] + [i.name for i in g.initializer]
    assert len(tensors) == len(set(tensors))
    ops = Counter(n.op_type for n in g.node)
    assert (ops["Conv"], ops["Add"]) == (2 * BLOCKS, BLOCKS)
    assert [n.name for n in g.node if n.op_type == "Add"] == [f"add{i}" for i in range(BLOCKS)]


# -- the name generators ------------------------------------------------------------------------

class CountingSet(set):
    """A set that counts membership tests: how many candidate names a generator probed."""

    probes = 0

    def __contains__(self, item) -> bool:
        self.probes += 1
        return super().__contains__(item)


def empty_function() -> Function:
    return Function.create("main", [], [])


def test_tflite_names_count_up_per_base_and_skip_taken_ones():
    ex = _Exporter(empty_function(), "float")
    ex.names.add("w_2")                     # taken by someone else: skipped, not reused
    got = [ex._name(b) for b in ("w", "w", "b", "w", "w", "b", "")]
    assert got == ["w", "w_1", "b", "w_3", "w_4", "b_1", "t"]
    assert len(ex.names) == 8


def test_tflite_names_probe_each_candidate_once():
    ex = _Exporter(empty_function(), "float")
    ex.names = CountingSet()
    got = [ex._name("shape") for _ in range(3000)]
    assert got[:3] == ["shape", "shape_1", "shape_2"] and got[-1] == "shape_2999"
    assert ex.names.probes == 3000          # restarting at shape_1 each time would be ~4.5 million


def test_onnx_tensor_and_node_names_count_up_per_base():
    ex = GraphExporter(empty_function(), 21, "g")
    ex.used.add("s__2")
    assert [ex.claim(b) for b in ("s", "s", "s", "z", "")] == ["s", "s__1", "s__3", "z", "__1"]
    assert [ex.node_name(label, "Conv") for label in ("a", None, "a", None)] == ["a", "Conv", "a_1", "Conv_1"]


def test_onnx_names_probe_each_candidate_once():
    ex = GraphExporter(empty_function(), 21, "g")
    ex.used, ex._node_names = CountingSet(), CountingSet()
    names = [ex.claim("scale") for _ in range(2000)]
    nodes = [ex.node_name(None, "DequantizeLinear") for _ in range(2000)]
    assert names[-1] == "scale__1999" and nodes[-1] == "DequantizeLinear_1999"
    assert nodes[:3] == ["DequantizeLinear", "DequantizeLinear_1", "DequantizeLinear_2"]
    assert ex.used.probes == 2000 and ex._node_names.probes == 2000
