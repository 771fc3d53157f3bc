"""Issue 11, item 2: folding and splats are bounded, whatever sizes a file asks for.

Reproducers: a ~125-byte ONNX file whose ConstantOfShape([16, 2**15, 2**15]) feeds an Add
(64 GiB if materialized), the same with Expand, Tile, Pad and Range, and a ~140-byte MLIR
file with ``dense<1.0> : tensor<536870912xf32>`` through ``opt --canonicalize`` (2 GiB if its
splat is hashed by its bytes). Each command runs in a child process whose peak RSS (VmHWM)
is read back. Plus: canonicalize stays linear in structure and right on thousands of pairs.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantir.errors import ShapeError
from quantir.ir import Function, Module
from quantir.ir.attributes import DenseElementsAttr, arrays_equal, lazy_splat, splat_value
from quantir.passes import Canonicalize
from quantir.passes.fold_constants import FoldConstants, FoldConstantsOptions, fold_op, make_constant
from quantir.passes.shape_inference import ShapeInference
from quantir.ir.dialects import func, nn
from quantir.text import parse_module
from quantir.types import TensorType, f32, parse_type

MB = 1 << 20
RSS_LIMIT = 300 * MB

# Runs quantir's CLI in this interpreter and reports the process's peak RSS on the last line.
_CHILD = """
import sys
from quantir.cli.main import main
rc = main(sys.argv[1:])
sys.stdout.flush()
peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(f"VmHWM_KB {peak} rc {rc}", file=sys.stderr)
"""


def run_cli(*argv: str) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr without the RSS line, peak RSS in bytes) of ``quantir ARGV``."""
    p = subprocess.run([sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, timeout=60)
    *lines, last = p.stderr.rstrip("\n").split("\n")
    assert last.startswith("VmHWM_KB"), p.stderr[-2000:]
    _, kb, _, rc = last.split()
    return int(rc), p.stdout, "\n".join(lines), int(kb) * 1024


def _save(path, nodes, inits) -> str:
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


X23 = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "x")
ADD = helper.make_node("Add", ["e", "e"], ["y"])


def constant_of_shape_model(path, shape) -> str:
    one = numpy_helper.from_array(np.array([1.0], np.float32))
    return _save(path, [helper.make_node("ConstantOfShape", ["s"], ["e"], value=one), ADD], [_i64("s", shape)])


HOSTILE = {
    # name: (nodes, initializers, the op left unfolded)
    "expand": ([helper.make_node("Expand", ["x", "s"], ["e"]), ADD], [X23, _i64("s", [2**13, 2**14, 1, 1])],
               "nn.expand"),
    "tile": ([helper.make_node("Tile", ["x", "r"], ["e"]), ADD], [X23, _i64("r", [2**14, 2**15])], "nn.tile"),
    "pad": ([helper.make_node("Pad", ["x", "p"], ["e"]), ADD], [X23, _i64("p", [2**16] * 4)], "nn.pad"),
    "range": ([helper.make_node("Range", ["a", "b", "d"], ["e"]), ADD],
              [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("a", 0), ("b", 2**33), ("d", 1))],
              "nn.range"),
}


# -- the reproducers, end to end -----------------------------------------------------------------

@pytest.mark.parametrize("shape", [[1, 2**14, 2**15], [16, 2**15, 2**15]])
def test_show_folds_constant_of_shape_to_a_lazy_splat(tmp_path, shape):
    path = constant_of_shape_model(tmp_path / "cos.onnx", shape)
    rc, out, err, peak = run_cli("show", path)
    assert (rc, err) == (0, "")
    t = "x".join(map(str, shape)) + "xf32"
    # ConstantOfShape(1.0) + itself: folded to one splat of 2.0, never materialized
    assert f"arith.constant dense<2.000000e+00> : tensor<{t}>" in out
    assert peak < RSS_LIMIT, f"peak RSS {peak / MB:.0f} MB"


def test_a_splat_numpy_cannot_index_stays_unfolded(tmp_path):
    rc, out, err, peak = run_cli("show", constant_of_shape_model(tmp_path / "cos.onnx", [2**62, 2**62]))
    assert (rc, err) == (0, "")
    assert '"nn.constant_of_shape"() {shape = array<i64: 4611686018427387904, 4611686018427387904>' in out


