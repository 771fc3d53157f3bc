"""`quantir check` on dynamic exports (quantize/dynamic.py): each MatMulInteger, with the
DynamicQuantizeLinear of its input and its int8 weight, is one dynamic-range FULLY_CONNECTED, checked
for what the mode promises; files broken by hand give the violation, naming the node. Every broken
file still runs in ONNX Runtime: these are valid graphs that break the dynamic-range contract."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import quantir as qr
from quantir.cli.main import main as cli

from .test_dynamic import MINILM, embedding_proto, feeds, model_proto


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> onnx.ModelProto:
    d = tmp_path_factory.mktemp("dyncheck")
    onnx.save(model_proto(), d / "model.onnx")
    return onnx.load(qr.quantize_dynamic(d / "model.onnx").save(d / "model.dyn.onnx"))


def _check(proto: onnx.ModelProto, path: Path, capsys) -> tuple[int, str]:
    onnx.save(proto, path)
    import onnxruntime as ort   # the broken file is still a model ONNX Runtime runs
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds(1))
    code = cli(["check", str(path)])
    return code, capsys.readouterr().out


def _edit_initializer(proto: onnx.ModelProto, name: str, edit) -> onnx.ModelProto:
    p = onnx.ModelProto()
    p.CopyFrom(proto)
    for i, t in enumerate(p.graph.initializer):
        if t.name == name:
            p.graph.initializer[i].CopyFrom(numpy_helper.from_array(edit(numpy_helper.to_array(t).copy()), name))
            return p
    raise KeyError(name)


def test_a_dynamic_export_passes_with_each_matmulinteger_checked(exported, tmp_path, capsys):
    code, out = _check(exported, tmp_path / "ok.onnx", capsys)
    assert code == 0 and "3 ops checked, 0 violations" in out   # fc_a, fc_b, fc_g; the head stays float


def test_a_per_tensor_weight_scale_is_accepted(exported, tmp_path, capsys):
    # one scale for the whole weight (ONNX Runtime's per-tensor form) is a legal dynamic-range weight
    p = _edit_initializer(exported, "a_weight_scale", lambda s: np.asarray([s.max()], np.float32))
    code, out = _check(p, tmp_path / "tensor.onnx", capsys)
    assert code == 0 and "3 ops checked, 0 violations" in out


def _set(value):
    def edit(a):
        a.ravel()[0] = value
        return a
    return edit


@pytest.mark.parametrize("name, edit, message", [
    ("a_weight_quantized", _set(-128), "weight values must be in [-127, 127] (symmetric), found [-128,"),
    ("a_weight_zero_point", lambda z: np.asarray(3, np.int8), "its zero point must be 0, found [3]"),
    ("a_weight_scale", _set(-0.01), "weight scales in the rescale must be finite and positive"),
])
def test_broken_weights_and_scales_are_named(exported, tmp_path, capsys, name, edit, message):
    code, out = _check(_edit_initializer(exported, name, edit), tmp_path / "bad.onnx", capsys)
    assert code != 0 and "1 violation" in out, out
    line = next(x for x in out.splitlines() if "fc_a" in x)
    assert "FULLY_CONNECTED (dynamic range)" in line and message in line, line


def test_a_rescale_with_another_inputs_scale_is_a_violation(exported, tmp_path, capsys):
    # fc_g's rescale reads fc_a's run-time scale (x_scale, of another tensor): the product is not its own
    p = onnx.ModelProto()
    p.CopyFrom(exported)
    node = next(n for n in p.graph.node if n.op_type == "Mul" and "g_weight_scale" in n.input)
    node.input[list(node.input).index("r_scale")] = "x_scale"
    code, out = _check(p, tmp_path / "bad_scale.onnx", capsys)
    assert code != 0 and "1 violation" in out
    line = next(x for x in out.splitlines() if "fc_g" in x)
    assert "the scale of the DynamicQuantizeLinear that quantized this input" in line, line


def test_a_uint8_weight_is_a_violation(exported, tmp_path, capsys):
    p = _edit_initializer(exported, "b_weight_quantized", lambda w: (w.astype(np.int16) + 128).astype(np.uint8))
    p = _edit_initializer(p, "b_weight_zero_point", lambda z: np.asarray(128, np.uint8))
    code, out = _check(p, tmp_path / "u8.onnx", capsys)   # ONNX Runtime's QUInt8 weights: not LiteRT's
    assert code != 0 and "the weight must be stored as int8, found uint8" in out and "fc_b" in out


@pytest.mark.skipif(not MINILM.is_file(), reason="MiniLM not downloaded (make models)")
def test_minilm_dynamic_export_passes(tmp_path, capsys):
    # fast: about 2 s (quantize, save, check)
    out = qr.quantize_dynamic(MINILM).save(tmp_path / "minilm.dyn.onnx")
    assert cli(["check", str(out)]) == 0
    # 6 layers x (Q, K, V, O, FFN in, out) + the word and position tables (the token-type one is too small)
    assert "38 ops checked, 0 violations" in capsys.readouterr().out


def _rewire(proto: onnx.ModelProto, edit) -> onnx.ModelProto:
    p = onnx.ModelProto()
    p.CopyFrom(proto)
    edit(p.graph)
    return p


def _drop_restore(graph):
    # fc_a's product is no longer multiplied back by x's row scale: the output is (x / r)·W, not x·W
    restore = next(n for n in graph.node if n.op_type == "Mul" and list(n.output) == ["a"])
    product = next(n for n in graph.node if list(n.output) == [restore.input[0]])
    graph.node.remove(restore)
    product.output[0] = "a"


def _constant_rows(graph):
    # fc_b's product multiplied by a constant 1 where x's row scale belongs: a Mul is there, the rows are not
    restore = next(n for n in graph.node if n.op_type == "Mul" and list(n.output) == ["b"])
    graph.initializer.append(numpy_helper.from_array(np.ones(1, np.float32), "one"))
    restore.input[1] = "one"


@pytest.mark.parametrize("edit, node", [(_drop_restore, "fc_a"), (_constant_rows, "fc_b")])
def test_a_row_scale_not_given_back_is_a_violation(exported, tmp_path, capsys, edit, node):
    assert any(n.op_type == "Div" and n.input[1] == "x_row_scale" for n in exported.graph.node)   # rows scaled
    code, out = _check(_rewire(exported, edit), tmp_path / "rows.onnx", capsys)
    assert code != 0 and "1 violation" in out, out
    line = next(x for x in out.splitlines() if node in x)
    assert "the rescaled product must be multiplied by that same row scale" in line, line


def test_per_tensor_and_per_row_exports_pass(tmp_path, capsys):
    onnx.save(model_proto(), tmp_path / "model.onnx")
    from quantir.quantize.dynamic import DynamicConfig
    for a in ("per_tensor", "per_row"):
        out = qr.quantize_dynamic(tmp_path / "model.onnx", DynamicConfig(activations=a)).save(tmp_path / f"{a}.onnx")
        assert cli(["check", str(out)]) == 0
        assert "3 ops checked, 0 violations" in capsys.readouterr().out


def _other_ids(graph):
    # the row scales gathered with other indices than the rows: valid ONNX, each row scaled by another's scale
    graph.initializer.append(numpy_helper.from_array(np.zeros((1, 5), np.int64), "other_ids"))
    next(n for n in graph.node if n.op_type == "Gather" and n.input[0] == "e_table_scale").input[1] = "other_ids"


def _table_edit(value):
    def edit(graph):
        t = next(t for t in graph.initializer if t.name == "e_table_quantized")
        a = numpy_helper.to_array(t).copy()
        a.ravel()[0] = value
        t.CopyFrom(numpy_helper.from_array(a, t.name))
    return edit


def _scale_edit(graph):
    t = next(t for t in graph.initializer if t.name == "e_table_scale")
    a = numpy_helper.to_array(t).copy()
    a[3] = 0
    t.CopyFrom(numpy_helper.from_array(a, t.name))


@pytest.mark.parametrize("edit, message", [
    (None, None),
    (_table_edit(-128), "table values must be in [-127, 127] (symmetric), found [-128,"),
    (_other_ids, "the looked-up rows must be multiplied by their own scales"),
    (_scale_edit, "row scales must be finite and positive"),
])
def test_an_int8_embedding_table_is_checked_as_a_dynamic_range_lookup(tmp_path, capsys, edit, message):
    onnx.save(embedding_proto()[0], tmp_path / "emb.onnx")
    proto = onnx.load(qr.quantize_dynamic(tmp_path / "emb.onnx").save(tmp_path / "emb.dyn.onnx"))
    if edit is not None:
        edit(proto.graph)
    onnx.save(proto, tmp_path / "t.onnx")
    import onnxruntime as ort   # still a model ONNX Runtime runs
    ort.InferenceSession(str(tmp_path / "t.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"ids": np.array([[0, 7, 49, 3, 3]], np.int64)})
    code = cli(["check", str(tmp_path / "t.onnx")])
    out = capsys.readouterr().out
    if message is None:
        assert code == 0 and "2 ops checked, 0 violations" in out, out   # the lookup and fc
        return
    assert code != 0 and "1 violation" in out, out
    line = next(x for x in out.splitlines() if "embed" in x)
    assert "EMBEDDING_LOOKUP (dynamic range)" in line and message in line, line
