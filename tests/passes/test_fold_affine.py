"""Folding per-channel Mul/Add constants into the conv beside them: the same function as ONNX
Runtime computes for the original graph, at two input sizes, with fewer ops."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir import verify  # noqa: E402
from quantir.ir.dialects import nn  # noqa: E402
from quantir.passes.fold_affine import FoldAffine  # noqa: E402
from quantir.runtime import run  # noqa: E402

SIZES = [(1, 4, 9, 9), (2, 4, 6, 11)]


def fold_against_ort(model, sizes=SIZES, rng=None):
    """Fold; the folded module agrees with ORT on the original at every size. Returns (module, stats)."""
    rng = rng or np.random.default_rng(1)
    module = load_onnx(model, optimize=False)
    stats = FoldAffine().run(module).stats
    verify(module)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in sizes:
        x = rng.standard_normal(shape).astype(np.float32) * 3
        want = session.run(None, {"x": x})[0]
        got = list(run(module, {"x": x}).values())[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    return module, stats


def count(module, opdef):
    return sum(op.opdef is opdef for op in module.main.ops)


def const(name, array):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(array, np.float32)))


def lcnet_block(rng, second_pads):
    """PP-LCNetV3's shape: conv → add(bias) → mul(a) → add(b) → hard-swish → mul(a') → add(b') → conv."""
    inits = {"w1": rng.standard_normal((6, 4, 3, 3)).astype(np.float32),
             "bias": rng.standard_normal((1, 6, 1, 1)).astype(np.float32),
             "a": np.array([0.7], np.float32), "b": np.array([-0.3], np.float32),
             "a2": rng.uniform(0.2, 2, (6, 1, 1)).astype(np.float32), "b2": np.array([0.4], np.float32),
             "w2": rng.standard_normal((6, 1, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c1", "bias"], ["c1b"]),
             helper.make_node("Mul", ["a", "c1b"], ["m1"]),
             helper.make_node("Add", ["m1", "b"], ["s1"]),
             helper.make_node("HardSwish", ["s1"], ["h"]),
             helper.make_node("Mul", ["h", "a2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["s2"]),
             helper.make_node("Conv", ["s2", "w2"], ["y"], group=6, pads=second_pads)]
    return nodes, inits


def test_lcnet_block_padded_depthwise(make_onnx_model, rng):
    nodes, inits = lcnet_block(rng, [1, 1, 1, 1])
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, "H", "W"))], [("y", np.float32, None)], inits)
    module, stats = fold_against_ort(model)
    # bias, scale and shift go into the first conv; the second takes a2 and keeps an add of b2 / a2
    assert stats == {"after-conv:add": 2, "after-conv:mul": 1, "before-conv:mul (add kept)": 1}
    assert count(module, nn.MUL) == 0 and count(module, nn.ADD) == 1


def test_lcnet_block_unpadded_pointwise(make_onnx_model, rng):
    nodes, inits = lcnet_block(rng, [0, 0, 0, 0])
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, "H", "W"))], [("y", np.float32, None)], inits)
    module, stats = fold_against_ort(model)
    assert stats["before-conv:mul-add"] == 1
    assert count(module, nn.MUL) == 0 and count(module, nn.ADD) == 0 and count(module, nn.CONV) == 2


@pytest.mark.parametrize("op", ["Mul", "Div", "Sub", "Add"])
@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose_then_per_channel(op, group, make_onnx_model, rng):
    inits = {"w": rng.standard_normal((4, 3, 2, 2)).astype(np.float32),
             "c": rng.uniform(0.5, 2, (1, 3 * group, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["t"], strides=[2, 2], group=group),
             helper.make_node(op, ["t", "c"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, "H", "W"))], [("y", np.float32, None)], inits)
    module, stats = fold_against_ort(model)
    assert stats == {f"after-conv_transpose:{op.lower()}": 1} and count(module, nn.CONV_TRANSPOSE) == 1
    assert not any(op.opdef in (nn.MUL, nn.DIV, nn.ADD, nn.SUB) for op in module.main.ops)


def test_mul_feeding_a_padded_conv_folds(make_onnx_model, rng):
    """A scale alone passes any zero padding (0 · a = 0)."""
    inits = {"a": rng.uniform(-2, 2, (1, 4, 1, 1)).astype(np.float32),
             "w": rng.standard_normal((5, 4, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Conv", ["m", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])]
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, "H", "W"))], [("y", np.float32, None)], inits)
    module, stats = fold_against_ort(model)
    assert stats == {"before-conv:mul": 1} and count(module, nn.MUL) == 0


def test_left_alone(make_onnx_model, rng):
    """Refusals: a conv output with two users, a constant that varies over space, a shift before a
    padded conv with no scale to carry it, c - y; the module is unchanged and still agrees."""
    inits = {"w": rng.standard_normal((4, 4, 3, 3)).astype(np.float32),
             "spatial": rng.standard_normal((1, 1, 1, 9)).astype(np.float32),
             "c": rng.standard_normal((1, 4, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c1", "c"], ["m"]),
             helper.make_node("Add", ["c1", "m"], ["r"]),                 # c1 used twice
             helper.make_node("Mul", ["r", "spatial"], ["s"]),           # not per channel
             helper.make_node("Add", ["s", "c"], ["t"]),                 # shift before a padded conv
             helper.make_node("Conv", ["t", "w"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Sub", ["c", "c2"], ["y"])]                # c - y
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, 1, 9))], [("y", np.float32, None)], inits)
    module, stats = fold_against_ort(model, sizes=[(1, 4, 1, 9), (3, 4, 1, 9)])
    assert stats == {}
    assert count(module, nn.MUL) == 2 and count(module, nn.ADD) == 2 and count(module, nn.SUB) == 1


def test_zero_scale_keeps_the_shift_before_a_padded_conv(make_onnx_model, rng):
    """x · a + c before a padded conv moves only when no a is 0 (c / a)."""
    inits = {"a": np.array([1.0, 0.0, 2.0, -1.0], np.float32).reshape(1, 4, 1, 1),
             "c": rng.standard_normal((1, 4, 1, 1)).astype(np.float32),
             "w": rng.standard_normal((3, 4, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Add", ["m", "c"], ["s"]),
             helper.make_node("Conv", ["s", "w"], ["y"], pads=[1, 1, 1, 1])]
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, "H", "W"))], [("y", np.float32, None)], inits)
    module, stats = fold_against_ort(model)
    assert stats == {} and count(module, nn.MUL) == 1


def test_default_pipeline_runs_it(make_onnx_model, rng):
    nodes, inits = lcnet_block(rng, [0, 0, 0, 0])
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, "H", "W"))], [("y", np.float32, None)], inits)
    module = load_onnx(model)
    assert count(module, nn.MUL) == 0 and count(module, nn.ADD) == 0


def test_written_gelu_tail_stays(make_onnx_model, rng):
    """x·½·(1 + erf(x/√2)) → conv: the · ½ belongs to GELU's pattern, not to the conv."""
    inits = {"w": rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "r2": np.array(1.4142135, np.float32),
             "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32)}
    nodes = [helper.make_node("Div", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["x", "p"], ["g"]),
             helper.make_node("Mul", ["g", "half"], ["h"]), helper.make_node("Conv", ["h", "w"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, "H", "W"))], [("y", np.float32, None)], inits)
    module, stats = fold_against_ort(model)
    assert stats == {} and count(module, nn.MUL) == 2