def test_a_lazy_splat_too_large_for_tflite_is_refused(tmp_path):
    model = constant_of_shape_model(tmp_path / "cos.onnx", [16, 2**15, 2**15])
    rc, out, err, peak = run_cli("convert", model, "-o", str(tmp_path / "m.tflite"))
    assert rc == 1 and err == ("quantir convert: constant 'y' of shape [16, 32768, 32768] needs 68719476736 bytes; "
                               "a .tflite file holds less than 2 GiB")
    assert peak < RSS_LIMIT and not (tmp_path / "m.tflite").exists()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_show_leaves_a_huge_fold_unfolded(tmp_path, name):
    nodes, inits, op = HOSTILE[name]
    rc, out, err, peak = run_cli("show", _save(tmp_path / f"{name}.onnx", nodes, inits))
    assert (rc, err) == (0, "")
    assert f'"{op}"' in out and '"nn.add"' in out
    assert peak < RSS_LIMIT, f"peak RSS {peak / MB:.0f} MB"


def test_canonicalize_a_huge_splat_without_materializing_it(tmp_path):
    path = tmp_path / "splat.mlir"
    t = "tensor<536870912xf32>"
    path.write_text(f"func.func @main() -> ({t}, {t}) {{\n"
                    f"  %0 = arith.constant dense<1.0> : {t}\n"
                    f"  %1 = arith.constant dense<1.0> : {t}\n"
                    f"  return %0, %1 : {t}, {t}\n}}\n")
    rc, out, err, peak = run_cli("opt", "--canonicalize", str(path))
    assert (rc, err) == (0, "")
    assert out.count("arith.constant") == 1        # the two splats are one constant (CSE)
    assert f"%cst = arith.constant dense<1.000000e+00> : {t}" in out
    assert f"return %cst, %cst : {t}, {t}" in out
    assert peak < RSS_LIMIT, f"peak RSS {peak / MB:.0f} MB"


def test_many_mid_sized_splats_stay_lazy(tmp_path):
    # 300 lines of ~60 bytes, each 32 MiB if materialized: 9.4 GiB in all
    t = "tensor<4194304xf64>"
    lines = [f"  %c{i} = arith.constant dense<{i}.5> : {t}" for i in range(300)]
    path = tmp_path / "splats.mlir"
    path.write_text(f"func.func @main() -> {t} {{\n" + "\n".join(lines) + f"\n  return %c299 : {t}\n}}\n")
    rc, out, err, peak = run_cli("opt", "--canonicalize", str(path))
    assert (rc, err) == (0, "")
    assert out.count("arith.constant") == 1 and f"dense<2.995000e+02> : {t}" in out
    assert peak < RSS_LIMIT, f"peak RSS {peak / MB:.0f} MB"


# -- fold_op's budget -------------------------------------------------------------------------------

def _fn_with(opdef, operands: list[np.ndarray], result_types, **attrs):
    fn = Function.create("f", [], [])
    values = [fn.body.append(make_constant(a)).results[0] for a in operands]
    op = fn.body.append(opdef.build(values, result_types, **attrs))
    fn.body.append(func.RETURN.build(op.results, []))
    fn.update_type()
    return Module([fn]), op


def test_splats_fold_lazily():
    big = (16, 2**15, 2**15)
    module, add = _fn_with(nn.ADD, [lazy_splat(1.5, big, np.float32), lazy_splat(2.0, (1,), np.float32)],
                           [TensorType(big, f32)])
    [value] = fold_op(add)
    assert value.shape == big and value.dtype == np.float32
    assert splat_value(value) == np.float32(3.5) and all(s == 0 for s in value.strides)


def test_a_move_of_a_splat_is_a_splat():
    module, tile = _fn_with(nn.TILE, [lazy_splat(7, (2, 3), np.int64)],
                            [TensorType((2**20, 3 * 2**20), parse_type("i64"))], repeats=[2**19, 2**20])
    [value] = fold_op(tile)
    assert value.shape == (2**20, 3 * 2**20) and splat_value(value) == 7


def test_budget_keeps_manufactured_data_unfolded_and_rearranged_data_folded():
    x = np.arange(100, dtype=np.float32).reshape(10, 10)
    _, tile = _fn_with(nn.TILE, [x], [TensorType((20, 10), f32)], repeats=[2, 1])
    assert fold_op(tile, max_bytes=799) is None                   # 800 bytes made from 400
    np.testing.assert_array_equal(fold_op(tile, max_bytes=800)[0], np.tile(x, (2, 1)))
    _, transpose = _fn_with(nn.TRANSPOSE, [x], [TensorType((10, 10), f32)], perm=[1, 0])
    np.testing.assert_array_equal(fold_op(transpose, max_bytes=1)[0], x.T)   # no more elements than its input


