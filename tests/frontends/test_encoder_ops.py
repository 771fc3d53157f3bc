"""The ops and run-time patterns that encoder exports (PyTorch dynamo / TorchScript, Hugging Face
BERT-style models) write, each imported and run by quantir and compared with ONNX Runtime on
random inputs (float results within 1e-5), plus ONNX's own node tests for the new ops.

The graphs are small onnx.helper models with the exporters' real patterns (masks built at run time
from ``attention_mask``, ``Range(0, seq_len)`` from ``Shape``, ``mask[:, None, None, :].expand``,
``buffer[:, :seq_len]``, einsum attention), at the (batch, sequence) sizes of the MiniLM checks.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import quantir  # noqa: E402
from quantir import errors as quantir_errors  # noqa: E402
from quantir.errors import ShapeError  # noqa: E402
from quantir.frontends.onnx.conformance import run_case, supported_cases  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SIZES = [(1, 7), (3, 16), (2, 128)]
TOL = 1e-5
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def compare(m, feeds_list) -> float:
    """Largest |quantir - ORT| over every output of every feed; shapes and dtypes must match."""
    data = m.SerializeToString()
    module = quantir.load(m)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    worst = 0.0
    for feeds in feeds_list:
        ref = sess.run(None, feeds)
        got = list(quantir.run(module, feeds).values())
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
            if g.dtype.kind in "fiu":
                both_inf = np.isinf(r) & (g == r) if g.dtype.kind == "f" else np.zeros(r.shape, bool)
                diff = np.where(both_inf, 0, np.abs(g.astype(np.float64) - r.astype(np.float64)))
                worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
            else:
                assert (g == r).all()
    return worst


def ops_of(m) -> list[str]:
    return [op.name for op in quantir.load(m).functions[0].body]


def mask_feeds(names=("x", "mask"), hidden=8, seed=0):
    """x [b, s, hidden] float, mask [b, s] int64 with ragged padding (every row keeps >= 2 tokens)."""
    rng = np.random.default_rng(seed)
    out = []
    for b, s in SIZES:
        lengths = rng.integers(max(2, s // 2), s + 1, b)
        mask = (np.arange(s)[None, :] < lengths[:, None]).astype(np.int64)
        x = rng.standard_normal((b, s, hidden)).astype(np.float32)
        out.append(dict(zip(names, (x, mask))))
    return out


# -- the new ops ------------------------------------------------------------------------------

NEW_OPS = ("GatherElements", "GatherND", "CumSum", "Einsum", "Trilu")


@pytest.mark.parametrize("op", NEW_OPS)
def test_node_tests_of_new_ops_pass(op):
    cases = [c for c in supported_cases(REPO / ".cache") if c.op_type == op and "bfloat16" not in c.name]
    assert cases, f"no ONNX node tests for {op}"
    for c in cases:
        outcome = run_case(c)
        assert outcome.status == "pass", (c.name, outcome.reason)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_run_time_indices(axis):
    rng = np.random.default_rng(1)
    m = model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)],
              [vi("x", F, [3, 5, 4]), vi("i", I64, [3, 2, 4] if axis == 1 else [3, 5, 2] if axis == -1 else
                                        [2, 5, 4])], [vi("y", F, None)])
    n = {0: 3, 1: 5, -1: 4}[axis]
    shape = {0: (2, 5, 4), 1: (3, 2, 4), -1: (3, 5, 2)}[axis]
    feeds = [{"x": rng.standard_normal((3, 5, 4)).astype(np.float32), "i": rng.integers(-n, n, shape)}
             for _ in range(3)]
    assert compare(m, feeds) == 0.0


def test_gather_elements_and_gather_nd_refuse_indices_that_do_not_fit():
    ge = model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0, name="ge")],
               [vi("x", F, [3, 5]), vi("i", I64, [2, 6])], [vi("y", F, None)])
    with pytest.raises(ShapeError, match=r"'ge'.*indices \(2, 6\) are larger than data \(3, 5\) outside axis 0"):
        quantir.load(ge)
    nd = model([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=0, name="nd")],
               [vi("x", F, [3, 5]), vi("i", I64, [2, 3])], [vi("y", F, None)])
    with pytest.raises(ShapeError, match=r"'nd'.*do not index data \(3, 5\)"):
        quantir.load(nd)


@pytest.mark.parametrize("batch_dims,ishape", [(0, [4, 2]), (0, [2, 3, 1]), (1, [3, 2, 1]), (1, [3, 2])])
def test_gather_nd_matches_ort(batch_dims, ishape):
    rng = np.random.default_rng(2)
    m = model([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)],
              [vi("x", F, [3, 4, 5]), vi("i", I64, ishape)], [vi("y", F, None)])
    r = ishape[-1]
    sizes = np.array([3, 4, 5][batch_dims:batch_dims + r])
    feeds = [{"x": rng.standard_normal((3, 4, 5)).astype(np.float32),
              "i": (rng.integers(0, 1 << 20, ishape) % sizes - rng.integers(0, 2, ishape) * sizes).astype(np.int64)}
             for _ in range(3)]
    assert compare(m, feeds) == 0.0


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum_position_ids_from_the_mask(exclusive, reverse):
    """RoBERTa's position ids: cumsum(mask, 1) * mask + padding_idx, the axis a run-time input."""
    m = model([helper.make_node("CumSum", ["mask", "axis"], ["c"], exclusive=exclusive, reverse=reverse),
               helper.make_node("Mul", ["c", "mask"], ["p"]),
               helper.make_node("Add", ["p", "pad"], ["pos"]),
               helper.make_node("Cast", ["x"], ["xf"], to=F),
               helper.make_node("CumSum", ["xf", "faxis"], ["xs"], reverse=reverse)],
              [vi("x", F, ["b", "s", 8]), vi("mask", I64, ["b", "s"]), vi("axis", I64, []), vi("faxis", I64, [1])],
              [vi("pos", I64, None), vi("xs", F, None)], [("pad", np.int64(1))])
    feeds = [{**f, "axis": np.array(1, np.int64), "faxis": np.array([-2], np.int64)} for f in mask_feeds()]
    assert compare(m, feeds) <= TOL


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 1, -2])
def test_trilu_causal_mask_of_run_time_size(upper, k):
    """A causal mask of run-time size: Trilu(ones expanded to (s, s), s = Shape(x)[1])."""
    nodes = [helper.make_node("Shape", ["x"], ["shp"], start=1, end=2),
             helper.make_node("Concat", ["shp", "shp"], ["ss"], axis=0),
             helper.make_node("Expand", ["one11", "ss"], ["ones"]),
             helper.make_node("Trilu", ["ones"] + ([] if k is None else ["k"]), ["tri"], upper=upper),
             helper.make_node("Trilu", ["x"] + ([] if k is None else ["k"]), ["xt"], upper=upper)]
    inits = [("one11", np.ones((1, 1), np.float32))] + ([] if k is None else [("k", np.int64(k))])
    m = model(nodes, [vi("x", F, ["b", "s", 8])], [vi("tri", F, None), vi("xt", F, None)], inits)
    assert compare(m, [{"x": f["x"]} for f in mask_feeds()]) == 0.0


