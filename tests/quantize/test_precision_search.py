"""The pure parts of automatic mixed precision (quantize.precision): budgets, output metrics, the
prefix search and the ranking."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantir.errors import CalibrationError
from quantir.quantize import precision as pr


@pytest.mark.parametrize("spec, kind, floor", [
    (0.99, "cosine", 0.99), ("0.997", "cosine", 0.997), ("cos:0.9", "cosine", 0.9), (1, "cosine", 1.0),
    ("25dB", "sqnr", 25.0), ("sqnr:30", "sqnr", 30.0), ("12.5 db", "sqnr", 12.5),
    ("top1:0.995", "top1", 0.995), ("argmax: 1", "top1", 1.0), ("TOP1:9e-1", "top1", 0.9)])
def test_budgets_parse(spec, kind, floor):
    b = pr.parse_budget(spec)
    assert (b.kind, b.floor) == (kind, floor)


@pytest.mark.parametrize("spec, decide", [(0.995, True), ("0.995", True), ("cos:0.995", False),
                                          ("cosine: 0.995", False)])
def test_a_plain_cosine_floor_also_judges_class_scores_and_cos_prefix_does_not(spec, decide):
    assert pr.parse_budget(spec).decide is decide


def test_a_cosine_budget_holds_class_score_outputs_top1_where_enough_positions_are_measured():
    # "z" scores 4 classes at 300 positions, its first two near-tied; every tenth position swaps them:
    # the cosine barely moves (0.99995), one argmax in ten flips
    z = np.tile([1.0, 0.99, 0.1, 0.0], (300, 1))
    got = z.copy()
    got[::10, :2] = got[::10, 1::-1]
    ref, out = [{"z": z}], [{"z": got}]
    cos = pr.output_cosine(ref, out)
    assert cos > 0.9999 and pr.output_top1(ref, out, names=("z",)) == pytest.approx(0.9)
    assert pr.score(pr.parse_budget(0.95), ref, out) == (cos, True)            # no class-score output named
    assert pr.score(pr.Budget("cosine", 0.95, decisions=("z",)), ref, out) == (pytest.approx(0.9), False)
    assert pr.output_top1(ref, out, names=("y",)) == 1.0                       # an output not named: not judged
    assert pr.decisive_positions(0.995) == 200 and pr.decisive_positions(0.9) == 10
    strict = pr.Budget("cosine", 0.995, decisions=("z",))
    few = [{"z": z[:150]}], [{"z": got[:150]}]                                 # 150 < 200 positions: not judged
    assert pr.score(strict, *few) == (pr.output_cosine(*few), True)
    assert "top-1 agreement of z (class scores, where 200 or more" in strict.describe()


def _graph(nodes, output_shape, inits=None):
    from onnx import TensorProto, helper, numpy_helper

    from quantir.api import load
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
                          [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 17)])
    return load(m).main


@pytest.mark.parametrize("nodes, shape, inits, scores", [
    ([("Softmax", ["x"], ["y"], {"axis": -1})], ["N", 6, 8], {}, True),
    ([("Softmax", ["x"], ["y"], {"axis": 1})], ["N", 6, 8], {}, False),          # not along the last axis
    ([("MatMul", ["x", "w"], ["m"], {}), ("Add", ["m", "b"], ["y"], {})], ["N", 6, 5],
     {"w": np.ones((8, 5)), "b": np.ones(5)}, True),                             # a linear head's logits
    ([("Transpose", ["x"], ["t"], {"perm": [0, 2, 1]}), ("MatMul", ["x", "t"], ["y"], {})], ["N", 6, 6],
     {}, False),                                                                 # two activations
    ([("Flatten", ["x"], ["f"], {}), ("Gemm", ["f", "w"], ["g"], {}), ("Reshape", ["g", "s"], ["y"], {})],
     ["N", 1, 5], {"w": np.ones((48, 5)), "s": np.array([-1, 1, 5])}, True),     # a reshape keeping the last axis
    ([("Flatten", ["x"], ["f"], {}), ("Gemm", ["f", "w"], ["g"], {}), ("Reshape", ["g", "s"], ["y"], {})],
     ["N", 5, 1], {"w": np.ones((48, 5)), "s": np.array([-1, 5, 1])}, False),    # ... moving it
    ([("Sigmoid", ["x"], ["y"], {})], ["N", 6, 8], {}, False),                   # per-class scores, not a choice
])
def test_class_score_outputs_are_a_softmax_or_a_linear_head_along_the_last_axis(nodes, shape, inits, scores):
    from onnx import helper
    inits = {k: np.asarray(v, np.int64 if k == "s" else np.float32) for k, v in inits.items()}
    fn = _graph([helper.make_node(op, i, o, **a) for op, i, o, a in nodes], shape, inits)
    assert pr.class_score_outputs(fn) == (("y",) if scores else ())


def test_a_cosine_budget_holds_each_quantity_of_a_detection_output_centered():
    # "z" holds 3 quantities at 400 positions: an offset around 100 (a box coordinate), a score, and a
    # quantity that does not vary; noise of 20% of the coordinate's spread hides in its mean for the cosine
    rng = np.random.default_rng(0)
    z = np.stack([100.0 + rng.normal(0, 1, 400), rng.uniform(0, 1, 400), np.full(400, 0.5)], axis=1)
    got = z.copy()
    got[:, 0] += rng.normal(0, 0.2, 400)
    got[:, 2] += rng.normal(0, 0.001, 400)                    # below one int8 step of the output's range
    ref, out = [{"z": z[None]}], [{"z": got[None]}]
    corr = pr.output_quantity_correlation(ref, out, ("z",))
    assert pr.output_cosine(ref, out) > 0.9999 and corr == pytest.approx(np.corrcoef(z[:, 0], got[:, 0])[0, 1])
    assert corr < 0.99
    budget = pr.Budget("cosine", 0.995, quantities=("z",))
    assert pr.score(budget, ref, out) == (pytest.approx(corr), False)
    assert pr.score(pr.Budget("cosine", 0.995), ref, out)[1]                   # not named: the cosine alone
    few = [{"z": z[None, :150]}], [{"z": got[None, :150]}]                    # 150 < 200 positions: not judged
    assert pr.score(budget, *few) == (pr.output_cosine(*few), True)
    same = [{"z": z[None]}], [{"z": np.where(np.arange(3) == 0, z, got)[None]}]
    assert pr.output_quantity_correlation(*same, ("z",)) == pytest.approx(1.0)   # the still one is not judged
    assert "correlation of each quantity of z" in budget.describe()


@pytest.mark.parametrize("nodes, shape, quantities", [
    ([("Transpose", ["x"], ["y"], {"perm": [0, 2, 1]})], ["N", 8, 6], True),    # 6 channels moved last
    ([("Sigmoid", ["x"], ["s"], {}), ("Transpose", ["s"], ["t"], {"perm": [0, 2, 1]}),
      ("Reshape", ["t", "r"], ["y"], {})], ["N", 8, 6], True),                  # ... seen through a reshape
    ([("Sigmoid", ["x"], ["y"], {})], ["N", 6, 8], False),                      # along its own last axis
    ([("LayerNormalization", ["x", "g"], ["y"], {})], ["N", 6, 8], False),      # a hidden state's features
    ([("Transpose", ["x"], ["y"], {"perm": [1, 0, 2]})], [6, "N", 8], False),   # axis 1 not moved last
    ([("Transpose", ["x"], ["t"], {"perm": [0, 2, 1]}), ("Softmax", ["t"], ["y"], {"axis": -1})],
     ["N", 8, 6], False),                                                       # class scores: their top-1
    ([("Concat", ["x"] * 9, ["c"], {"axis": 1}), ("Transpose", ["c"], ["y"], {"perm": [0, 2, 1]})],
     ["N", 8, 54], True),
    ([("Concat", ["x"] * 11, ["c"], {"axis": 1}), ("Transpose", ["c"], ["y"], {"perm": [0, 2, 1]})],
     ["N", 8, 66], False),                                                      # 66 channels: features
    ([("Unsqueeze", ["x", "a"], ["y"], {})], ["N", 6, 1, 8], False),            # not [N, positions, K]
])
def test_quantity_outputs_are_a_few_quantities_per_position(nodes, shape, quantities):
    from onnx import helper
    inits = {"a": np.array([2], np.int64), "r": np.array([0, 8, 6], np.int64), "g": np.ones(8, np.float32)}
    fn = _graph([helper.make_node(op, i, o, **a) for op, i, o, a in nodes], shape, inits)
    assert pr.quantity_outputs(fn) == (("y",) if quantities else ())


@pytest.mark.parametrize("spec", [None, "off", 0, "0", False])
def test_no_budget(spec):
    assert pr.parse_budget(spec) is None


@pytest.mark.parametrize("spec, match", [(1.5, r"in \(0, 1\].*'1.5dB'"), ("fast", "not understood"),
                                         ("top1:99.5", r"top-1 budget is a share of positions in \(0, 1\]"),
                                         ("top1:0", r"in \(0, 1\]"), ("top1:.", r"in \(0, 1\]"),
                                         (-0.5, r"in \(0, 1\]"), ([0.9], "number, a string or a callable")])
def test_bad_budgets_say_what_is_expected(spec, match):
    with pytest.raises(CalibrationError, match=match):
        pr.parse_budget(spec)


def test_a_callback_budget_is_called_with_both_outputs():
    seen = []
    b = pr.parse_budget(lambda ref, got: seen.append((ref, got)) or True)
    assert pr.score(b, [{"y": np.ones((2, 3))}], [{"y": np.ones((2, 3))}]) == (1.0, True)
    assert len(seen) == 1 and len(seen[0][0]) == 1


def test_output_cosine_is_the_worst_outputs_mean_over_rows():
    ref = [{"a": np.array([[1.0, 0.0], [0.0, 1.0]]), "b": np.array([[0.0], [0.0]])}]
    got = [{"a": np.array([[1.0, 0.0], [1.0, 0.0]]), "b": np.array([[0.0], [0.0]])}]
    assert pr.output_cosine(ref, got) == pytest.approx(0.5)    # rows of a: 1 and 0; of b: both zero, 1 and 1
    assert pr.output_cosine(ref, ref) == pytest.approx(1.0)
    ints = [{**ref[0], "i": np.arange(3)}], [{**got[0], "i": np.arange(3)[::-1].copy()}]
    assert pr.output_cosine(*ints) == pytest.approx(0.5)    # an integer output (a shape, an argmax) is not compared
    zero = [{"a": np.zeros((1, 2))}]
    assert pr.output_cosine(zero, zero) == 1.0                  # both zero: identical
    # over batches: each output's rows of every batch, then the worst output
    two = [{"a": np.array([[1.0, 0.0]]), "b": np.array([[1.0, 1.0]])}] * 2
    off = [{"a": np.array([[1.0, 0.0]]), "b": np.array([[1.0, 0.0]])},
           {"a": np.array([[1.0, 0.0]]), "b": np.array([[1.0, 1.0]])}]
    assert pr.output_cosine(two, off) == pytest.approx((np.sqrt(0.5) + 1) / 2)


def test_output_top1_is_the_worst_outputs_share_of_positions_whose_argmax_agrees():
    # [T=2, B=1, C=3] scores: the second position's argmax flips in "a"; "b" agrees everywhere
    a = np.array([[[0.1, 0.9, 0.0]], [[0.5, 0.4, 0.1]]])
    flipped = np.array([[[0.2, 0.8, 0.0]], [[0.4, 0.5, 0.1]]])
    b = np.arange(12.0).reshape(4, 3)
    assert pr.output_top1([{"a": a, "b": b}], [{"a": flipped, "b": b + 0.1}]) == pytest.approx(0.5)
    # over batches: positions of every batch together
    assert pr.output_top1([{"a": a}, {"a": a}], [{"a": flipped}, {"a": a}]) == pytest.approx(0.75)
    # an integer output is not compared; a scalar output is one position
    assert pr.output_top1([{"i": np.arange(3), "s": np.float32(1.0)}], [{"i": np.zeros(3, int),
                                                                         "s": np.float32(2.0)}]) == 1.0
    budget = pr.parse_budget("top1:0.75")
    assert pr.score(budget, [{"a": a}] * 2, [{"a": flipped}, {"a": a}]) == (0.75, True)
    assert "top-1 agreement along its last axis >= 0.75" in budget.describe()


def test_output_sqnr_is_the_worst_outputs():
    ref = [{"a": np.array([[3.0, 4.0]]), "b": np.array([[1.0, 0.0]])}]
    got = [{"a": np.array([[3.0, 4.0]]) * 1.01, "b": np.array([[1.1, 0.0]])}]
    assert pr.output_sqnr(ref, got) == pytest.approx(20.0)     # b: 1 / 0.01; a: 25 / 0.0025 = 40 dB
    assert pr.output_sqnr(ref, ref) == float("inf")
    assert pr.output_sqnr([{"a": np.array([2.0])}], [{"a": np.array([1.0])}]) == pytest.approx(10 * np.log10(4))


def _threshold(threshold: int):
    """A monotone test that passes from ``threshold`` on, and the calls it received."""
    calls: list[int] = []
    return calls, lambda k: calls.append(k) or k >= threshold


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(n=st.integers(1, 300), threshold=st.integers(1, 301))
def test_shortest_prefix_finds_the_threshold_of_a_monotone_test(n, threshold):
    calls, meets = _threshold(threshold)
    k, met = pr.shortest_prefix(n, meets)
    assert met == (threshold <= n)
    assert k == (threshold if threshold <= n else n)
    assert len(calls) == len(set(calls)) <= int(np.ceil(np.log2(n))) + 1
    assert calls[0] == n   # the whole ranking first: the budgets met so far needed most of it


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(n=st.integers(1, 300), threshold=st.integers(1, 301))
def test_rising_prefix_finds_the_same_threshold_from_below(n, threshold):
    calls, meets = _threshold(threshold)
    assert pr.rising_prefix(n, meets) == ((threshold, True) if threshold <= n else (n, False))
    assert calls[0] == 1 and len(calls) == len(set(calls))


def test_rank_puts_the_coarsest_rounding_first():
    rng = np.random.default_rng(0)
    x = rng.normal(size=1000)
    classes = {1: ["fine"], 2: ["coarse"]}
    params = {"fine": (float(np.abs(x).max() / 127), 0, -4.0, 4.0),
              "coarse": (float(np.abs(x).max() / 8), 0, -4.0, 4.0)}   # 16 steps only
    ranked = pr.rank(classes, {n: pr.rounding_powers(x, p) for n, p in params.items()})
    assert [c.names for c in ranked] == [["coarse"], ["fine"]]
    assert all(c.sqnr16 > c.sqnr8 for c in ranked)


def test_power_sums_over_batches_rank_as_the_whole():
    """promote sums each batch's powers instead of keeping the tensors: the same SQNRs as one array."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 50))
    param = (float(np.abs(x).max() / 100), 3, float(x.min()), float(x.max()))
    whole = pr.rank({1: ["t"]}, {"t": pr.rounding_powers(x, param)})[0]
    parts = pr.rank({1: ["t"]}, {"t": sum(pr.rounding_powers(b, param) for b in np.split(x, 3))})[0]
    assert np.isclose(whole.sqnr8, parts.sqnr8, rtol=1e-12) and np.isclose(whole.sqnr16, parts.sqnr16, rtol=1e-12)