def test_fold_pass_option_and_stats():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    module, tile = _fn_with(nn.TILE, [x], [TensorType((2**14, 3 * 2**15), f32)], repeats=[2**13, 2**15])
    result = FoldConstants().run(module)                          # 6 GiB: over the 64 MiB default
    assert not result.modified and tile.block is not None
    small, tile2 = _fn_with(nn.TILE, [x], [TensorType((4, 3), f32)], repeats=[2, 1])
    assert FoldConstants(FoldConstantsOptions(max_bytes=47)).run(small).stats == {}
    assert FoldConstants(FoldConstantsOptions(max_bytes=48)).run(small).stats == {"fold:nn.tile": 1}


def test_range_of_unknown_length_is_left_unfolded():
    scalars = [np.array(v, np.float32) for v in (0, 2**33, 1)]
    _, rng = _fn_with(nn.RANGE, scalars, [TensorType((None,), f32)])
    assert fold_op(rng) is None                                  # 32 GiB: the kernel's check refused it
    _, small = _fn_with(nn.RANGE, [np.array(v, np.float32) for v in (0, 5, 2)], [TensorType((None,), f32)])
    np.testing.assert_array_equal(fold_op(small)[0], np.array([0, 2, 4], np.float32))


# -- splats as attributes ---------------------------------------------------------------------------

def test_splat_attributes_hash_and_compare_by_value():
    t = TensorType((536870912,), f32)
    a = DenseElementsAttr(lazy_splat(1.0, t.shape, np.float32), t)
    b = DenseElementsAttr(lazy_splat(1.0, t.shape, np.float32), t)
    c = DenseElementsAttr(lazy_splat(2.0, t.shape, np.float32), t)
    assert a == b and hash(a) == hash(b) and a != c
    small = TensorType((4,), f32)
    assert DenseElementsAttr(np.ones(4, np.float32), small) == DenseElementsAttr(lazy_splat(1, (4,), np.float32), small)
    assert not arrays_equal(np.array([1, 1, 1, 2], np.float32), lazy_splat(1, (4,), np.float32))
    # bits, as MLIR uniques attributes: -0.0 is not 0.0
    assert not arrays_equal(np.zeros(2, np.float32), lazy_splat(-0.0, (2,), np.float32))


def test_cse_merges_a_materialized_and_a_lazy_splat_of_one_value():
    module = parse_module("""
      func.func @f() -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
        %0 = arith.constant dense<1.0> : tensor<4xf32>
        %1 = arith.constant dense<[1.0, 1.0, 1.0, 1.0]> : tensor<4xf32>
        %2 = arith.constant dense<[1.0, 1.0, 1.0, 2.0]> : tensor<4xf32>
        return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
      }""")
    assert Canonicalize().run(module).stats == {"cse:arith.constant": 1}
    out = module.main.outputs
    assert out[0] is out[1] and out[2] is not out[0]


# -- shape inference on huge dims ---------------------------------------------------------------------

def test_shape_inference_multiplies_huge_dims_exactly():
    fn = Function.create("f", [TensorType((2**31, 2**31), f32)], [])
    tile = fn.body.append(nn.TILE.build([fn.arguments[0]], [TensorType((None, None), f32)], repeats=[2**31, 2**31]))
    fn.body.append(func.RETURN.build(tile.results, []))
    fn.update_type()
    ShapeInference().run(Module([fn]))
    assert tile.results[0].type.shape == (2**62, 2**62)           # int64 products would have wrapped to 0


# -- canonicalize: linear, and right on thousands of pairs ---------------------------------------------

T = "tensor<4xf32>"
Q = "tensor<4x!quant.uniform<i8:f32, 0.5>>"


def _pairs(n: int, fanout: bool) -> str:
    lines, v = [f"func.func @main(%x: {T}) -> {T} {{"], "%x"
    for i in range(n):
        lines.append(f"  %q{i} = quant.qcast {'%x' if fanout else v} : {T} to {Q}")
        lines.append(f"  %d{i} = quant.dcast %q{i} : {Q} to {T}")
        if fanout:
            lines.append(f'  %s{i} = "nn.add"({v}, %d{i}) : ({T}, {T}) -> {T}')
            v = f"%s{i}"
        else:
            v = f"%d{i}"
    return "\n".join(lines + [f"  return {v} : {T}", "}"]) + "\n"


def test_canonicalize_a_chain_of_thousands_of_pairs():
    module = parse_module(_pairs(3000, fanout=False))
    result = Canonicalize().run(module)
    assert result.stats == {"fold:quant.dcast": 3000, "erase:quant.qcast": 3000}
    assert [op.name for op in module.main.ops] == ["func.return"]
    assert module.main.outputs == [module.main.arguments[0]]