MATMUL_LIKE = [
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)]),
    ("bhid,bhjd->bhij", [(2, 3, 7, 8), (2, 3, 7, 8)]),
    ("bhij,bhjd->bhid", [(2, 3, 7, 7), (2, 3, 7, 8)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (1, 3, 5, 6)]),
    ("ij,jk->ik", [(4, 5), (5, 6)]),
    ("bqhd,bkhd->bhqk", [(2, 7, 3, 8), (2, 9, 3, 8)]),
    ("bhqk,bkhd->bqhd", [(2, 3, 7, 9), (2, 9, 3, 8)]),
    ("ik,kj->ji", [(4, 5), (5, 6)]),
    ("b i j , b j k -> b k i", [(3, 4, 5), (3, 5, 6)]),
]
GENERIC_EINSUM = [
    ("ij->ji", [(4, 5)]), ("ij->i", [(4, 5)]), ("...ii->...i", [(2, 4, 4)]), ("i,i", [(5,), (5,)]),
    ("bij,bj->bi", [(3, 4, 5), (3, 5)]), ("ijk,jl->ikl", [(2, 3, 4), (3, 5)]), ("bij,bjk", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bij,bkj->b", [(2, 3, 4), (2, 5, 4)]),
]


def _einsum_model(eq, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    return model([helper.make_node("Einsum", names, ["y"], equation=eq)],
                 [vi(n, F, list(s)) for n, s in zip(names, shapes)], [vi("y", F, None)]), names


@pytest.mark.parametrize("eq,shapes", MATMUL_LIKE)
def test_matmul_like_einsum_imports_as_matmul(eq, shapes):
    m, names = _einsum_model(eq, shapes)
    kinds = ops_of(m)
    assert "nn.matmul" in kinds and "nn.einsum" not in kinds, kinds
    rng = np.random.default_rng(3)
    feeds = [{n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)} for _ in range(2)]
    assert compare(m, feeds) <= TOL


@pytest.mark.parametrize("eq,shapes", GENERIC_EINSUM)
def test_other_einsum_equations_run_in_float(eq, shapes):
    m, names = _einsum_model(eq, shapes)
    assert "nn.einsum" in ops_of(m)
    rng = np.random.default_rng(4)
    feeds = [{n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)} for _ in range(2)]
    assert compare(m, feeds) <= TOL