def test_a_whole_ranking_a_kernel_refuses_is_searched_from_below():
    """When promoting every class is refused (a scale an int16 Prepare rejects), smaller prefixes
    are still measured: the search climbs from one class instead of giving up."""
    from types import SimpleNamespace

    from quantir.errors import QuantirError
    rng = np.random.default_rng(0)
    names = [f"t{i}" for i in range(8)]
    # t0 has the coarsest int8 rounding, so it ranks first; then t1, ...
    values = {n: rng.normal(size=256) * (8 - i) for i, n in enumerate(names)}
    engine = SimpleNamespace(run=lambda batch: values)
    statistics = SimpleNamespace(kept=[{"x": np.zeros((1, 2))}], held_out=[], make_engine=lambda *a: engine)
    class Named:   # a value: its name (hashed by identity, as IR values are)
        def __init__(self, name):
            self.name_hint = name

    params = {Named(n): SimpleNamespace(scale=0.05, zero_point=0, rmin=-6.4, rmax=6.35) for n in names}
    measured = []

    def evaluate(promoted):
        measured.append(len(promoted))
        if len(promoted) == len(names):
            raise QuantirError("int16 Prepare refuses a scale")
        return 0.9 + 0.01 * len(promoted), len(promoted) >= 3

    chosen, report = pr.promote(None, statistics, SimpleNamespace(engine="x"), params, pr.parse_budget(0.93),
                                evaluate, lambda: {i: [n] for i, n in enumerate(names)})
    assert report.met and chosen == ("t0", "t1", "t2") and "refuses" in report.refused
    assert measured[:2] == [0, 8] and 1 in measured


@pytest.mark.parametrize("a, b, kind, want", [
    (0.99737, 0.99738, "cosine", True),     # 0.00263 against 0.00262: within 5% of the distance to 1
    (0.99700, 0.99738, "cosine", False),
    (0.9802, 0.981, "top1", True), (0.97, 0.981, "top1", False),
    (29.85, 30.0, "sqnr", True), (29.7, 30.0, "sqnr", False),
    (0.0, 1.0, "callback", False), (1.0, 1.0, "callback", True)])
def test_at_least_about_is_within_what_the_samples_resolve(a, b, kind, want):
    assert pr.at_least_about(a, b, kind) is want
    assert pr.at_least_about(b, b, kind)   # a tie is never worse


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_at_least_about_holds_whatever_is_at_least_as_good(a, b):
    if a >= b:
        assert pr.at_least_about(a, b, "cosine")