def test_canonicalize_thousands_of_pairs_on_one_argument():
    module = parse_module(_pairs(3000, fanout=True))
    result = Canonicalize().run(module)
    assert result.stats == {"fold:quant.dcast": 3000, "erase:quant.qcast": 3000}
    x = module.main.arguments[0]
    adds = [op for op in module.main.ops if op.name == "nn.add"]
    assert len(adds) == 3000 and [op.name for op in module.main.ops][-1] == "func.return"
    assert all(op.operands[1] is x for op in adds) and adds[0].operands[0] is x
    assert all(b.operands[0] is a.results[0] for a, b in zip(adds, adds[1:]))
    assert len(x.uses) == 3001 and all(op.block is module.main.body for op, _ in x.uses)


def test_input_shapes_become_python_ints_and_negative_dims_are_refused():
    from quantir.ir import StringAttr
    from quantir.passes.shape_inference import ShapeInferenceOptions
    fn = Function.create("f", [TensorType((None, 3), f32)], [])
    fn.arg_attrs = [{"quantir.name": StringAttr("x")}]
    tile = fn.body.append(nn.TILE.build([fn.arguments[0]], [TensorType((None, 3), f32)], repeats=[2**32, 1]))
    fn.body.append(func.RETURN.build(tile.results, []))
    fn.update_type()
    module = Module([fn])
    ShapeInference(ShapeInferenceOptions({"x": np.array([2**32, 3], np.int64)})).run(module)
    assert tile.results[0].type.shape == (2**64, 3) and type(tile.results[0].type.shape[0]) is int
    with pytest.raises(ShapeError, match=r"^input_shapes\['x'\] = \[-1, 3\]: a dim must be >= 0, or None for a "
                                         r"dynamic one$"):
        ShapeInference(ShapeInferenceOptions({"x": [-1, 3]})).run(module)


def test_what_folding_manufactures_is_bounded_per_body():
    fn = Function.create("f", [], [])
    x = fn.body.append(make_constant(np.arange(10, dtype=np.float32))).results[0]
    tiles = [fn.body.append(nn.TILE.build([x], [TensorType((40,), f32)], repeats=[4])) for _ in range(5)]
    fn.body.append(func.RETURN.build([t.results[0] for t in tiles], []))
    fn.update_type()
    module = Module([fn])
    # 160 bytes each, made from 40: two fit in 350 bytes, the other three stay ops
    result = FoldConstants(FoldConstantsOptions(max_bytes=1000, max_total_bytes=350)).run(module)
    assert result.stats == {"fold:nn.tile": 2}
    assert [op.name for op in module.main.ops].count("nn.tile") == 3


def test_concat_of_a_value_and_its_negation_cannot_double_without_bound():
    fn = Function.create("f", [], [])
    v = fn.body.append(make_constant(np.ones(1024, np.float32))).results[0]   # 4 KiB
    for _ in range(12):                    # 2**12 times larger at the end: 16 MiB
        n = v.type.shape[0]
        neg = fn.body.append(nn.UNARY["neg"].build([v], [v.type])).results[0]
        v = fn.body.append(nn.CONCAT.build([v, neg], [TensorType((2 * n,), f32)], axis=0)).results[0]
    fn.body.append(func.RETURN.build([v], []))
    fn.update_type()
    module = Module([fn])
    stats = FoldConstants(FoldConstantsOptions(max_bytes=1 << 20, max_total_bytes=2 << 20)).run(module).stats
    # the concats manufacture 8, 16, ... KiB: those up to 1 MiB fold (2 MiB in all), the rest stay ops
    assert stats["fold:nn.concat"] == 8 and [op.name for op in module.main.ops].count("nn.concat") == 4


def test_a_huge_lazy_splat_is_not_handed_to_a_kernel_that_would_materialize_it():
    big = lazy_splat(1.0, (2**16, 2**16), np.float32)            # 16 GiB if materialized
    _, matmul = _fn_with(nn.MATMUL, [big, np.ones((2**16, 1), np.float32)], [TensorType((2**16, 1), f32)])
    assert fold_op(matmul) is None
    _, reduce_ = _fn_with(nn.REDUCE["sum"], [big], [TensorType((1, 1), f32)], keepdims=1)
    assert fold_op(reduce_) is None
    small = lazy_splat(1.0, (4, 4), np.float32)
    _, ok = _fn_with(nn.MATMUL, [small, np.ones((4, 1), np.float32)], [TensorType((4, 1), f32)])
    np.testing.assert_array_equal(fold_op(ok)[0], np.full((4, 1), 4, np.float32))
