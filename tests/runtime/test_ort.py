"""The ONNX Runtime executor: same naming and feed contract as the reference interpreter,
intermediates exposed in one pass, one session reused, onnxruntime imported lazily."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from quantir.errors import ShapeError, UnsupportedOpError  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir import Function, Module, StringAttr  # noqa: E402
from quantir.ir.dialects import func, nn  # noqa: E402
from quantir.runtime import FeedError, FeedTypeError, Interpreter, run  # noqa: E402
from quantir.runtime.ort import OrtError, OrtExecutor  # noqa: E402
from quantir.types import FloatType, TensorType  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
FASHION_MNIST = REPO / "models" / "fashion_mnist_cnn.onnx"
F32 = FloatType("f32")


def chain(shape=(2, None)) -> Module:
    """x -> (add x x) "doubled" -> relu "r0" -> relu "r1" = y."""
    t = TensorType(shape, F32)
    fn = Function.create("main", [t], [], arg_attrs=[{"quantir.name": StringAttr("x")}])
    x = fn.arguments[0]
    x.name_hint = "x"
    v = fn.body.append(nn.ADD.build([x, x], label="double")).result
    v.name_hint = "doubled"
    for i in range(2):
        v = fn.body.append(nn.RELU.build([v], label=f"relu{i}")).result
        v.name_hint = f"r{i}"
    fn.body.append(func.RETURN.build([v], []))
    fn.res_attrs = [{"quantir.name": StringAttr("y")}]
    fn.update_type()
    return Module([fn])


def rel_err(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.max(np.abs(want)) if want.size else 0.0
    diff = np.max(np.abs(got - want)) if want.size else 0.0
    return float(diff / scale) if scale else float(diff)


def test_outputs_match_interpreter_and_session_is_reused(monkeypatch):
    m = chain()
    ex = OrtExecutor(m)
    assert ex.input_names == ["x"] and ex.output_names == ["y"]
    session = ex.session
    import quantir.backends.onnx as backend
    monkeypatch.setattr(backend, "export", lambda *a, **k: pytest.fail("run() must not export again"))
    for batch in (1, 5):   # a dynamic dim: any batch size on the same session
        x = np.random.default_rng(batch).standard_normal((2, batch)).astype(np.float32)
        out = ex.run({"x": x})
        assert list(out) == ["y"]
        np.testing.assert_array_equal(out["y"], run(m, {"x": x})["y"])
    assert ex.session is session


def test_expose_names_like_the_interpreter():
    m = chain()
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    ex = OrtExecutor(m, expose=["r0", "doubled", "x", "y"])
    out = ex.run({"x": x})
    want = run(m, {"x": x}, intermediates=["r0", "doubled", "x", "y"])
    assert list(out) == list(want) == ["y", "r0", "doubled", "x"]
    for k in want:
        np.testing.assert_array_equal(out[k], want[k])
    assert list(OrtExecutor(m, expose="all").run({"x": x})) == ["y", "doubled", "r0", "r1"]


def test_unknown_exposed_name_has_the_interpreters_message():
    m = chain()
    with pytest.raises(FeedError) as ours:
        OrtExecutor(m, expose=["nope"])
    with pytest.raises(FeedError) as theirs:
        Interpreter(m).value("nope")
    assert str(ours.value) == str(theirs.value)


FEED_ERRORS = {
    "missing": ({}, FeedError),
    "unknown": ({"x": np.zeros((2, 2), np.float32), "z": np.zeros(1, np.float32)}, FeedError),
    "dtype": ({"x": np.zeros((2, 2), np.float64)}, FeedTypeError),
    "rank": ({"x": np.zeros((2, 2, 1), np.float32)}, ShapeError),
    "dim": ({"x": np.zeros((3, 2), np.float32)}, ShapeError),
}


@pytest.mark.parametrize("case", sorted(FEED_ERRORS))
def test_feed_errors_are_the_interpreters(case):
    feeds, kind = FEED_ERRORS[case]
    m = chain()
    with pytest.raises(kind) as ours:
        OrtExecutor(m).run(feeds)
    with pytest.raises(kind) as theirs:
        run(m, feeds)
    assert str(ours.value) == str(theirs.value)


def test_expose_all_on_a_light_model_matches_interpreter():
    # not light_squeezenet: its final logits are ~4e9, where summation order alone moves the softmax
    # (1/996 against 1/1000 on some machines; tests/frontends/test_onnx_models.py judges it apart)
    module = load_onnx(LIGHT_DIR / "light_inception_v1.onnx")
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    _check_all_intermediates(module, {"data_0": x}, min_count=60)


def test_expose_all_on_fashion_mnist_matches_interpreter():
    if not FASHION_MNIST.is_file():
        pytest.skip(f"{FASHION_MNIST} is absent: run scripts/train_fashion_mnist.py to make it")
    module = load_onnx(FASHION_MNIST)
    arg = module.main.arguments[0]
    shape = [d if d is not None else 4 for d in arg.type.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    _check_all_intermediates(module, {Interpreter(module).input_names[0]: x}, min_count=3)


def _check_all_intermediates(module, feeds, min_count):
    ex = OrtExecutor(module, expose="all")
    got = ex.run(feeds)
    want = run(module, feeds, intermediates="all")
    computed = [k for k in want if k not in _constant_names(module)]
    assert list(got) == computed                # outputs first, then every computed value in op order
    assert len(got) >= min_count
    for k in computed:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        assert rel_err(got[k], want[k]) <= 1e-4, f"'{k}': relative error {rel_err(got[k], want[k]):.2e}"


def _constant_names(module) -> set[str]:
    from quantir.ir.dialects import arith
    outputs = set(Interpreter(module).output_names)
    return {op.results[0].name_hint for op in module.main.ops if op.opdef is arith.CONSTANT} - outputs


def test_opaque_onnx_ops_run_in_ort_only(make_onnx_model, rng):
    # EyeLike: an op quantir does not implement (Einsum, used here before, is imported now)
    nodes = [helper.make_node("EyeLike", ["x"], ["h"], k=1),
             helper.make_node("Relu", ["h"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, (2, 3))], [("y", np.float32, (2, 3))], {})
    module = load_onnx(model, keep_unsupported=True)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    with pytest.raises(UnsupportedOpError, match="opaque"):
        run(module, {"x": x})
    out = OrtExecutor(module, expose=["h"], intra_op_threads=1).run({"x": x})
    np.testing.assert_allclose(out["h"], np.eye(2, 3, k=1, dtype=np.float32), rtol=1e-6)
    np.testing.assert_array_equal(out["y"], np.maximum(out["h"], 0))


def test_ort_refusals_are_quantir_errors():
    with pytest.raises(OrtError, match="'NoSuchExecutionProvider': not available"):
        OrtExecutor(chain(), providers=("NoSuchExecutionProvider",))
    # ONNX Runtime 1.32 loads opset 28 models but has no QuantizeLinear-28 kernel.
    from quantir.ir.dialects import quant
    from quantir.types import parse_type
    t, qt = TensorType((2,), F32), TensorType((2,), parse_type("!quant.uniform<i8:f32, 0.5>"))
    fn = Function.create("main", [t], [qt])
    fn.body.append(func.RETURN.build([fn.body.append(quant.QCAST.build(fn.arguments, [qt])).result], []))
    with pytest.raises(OrtError, match="cannot load the exported model.*QuantizeLinear"):
        OrtExecutor(Module([fn]), opset=28)


def test_importing_runtime_does_not_import_onnxruntime():
    code = ("import sys, quantir.runtime, quantir.runtime.ort; "
            "sys.exit(1 if 'onnxruntime' in sys.modules or 'onnx' in sys.modules else 0)")
    env_path = str(REPO / "src")
    result = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": env_path, "PATH": ""},
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr or "onnxruntime was imported"


def test_sessions_do_not_spin_unless_asked():
    from quantir.runtime.ort import DEFAULT_SESSION_CONFIG
    assert DEFAULT_SESSION_CONFIG == {"session.intra_op.allow_spinning": "0"}
    seen = []
    import quantir.runtime.ort as ort_module
    real = ort_module._session

    def spy(model, providers, threads, config):
        seen.append(dict(config))
        return real(model, providers, threads, config)
    try:
        ort_module._session = spy
        OrtExecutor(chain())
        OrtExecutor(chain(), session_config={"session.intra_op.allow_spinning": "1", "session.use_env_allocators": "0"})
    finally:
        ort_module._session = real
    assert seen[0] == {"session.intra_op.allow_spinning": "0"}
    assert seen[1] == {"session.intra_op.allow_spinning": "1", "session.use_env_allocators": "0"}
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_array_equal(OrtExecutor(chain()).run({"x": x})["y"], 2 * x)