def test_einsum_with_dynamic_dims_imports_as_matmul():
    m = model([helper.make_node("Einsum", ["q", "k"], ["s"], equation="bhid,bhjd->bhij")],
              [vi("q", F, ["b", 2, "s", 8]), vi("k", F, ["b", 2, "s", 8])], [vi("s", F, None)])
    assert "nn.einsum" not in ops_of(m)
    rng = np.random.default_rng(5)
    feeds = [{n: rng.standard_normal((b, 2, s, 8)).astype(np.float32) for n in "qk"} for b, s in SIZES]
    assert compare(m, feeds) <= TOL


@pytest.mark.parametrize("eq,why", [("ij,jk->ik->i", "more than one '->'"), ("ij,jk", "names 2 operands"),
                                    ("i1->i", "not a label"), ("i..j->i", "malformed ellipsis"),
                                    ("ij->ii", "repeats a label"), ("ij->k", "must appear in an input")])
def test_malformed_einsum_is_a_model_format_error_naming_the_node(eq, why):
    m = model([helper.make_node("Einsum", ["x"], ["y"], equation=eq, name="bad_einsum")],
              [vi("x", F, [4, 5])], [vi("y", F, None)])
    with pytest.raises(quantir_errors.ModelFormatError, match=why) as e:
        quantir.load(m)
    assert "bad_einsum" in str(e.value)


def test_einsum_term_that_does_not_fit_its_operand_is_a_shape_error():
    m = model([helper.make_node("Einsum", ["x"], ["y"], equation="ijk->i", name="bad_einsum")],
              [vi("x", F, [4, 5])], [vi("y", F, None)])
    with pytest.raises(ShapeError, match=r"bad_einsum.*'ijk' does not fit an operand of shape \(4, 5\)"):
        quantir.load(m)


def test_malformed_einsum_in_an_old_opset_model_is_refused_before_the_upgrade():
    """Opset 12 models are upgraded by ONNX's version converter, which hangs on "i..j->i"."""
    m = model([helper.make_node("Einsum", ["x"], ["y"], equation="i..j->i", name="bad_einsum")],
              [vi("x", F, [4, 5])], [vi("y", F, [4])], opset=12)
    with pytest.raises(quantir_errors.ModelFormatError, match=r"bad_einsum.*malformed ellipsis"):
        quantir.load(m)


# -- existing ops with run-time inputs, the way exporters write them ------------------------

