"""Hostile and damaged ONNX files: typed one-line errors, never a traceback or a forged line (issue 11)."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from quantir.cli.main import main  # noqa: E402
from quantir.errors import ModelFormatError, QuantirError, ShapeError, UnsupportedOpError, VerifyError  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CNN = ROOT / "models" / "fashion_mnist_cnn.onnx"
FORGED = "x\nquantir check: 0 violations"


def test_truncated_real_model_names_the_path(tmp_path):
    data = CNN.read_bytes()
    for cut in (1, 17, len(data) // 3, len(data) - 1):
        path = tmp_path / f"cut{cut}.onnx"
        path.write_bytes(data[:cut])
        with pytest.raises(ModelFormatError) as e:
            load_onnx(path)
        assert str(e.value).startswith(f"{path}: ")


def test_a_directory_is_not_a_model(tmp_path):
    (tmp_path / "dir.onnx").mkdir()
    with pytest.raises(ModelFormatError, match=r"dir\.onnx: no such file"):
        load_onnx(tmp_path / "dir.onnx")


def test_external_data_shorter_than_its_dims(tmp_path, make_onnx_model):
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    model = make_onnx_model([node], [("x", np.float32, (1, 4))], [("y", np.float32, (1, 4))], {"w": w})
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.bin", size_threshold=0)
    (tmp_path / "ext.bin").write_bytes((tmp_path / "ext.bin").read_bytes()[:40])
    with pytest.raises(ModelFormatError) as e:
        load_onnx(path)
    assert str(e.value).startswith(f"{path}: ")


def test_dequantize_without_zero_point_and_a_dynamic_scale():
    # fuzzer reproducer: was `TypeError: 'NoneType' object cannot be interpreted as an integer` in ops.py
    vi = helper.make_tensor_value_info
    node = helper.make_node("DequantizeLinear", ["q", "s"], ["y"], name="dq")
    graph = helper.make_graph([node], "g", [vi("q", TensorProto.INT8, (2, 3)), vi("s", TensorProto.FLOAT, ("N",))],
                              [vi("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)])
    with pytest.raises(UnsupportedOpError) as e:
        load_onnx(model)
    assert str(e.value) == ("<ModelProto>: node 'dq' (DequantizeLinear -> 'y'): DequantizeLinear without a zero "
                            "point needs a scale of known shape, got tensor<?xf32>; give the zero point or a "
                            "constant scale")


def _forging_model(path: Path, defined: bool) -> None:
    """A Relu whose input name holds a newline and a fake ``quantir check`` summary."""
    vi = helper.make_tensor_value_info
    node = helper.make_node("Relu", [FORGED], ["y"], name="r\nfake")
    inputs = [vi(FORGED if defined else "x", TensorProto.FLOAT, (1, 4))]
    graph = helper.make_graph([node], "g", inputs, [vi("y", TensorProto.FLOAT, (1, 4))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)]), str(path))


@pytest.mark.parametrize("command", ["check", "show"])
def test_a_name_with_a_newline_forges_no_line(tmp_path, capsys, command):
    path = tmp_path / "forge.onnx"
    _forging_model(path, defined=False)
    assert main([command, str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "0 violations'" in err
    assert err.startswith(f"quantir {command}: {path}: node 'r\\nfake' (Relu -> 'y') uses tensor "
                          f"'x\\nquantir check: 0 violations', which")


def test_show_escapes_names_in_the_ir(tmp_path, capsys):
    path = tmp_path / "forge.onnx"
    _forging_model(path, defined=True)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert not any(line.startswith("quantir check") for line in out.splitlines())
    assert '"x\\0Aquantir check: 0 violations"' in out


def _flip(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(3)
    if kind == 0:
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:
        del b[rng.randrange(len(b)):]
    else:
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 32)]
    return bytes(b)


def _damage(model: onnx.ModelProto, rng: random.Random) -> None:
    g = model.graph
    kind = rng.randrange(4)
    if kind == 0:
        t = rng.choice([t for t in g.initializer if len(t.dims)])
        t.dims[rng.randrange(len(t.dims))] = rng.choice([-1, 0, 5, 2**40])
    elif kind == 1:
        n = rng.choice([n for n in g.node if len(n.input)])
        del n.input[rng.randrange(len(n.input)):]
    elif kind == 2:
        n = g.node[rng.randrange(len(g.node))]
        if len(n.attribute):
            a = n.attribute[rng.randrange(len(n.attribute))]
            n.attribute.remove(a)
            n.attribute.append(helper.make_attribute(a.name, rng.choice([2, "SAME", 1.5, [1, 2]])))
    else:
        g.node[rng.randrange(len(g.node))].op_type = rng.choice(["Conv", "Gemm", "Concat", "LRN", "Slice", "Tile"])


def test_mutants_of_a_real_model_fail_typed(tmp_path):
    """200 byte-level and structural mutants: each imports or raises a QuantirError on one line."""
    data = CNN.read_bytes()
    rng = random.Random(11)
    outcomes = {"ok": 0, "typed": 0}
    for i in range(200):
        if i % 2:
            mutant = _flip(data, rng)
        else:
            model = onnx.ModelProto.FromString(data)
            _damage(model, rng)
            mutant = model.SerializeToString()
        path = tmp_path / f"m{i}.onnx"
        path.write_bytes(mutant)
        try:
            load_onnx(path)
            outcomes["ok"] += 1
        except QuantirError as e:
            assert "\n" not in str(e), str(e)
            outcomes["typed"] += 1
        assert path.read_bytes() == mutant
    assert outcomes["typed"] > 100, outcomes


def test_dims_mutant_of_a_real_weight(tmp_path):
    model = onnx.load(str(CNN))
    w = next(t for t in model.graph.initializer if len(t.dims) == 4)
    w.dims[0] += 1
    with pytest.raises(ModelFormatError, match=rf"initializer \d+ \('{w.name}'\): dims \[{w.dims[0]}, .* of FLOAT "
                                               rf"need \d+ bytes of raw_data, the file has \d+"):
        load_onnx(model)


def _one_node(node, inputs, inits=()) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "g", [vi(n, t, s) for n, t, s in inputs], [vi("y", TensorProto.FLOAT, None)],
                              list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)])


def test_dequantize_of_a_float_tensor():
    # fuzzer reproducer: imported, then `TypeError: dequantize: q must be an integer array` while calibrating
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="dq")
    model = _one_node(node, [("x", TensorProto.FLOAT, (2, 3))], [helper.make_tensor("s", TensorProto.FLOAT, (), [0.5])])
    with pytest.raises(VerifyError) as e:
        load_onnx(model)
    assert str(e.value) == ("<ModelProto>: node 'dq' (DequantizeLinear -> 'y'): the input 0 of DequantizeLinear "
                            "must be an integer tensor, got tensor<2x3xf32>")


def test_quantize_to_a_bool_zero_point():
    # fuzzer reproducer: `ValueError: Invalid integer data type 'b'.` in the QuantizeLinear kernel
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")
    inits = [helper.make_tensor("s", TensorProto.FLOAT, (), [0.5]), helper.make_tensor("z", TensorProto.BOOL, (), [0])]
    with pytest.raises(VerifyError, match=r"the zero point \(input 2\) of QuantizeLinear must be an integer tensor, "
                                          r"got tensor<i1>"):
        load_onnx(_one_node(node, [("x", TensorProto.FLOAT, (2, 3))], inits))


def test_conv_transpose_of_rank_one_tensors():
    # fuzzer reproducer: `IndexError: tuple index out of range` in conv_transpose's type rule
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="ct")
    model = _one_node(node, [("x", TensorProto.FLOAT, (3,)), ("w", TensorProto.FLOAT, (3,))])
    with pytest.raises(ShapeError, match=r"node 'ct' \(ConvTranspose -> 'y'\): conv_transpose expects x of rank >= 3 "
                                         r"and w of the same rank, got x \(3,\) and w \(3,\)"):
        load_onnx(model)


@pytest.mark.parametrize("scale", [float("inf"), float("nan")])
def test_resize_with_an_infinite_or_nan_scale(scale):
    # fuzzer reproducer: `OverflowError: cannot convert float infinity to integer` in resize's type rule
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="nearest")
    scales = helper.make_tensor("s", TensorProto.FLOAT, (4,), [1, 1, scale, 2])
    with pytest.raises(ShapeError, match=r"node 'up' \(Resize -> 'y'\): resize scales must be positive and finite"):
        load_onnx(_one_node(node, [("x", TensorProto.FLOAT, (1, 1, 2, 2))], [scales]))


def test_dequantize_with_a_float_zero_point():
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")
    inits = [helper.make_tensor("s", TensorProto.FLOAT, (), [0.5]), helper.make_tensor("z", TensorProto.FLOAT, (), [0])]
    with pytest.raises(VerifyError, match=r"the zero point \(input 2\) of DequantizeLinear must be an integer tensor"):
        load_onnx(_one_node(node, [("x", TensorProto.INT8, (2, 3))], inits))


def test_a_float_shape_input_is_a_typed_error(make_onnx_model):
    """Found by fuzz_models: a Reshape whose shape constant is float (here NaN) raised
    ``ValueError: cannot convert float NaN to integer`` from the importer."""
    model = make_onnx_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                            [("x", np.float32, [2, 3])], [("y", np.float32, None)],
                            {"s": np.array([np.nan, 6], np.float32)})
    with pytest.raises(VerifyError, match=r"'r' \(Reshape -> 'y'\): .*expected an integer tensor, got float32"):
        load_onnx(model)


def test_a_conv_transpose_weight_computed_at_run_time_is_checked(make_onnx_model):
    """Found by fuzz_models: the weight of a ConvTranspose was an activation whose batch dim is
    dynamic, so import could not check it, and the kernel's reshape raised ``ValueError``."""
    from quantir.runtime import run

    model = make_onnx_model([helper.make_node("Relu", ["w"], ["wr"], name="relu"),
                             helper.make_node("ConvTranspose", ["x", "wr"], ["y"], name="deconv")],
                            [("x", np.float32, [None, 4, 5, 5]), ("w", np.float32, [None, 4, 3, 3])],
                            [("y", np.float32, None)])
    fn = load_onnx(model).main
    x = np.ones((1, 4, 5, 5), np.float32)
    ok = run(fn, {"x": x, "w": np.ones((4, 4, 3, 3), np.float32)})
    assert ok["y"].shape == (1, 4, 7, 7)
    with pytest.raises(ShapeError, match=r"conv_transpose of x \[1, 4, 5, 5\] \(group 1\) needs a weight of "
                                         r"shape \[4, M/group, \*kernel\], got \[2, 4, 3, 3\]"):
        run(fn, {"x": x, "w": np.ones((2, 4, 3, 3), np.float32)})
