"""Real models through import -> export -> ONNX Runtime, against ONNX Runtime on the original file.

Two round trips per model:
- *raw* (``load_onnx(optimize=False)``, exported at the original opset or 13, the oldest
  quantir imports): the same graph comes back (constants folded at import), so every
  tensor both models compute — not only the outputs — must be bitwise equal. This is the
  strong check: the light models' weights are constant fills, which makes their softmax
  outputs uniform whatever the input. Dropout masks are left out: the opset 9 -> 13
  upgrade changes their type from float to bool (Dropout-12).
  (At the default opset 21 ONNX Runtime runs AveragePool with its opset-19 kernel, which
  differs from the opset-7..18 one by ~2e-7 relative on shufflenet: same graph, other kernel.)
- *default* (``load_onnx()``: BatchNormalization and Pad folded, identities removed): the
  graph differs, so the outputs must agree to 1e-6 relative (max |diff| / max |ref|).

The exported models also pass ``onnx.checker.check_model(full_check=True)``.
"""
from __future__ import annotations

import numpy as np
import pytest

from .ort_helpers import (EFFICIENTNET, FASHION_MNIST, LIGHT, light_path, onnx, random_feeds, rel_err, session,
                         with_all_outputs)
from quantir.backends.onnx import to_onnx
from quantir.frontends.onnx import load_onnx

MODELS = [pytest.param(light_path(n), id=n) for n in LIGHT] + [
    pytest.param(FASHION_MNIST, id="fashion_mnist_cnn"),
    pytest.param(EFFICIENTNET, id="efficientnet_lite0"),
]
MAKERS = {FASHION_MNIST: "scripts/train_fashion_mnist.py", EFFICIENTNET: "scripts/export_efficientnet_lite0.py"}


def _require(path):
    if not path.is_file():
        pytest.skip(f"{path} is absent: run {MAKERS.get(path, 'its script')} to make it")


def _computed_names(model: "onnx.ModelProto") -> set[str]:
    """Names of tensors computed by nodes (not constant fills, not Dropout masks)."""
    return {o for n in model.graph.node if n.op_type not in ("Constant", "ConstantOfShape")
            for o in (n.output[:1] if n.op_type == "Dropout" else n.output) if o}


def _opset(model: "onnx.ModelProto") -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _with_outputs(model: "onnx.ModelProto", names: list[str]) -> "onnx.ModelProto":
    full = with_all_outputs(model)
    keep = set(names) | {o.name for o in model.graph.output}
    kept = [o for o in full.graph.output if o.name in keep]
    del full.graph.output[:]
    full.graph.output.extend(kept)
    return full


@pytest.fixture(scope="module", params=MODELS)
def reference(request):
    """The raw export, the tensors it shares with the original, the feeds, and ORT's values of
    those tensors on the original model: one reference session serves both tests of a model
    (a module-scoped parametrized fixture, so pytest runs them model by model)."""
    path = request.param
    _require(path)
    original = onnx.load(str(path))
    exported = to_onnx(load_onnx(path, optimize=False), opset=max(13, _opset(original)))
    shared = sorted(_computed_names(exported) & _computed_names(original))
    ref = session(_with_outputs(original, shared))
    feeds = random_feeds(ref, np.random.default_rng(0))
    want = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
    return path, original, exported, shared, feeds, want


def test_raw_round_trip_is_bitwise_on_every_tensor(reference):
    _, original, exported, shared, feeds, want = reference
    onnx.checker.check_model(exported, full_check=True)
    assert len(shared) >= len(exported.graph.node) // 2, "names of intermediate tensors were lost"
    got = session(_with_outputs(exported, shared))
    have = dict(zip([o.name for o in got.get_outputs()], got.run(None, feeds)))
    assert list(have)[:len(exported.graph.output)] == [o.name for o in exported.graph.output]
    differ = [n for n in [*(o.name for o in original.graph.output), *shared]
              if not (have[n].dtype == want[n].dtype and have[n].shape == want[n].shape
                      and np.array_equal(have[n], want[n], equal_nan=True))]
    assert not differ, f"{len(differ)} of {len(shared)} tensors differ, first {differ[:5]}"


def test_default_round_trip_matches_original(reference):
    path, original, _, _, feeds, want = reference
    exported = to_onnx(load_onnx(path))
    onnx.checker.check_model(exported, full_check=True)
    got = session(exported)
    names = [o.name for o in original.graph.output]
    assert [i.name for i in got.get_inputs()] == list(feeds)
    assert [o.name for o in got.get_outputs()] == names
    for name, have in zip(names, got.run(None, feeds)):
        assert have.dtype == want[name].dtype and have.shape == want[name].shape, name
        err = rel_err(have, want[name])
        assert err <= 1e-6, f"output '{name}': relative error {err:.2e}"