def _scores_graph(mask_nodes, mask_out, extra_inits=()):
    """x [b, s, 8] -> scores x·xᵀ [b, 1, s, s] -> the mask -> softmax."""
    nodes = [helper.make_node("Unsqueeze", ["x", "ax1"], ["x4"]),
             helper.make_node("Transpose", ["x4"], ["xt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["x4", "xt"], ["scores"]),
             *mask_nodes,
             helper.make_node("Softmax", [mask_out], ["probs"], axis=-1)]
    return model(nodes, [vi("x", F, ["b", "s", 8]), vi("mask", I64, ["b", "s"])], [vi("probs", F, None)],
                 [("ax1", np.array([1], np.int64)), *extra_inits])


def test_hf_additive_mask():
    """(1 - mask[:, None, None, :]) * finfo(float32).min added to the scores."""
    m = _scores_graph([helper.make_node("Cast", ["mask"], ["mf"], to=F),
                       helper.make_node("Unsqueeze", ["mf", "ax12"], ["m4"]),
                       helper.make_node("Sub", ["one", "m4"], ["inv"]),
                       helper.make_node("Mul", ["inv", "fmin"], ["bias"]),
                       helper.make_node("Add", ["scores", "bias"], ["masked"])], "masked",
                      [("ax12", np.array([1, 2], np.int64)), ("one", np.float32(1)),
                       ("fmin", np.float32(np.finfo(np.float32).min))])
    assert compare(m, mask_feeds()) <= TOL


@pytest.mark.parametrize("fill", [float("-inf"), float(np.finfo(np.float32).min)])
def test_where_on_a_boolean_mask(fill):
    """masked_fill(~mask, -inf) / torch.where(mask, scores, finfo.min): Equal, Not, Where at run time."""
    m = _scores_graph([helper.make_node("Equal", ["mask", "zero"], ["pad"]),
                       helper.make_node("Not", ["pad"], ["keep"]),
                       helper.make_node("Unsqueeze", ["keep", "ax12"], ["k4"]),
                       helper.make_node("Where", ["k4", "scores", "fill"], ["masked"])], "masked",
                      [("ax12", np.array([1, 2], np.int64)), ("zero", np.int64(0)), ("fill", np.float32(fill))])
    assert compare(m, mask_feeds()) <= TOL


def test_hf_4d_mask_expanded_to_run_time_shape():
    """transformers' _prepare_4d_attention_mask: mask[:, None, None, :].expand(b, 1, s, s) with the
    shape from Shape ops, inverted, masked_fill(inverted.bool(), finfo.min)."""
    nodes = [helper.make_node("Cast", ["mask"], ["mf"], to=F),
             helper.make_node("Unsqueeze", ["mf", "ax12"], ["m4"]),
             helper.make_node("Shape", ["mask"], ["b"], start=0, end=1),
             helper.make_node("Shape", ["mask"], ["s"], start=1, end=2),
             helper.make_node("Concat", ["b", "one_i", "s", "s"], ["target"], axis=0),
             helper.make_node("Expand", ["m4", "target"], ["m4e"]),
             helper.make_node("Sub", ["one", "m4e"], ["inv"]),
             helper.make_node("Cast", ["inv"], ["invb"], to=B),
             helper.make_node("Where", ["invb", "fmin", "inv"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["masked"])]
    m = _scores_graph(nodes, "masked", [("ax12", np.array([1, 2], np.int64)), ("one_i", np.array([1], np.int64)),
                                        ("one", np.float32(1)), ("fmin", np.float32(np.finfo(np.float32).min))])
    assert "nn.dynamic_expand" in ops_of(m)
    assert compare(m, mask_feeds()) <= TOL


def test_torchscript_expand_target_through_where_equal():
    """TorchScript writes ``t.expand(b, 1, s, s)`` with its target through
    ``Where(Equal(target, -1), ones * -1 ..., target)``; the sizes are never -1, so it is the target."""
    nodes = [helper.make_node("Cast", ["mask"], ["mf"], to=F),
             helper.make_node("Unsqueeze", ["mf", "ax12"], ["m4"]),
             helper.make_node("Shape", ["mask"], ["shp"]),
             helper.make_node("Gather", ["shp", "zero"], ["b"], axis=0),
             helper.make_node("Gather", ["shp", "one"], ["s"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
             helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
             helper.make_node("Concat", ["b1", "one1", "s1", "s1"], ["cat"], axis=0),
             helper.make_node("Reshape", ["cat", "minus1"], ["target"]),
             helper.make_node("Shape", ["target"], ["tshape"]),
             helper.make_node("ConstantOfShape", ["tshape"], ["ones"],
                              value=numpy_helper.from_array(np.ones(1, np.int64))),
             helper.make_node("Mul", ["ones", "minus1"], ["neg"]),
             helper.make_node("Equal", ["target", "neg"], ["is_neg"]),
             helper.make_node("Where", ["is_neg", "ones", "target"], ["final"]),
             helper.make_node("Expand", ["m4", "final"], ["m4e"]),
             helper.make_node("Sub", ["onef", "m4e"], ["inv"]),
             helper.make_node("Mul", ["inv", "fmin"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["masked"])]
    m = _scores_graph(nodes, "masked", [("ax12", np.array([1, 2], np.int64)), ("zero", np.int64(0)),
                                        ("one", np.int64(1)), ("ax0", np.array([0], np.int64)),
                                        ("one1", np.array([1], np.int64)), ("minus1", np.array([-1], np.int64)),
                                        ("onef", np.float32(1)), ("fmin", np.float32(np.finfo(np.float32).min))])
    assert "nn.dynamic_expand" in ops_of(m)
    assert compare(m, mask_feeds()) <= TOL


def test_expand_of_a_dynamic_dim_to_an_unrelated_run_time_size_is_refused():
    """Only a static 1 of the data may broadcast to a run-time size: a dynamic dim of the data
    against another input's dim is not provably either, so the target must fold (and says so)."""
    m = model([helper.make_node("Shape", ["z"], ["zs"]), helper.make_node("Expand", ["x", "zs"], ["y"], name="e")],
              [vi("x", F, ["n", 3]), vi("z", F, ["m", 3])], [vi("y", F, None)])
    with pytest.raises(quantir_errors.UnsupportedOpError, match=r"node 'e' .*must be a constant"):
        quantir.load(m)


def test_positions_and_token_types_from_shape():
    """Range(0, seq_len, 1) from Shape, and HF's zeros buffer sliced to seq_len and expanded to (b, s)."""
    rng = np.random.default_rng(6)
    nodes = [helper.make_node("Shape", ["ids"], ["shp"]),
             helper.make_node("Gather", ["shp", "one"], ["s"], axis=0),
             helper.make_node("Range", ["zero", "s", "one"], ["pos"]),
             helper.make_node("Gather", ["pos_table", "pos"], ["pe"], axis=0),
             helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
             helper.make_node("Slice", ["buffer", "zero1", "s1", "ax1"], ["tt"]),
             helper.make_node("Expand", ["tt", "shp"], ["tte"]),
             helper.make_node("Gather", ["type_table", "tte"], ["te"], axis=0),
             helper.make_node("Gather", ["word_table", "ids"], ["we"], axis=0),
             helper.make_node("Add", ["we", "te"], ["e1"]),
             helper.make_node("Add", ["e1", "pe"], ["e"])]
    inits = [("one", np.int64(1)), ("zero", np.int64(0)), ("ax0", np.array([0], np.int64)),
             ("zero1", np.array([0], np.int64)), ("ax1", np.array([1], np.int64)),
             ("buffer", np.zeros((1, 512), np.int64)),
             ("pos_table", rng.standard_normal((512, 8)).astype(np.float32)),
             ("type_table", rng.standard_normal((2, 8)).astype(np.float32)),
             ("word_table", rng.standard_normal((100, 8)).astype(np.float32))]
    m = model(nodes, [vi("ids", I64, ["b", "s"])], [vi("e", F, None)], inits)
    kinds = ops_of(m)
    assert "nn.dynamic_slice" in kinds and "nn.range" in kinds
    assert compare(m, [{"ids": rng.integers(0, 100, (b, s))} for b, s in SIZES]) <= TOL


def test_elementwise_and_reductions_on_run_time_values():
    """IsNaN, And/Or/Not, Less/Greater, Max/Min, Pow, Sqrt, Erf, ReduceSum/ReduceMax (axes inputs),
    LayerNormalization and Gelu, all on values computed from the inputs."""
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-12),
             helper.make_node("Gelu", ["ln"], ["g"]),
             helper.make_node("Erf", ["g"], ["er"]),
             helper.make_node("Pow", ["ln", "two"], ["sq"]),
             helper.make_node("ReduceSum", ["sq", "axm1"], ["ss"], keepdims=1),
             helper.make_node("Sqrt", ["ss"], ["norm"]),
             helper.make_node("Max", ["norm", "eps"], ["nc"]),
             helper.make_node("Min", ["er", "g"], ["mn"]),
             helper.make_node("ReduceMax", ["mn", "ax1"], ["rmax"], keepdims=0),
             helper.make_node("Div", ["ln", "nc"], ["unit"]),
             helper.make_node("IsNaN", ["unit"], ["nan"]),
             helper.make_node("Not", ["nan"], ["ok"]),
             helper.make_node("Greater", ["g", "zero"], ["pos"]),
             helper.make_node("Less", ["g", "neg"], ["low"]),
             helper.make_node("Or", ["pos", "low"], ["either"]),
             helper.make_node("And", ["either", "ok"], ["keep"]),
             helper.make_node("Cast", ["mask"], ["mf"], to=F),
             helper.make_node("Unsqueeze", ["mf", "axm1"], ["m3"]),
             helper.make_node("Mul", ["unit", "m3"], ["um"]),
             helper.make_node("Where", ["keep", "um", "zero"], ["y"])]
    rng = np.random.default_rng(7)
    inits = [("gamma", rng.standard_normal(8).astype(np.float32)), ("beta", rng.standard_normal(8).astype(np.float32)),
             ("two", np.float32(2)), ("axm1", np.array([-1], np.int64)), ("ax1", np.array([1], np.int64)),
             ("eps", np.float32(1e-6)), ("zero", np.float32(0)), ("neg", np.float32(-0.1))]
    m = model(nodes, [vi("x", F, ["b", "s", 8]), vi("mask", I64, ["b", "s"])],
              [vi("y", F, None), vi("rmax", F, None)], inits, opset=20)
    assert compare(m, mask_feeds()) <= TOL


def test_new_ops_export_back_to_onnx():
    """quantir's float ONNX export writes the new ops (and the run-time Expand/Slice) as ONNX ops
    that ONNX Runtime runs to the same values as the original graph."""
    from quantir.backends.onnx import to_onnx
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("Shape", ["x"], ["shp"], start=1, end=2),
             helper.make_node("Concat", ["one1", "shp", "shp"], ["t3"], axis=0),
             helper.make_node("Expand", ["one111", "t3"], ["ones"]),
             helper.make_node("Trilu", ["ones"], ["causal"], upper=0),
             helper.make_node("Slice", ["buffer", "zero1", "shp", "ax1"], ["pos"]),
             helper.make_node("CumSum", ["x", "ax_s"], ["cs"], exclusive=1),
             helper.make_node("Einsum", ["cs", "cs"], ["sc"], equation="bid,bjd->bij"),
             helper.make_node("Mul", ["sc", "causal"], ["scm"]),
             helper.make_node("Einsum", ["scm"], ["diag"], equation="bii->bi"),
             helper.make_node("Shape", ["x"], ["bshape"], start=0, end=2),
             helper.make_node("Expand", ["pos", "bshape"], ["pos2"]),
             helper.make_node("GatherElements", ["diag", "pos2"], ["ge"], axis=1),
             helper.make_node("GatherND", ["x", "nd"], ["gn"], batch_dims=1)]
    inits = [("one1", np.array([1], np.int64)), ("one111", np.ones((1, 1, 1), np.float32)),
             ("buffer", np.arange(512, dtype=np.int64)[None]), ("zero1", np.array([0], np.int64)),
             ("ax1", np.array([1], np.int64)), ("ax_s", np.array(1, np.int64)),
             ("nd", np.zeros((3, 2, 1), np.int64))]
    m = model(nodes, [vi("x", F, [3, "s", 8])], [vi("ge", F, None), vi("gn", F, None)], inits)
    exported = to_onnx(quantir.load(m))
    kinds = {n.op_type for n in exported.graph.node}
    assert {"Trilu", "CumSum", "Einsum", "GatherElements", "GatherND", "Expand", "Slice", "MatMul"} <= kinds, kinds
    a = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    for s_len in (7, 16):
        feeds = {"x": rng.standard_normal((3, s_len, 8)).astype(np.float32)}
        for ra, rb in zip(a.run(None, feeds), b.run(None, feeds)):
            np.testing.assert_allclose(rb, ra, rtol=1e-6, atol=1e-6)


# -- the real model --------------------------------------------------------------------------

@pytest.mark.slow
def test_exported_minilm_matches_ort():
    path = REPO / ".cache/models/minilm_l6.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is not there; export it with scripts/export_minilm.py")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    module = quantir.load(path)
    rng = np.random.default_rng(8)
    for b, s in SIZES:
        lengths = rng.integers(max(2, s // 2), s + 1, b)
        lengths[0] = s
        mask = (np.arange(s)[None, :] < lengths[:, None]).astype(np.int64)
        ids = rng.integers(1000, 30522, (b, s)) * mask
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        feeds = {n: feeds[n] for n in names}
        ref = sess.run(None, feeds)[0]
        got = list(quantir.run(module, feeds).values())[0]
        assert np.abs(got - ref).max() <= TOL, (b, s)
