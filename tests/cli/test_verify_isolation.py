"""``quantir verify`` survives LiteRT crashing (issue 11, item 3): LiteRT runs in a child process,
and a segfault, an abort or a refusal inside it is a one-line finding with exit 1, not the end of
quantir (nor a traceback)."""
from __future__ import annotations

import dataclasses as dc
import os
import subprocess
import sys

import numpy as np
import pytest

from ..frontends.tflite.test_tflite_hostile import FEED, base_model, mutated
from .test_run_show import REPO

pytest.importorskip("ai_edge_litert.interpreter")
pytestmark = pytest.mark.oracle

RESHAPE_WITHOUT_SHAPE = dict(change_op=("flat", lambda op, i: dc.replace(op, inputs=(op.inputs[0], -1))))
SOFTMAX_WITHOUT_OPTIONS = dict(change_op=("probs", lambda op, i: dc.replace(op, options=None)))


def quantir(*args, tmp) -> subprocess.CompletedProcess:
    # TMPDIR: the oracle's temporary directory must be gone afterwards, whatever happened
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, "-m", "quantir", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def files(tmp_path):
    np.savez(tmp_path / "in.npz", x=np.concatenate([FEED, FEED + 3]))   # verify: one sample at a time
    np.savez(tmp_path / "one.npz", x=FEED)                               # run: the model's static batch of 1
    (tmp_path / "tmp").mkdir()

    def write(name: str, data: bytes):
        path = tmp_path / name
        path.write_bytes(data)
        return path
    return tmp_path, write


@pytest.mark.parametrize("fields, signal", [(RESHAPE_WITHOUT_SHAPE, "SIGSEGV"), (SOFTMAX_WITHOUT_OPTIONS, "SIGABRT")])
def test_a_litert_crash_is_a_one_line_finding_and_quantir_lives(files, fields, signal):
    d, write = files
    model = write("crash.tflite", mutated(**fields))
    r = quantir("run", model, "--inputs", d / "one.npz", "--outputs", d / "out.npz", tmp=d / "tmp")
    assert r.returncode == 0, r.stderr   # quantir's own run succeeds on it
    r = quantir("verify", model, "--inputs", d / "in.npz", tmp=d / "tmp")
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr == (f"quantir verify: {model}: LiteRT crashed with {signal} while preparing the model's operators "
                        f"(sample 0); quantir's own run succeeded. LiteRT does not validate the file: "
                        f"`quantir check {model}` lists what LiteRT cannot take in it\n")
    assert list((d / "tmp").iterdir()) == []
    r = quantir("check", model, tmp=d / "tmp")   # and check says why
    assert r.returncode == 1 and "LiteRT" in r.stdout.splitlines()[0]


def test_a_litert_refusal_is_a_one_line_finding(files):
    d, write = files
    model = write("v0.tflite", mutated(version=0))
    r = quantir("verify", model, "--inputs", d / "in.npz", tmp=d / "tmp")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (f"quantir verify: {model}: LiteRT refuses the model while loading the model (sample 0); "
                        f"quantir's own run succeeded. LiteRT says: ValueError: Model provided is schema version 0 "
                        f"not equal to supported version 3.\n")
    assert list((d / "tmp").iterdir()) == []


def test_verify_through_the_child_is_bit_exact_on_every_sample_and_tensor(files):
    d, write = files
    model = write("ok.tflite", base_model())
    r = quantir("verify", model, "--inputs", d / "in.npz", tmp=d / "tmp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == "2 samples, LiteRT resolver reference"
    assert "output probs [2, 4]: 0 differing elements, max |diff| 0" in r.stdout
    assert r.stdout.rstrip().endswith("\nbit-exact")
    assert list((d / "tmp").iterdir()) == []


def test_the_api_raises_an_oracle_error_naming_the_signal():
    from quantir.verify import OracleError, verify_tflite
    with pytest.raises(OracleError, match=r"^<bytes>: LiteRT crashed with SIGSEGV while preparing") as e:
        verify_tflite(mutated(**RESHAPE_WITHOUT_SHAPE), {"x": FEED})
    assert e.value.signal == "SIGSEGV"


def test_the_child_computes_what_litert_computes_in_process():
    from quantir.backends.tflite.litert import OracleProcess, run_model_tensors
    data = base_model()
    feed = np.random.default_rng(1).integers(-128, 128, FEED.shape).astype(np.int8)
    want_out, want = run_model_tensors(data, [feed], [2, 5, 9])
    import tempfile
    with tempfile.TemporaryDirectory() as tmp, OracleProcess(data, "reference", tmp) as oracle:
        for _ in range(2):   # one child answers every chunk
            got_out, got = oracle.chunk([feed], [2, 5, 9])
            assert [a.tobytes() for a in got_out] == [a.tobytes() for a in want_out]
            assert {k: v.tobytes() for k, v in got.items()} == {k: v.tobytes() for k, v in want.items()}
        assert oracle.proc.poll() is None
