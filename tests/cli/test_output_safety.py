"""Outputs never destroy data (issue 11, items 1 and 8), end to end through ``quantir.cli.main.main``.

Every writing subcommand refuses an output that is one of its inputs -- by name, hard link or
symlink -- and two outputs that are one file, before any work; unwritable destinations are one-line
errors naming the path and the reason; outputs honour the umask; a killed run leaves no temporary.
"""
from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from quantir.cli.main import main  # noqa: E402
from quantir.errors import OutputError  # noqa: E402

from ..quantize.tiny_models import cnn  # noqa: E402
from .. import test_fileio  # noqa: E402

readonly_dir = test_fileio.readonly_dir   # the fixture

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A directory holding the tiny CNN (m.onnx), its calibration data (c.npz), its IR text (m.mlir),
    a hard link (hard.onnx) and a symlink (sym.onnx) to the model; the test runs in it."""
    rng = cnn(tmp_path / "m.onnx")
    np.savez(tmp_path / "c.npz", x=rng.normal(size=(16, 1, 8, 8)).astype(np.float32))
    monkeypatch.chdir(tmp_path)
    assert main(["convert", "m.onnx", "-o", "m.mlir"]) == 0
    os.link("m.onnx", "hard.onnx")
    os.symlink("m.onnx", "sym.onnx")
    return tmp_path


def digests(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


def refused(capsys, argv: list[str]) -> str:
    """Run ``quantir ARGV``; it must exit 1 with exactly one line on stderr, which is returned."""
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err
    return err.rstrip("\n")


@pytest.fixture
def no_calibration(monkeypatch):
    """Fail the test if ``quantize`` gets as far as loading the model and calibrating."""
    import quantir.api

    def forbidden(*args, **kwargs):
        raise AssertionError("quantize ran although the output was refused")

    monkeypatch.setattr(quantir.api, "quantize", forbidden)


# -- item 1: an output that is an input ------------------------------------------------------------

@pytest.mark.parametrize("out", ["m.onnx", "./m.onnx", "hard.onnx", "sym.onnx"])
def test_quantize_refuses_to_overwrite_its_model(work, capsys, no_calibration, out):
    before = digests(work)
    line = refused(capsys, ["quantize", "m.onnx", "--data", "c.npz", "-o", out, "-q"])
    assert line == f"quantir quantize: output {out} is the input model m.onnx; refusing to overwrite it"
    assert digests(work) == before


def test_quantize_refuses_mlir_input_as_output(work, capsys, no_calibration):
    before = digests(work)
    line = refused(capsys, ["quantize", "m.mlir", "--data", "c.npz", "-o", "m.mlir", "-q"])
    assert line == "quantir quantize: output m.mlir is the input model m.mlir; refusing to overwrite it"
    assert digests(work) == before


def test_quantize_refuses_a_summary_over_an_input_and_two_outputs_in_one_file(work, capsys, no_calibration):
    os.link("c.npz", "calib.json")
    os.symlink("m.onnx", "model.json")
    before = digests(work)
    assert refused(capsys, ["quantize", "m.onnx", "--data", "c.npz", "-o", "q.onnx", "--summary", "calib.json"]) == \
        "quantir quantize: output calib.json is the calibration data c.npz; refusing to overwrite it"
    assert refused(capsys, ["quantize", "m.onnx", "--data", "c.npz", "-o", "q.onnx", "--summary", "model.json"]) == \
        "quantir quantize: output model.json is the input model m.onnx; refusing to overwrite it"
    assert refused(capsys, ["quantize", "m.onnx", "--data", "c.npz", "-o", "c.npz", "-q"]) == \
        "quantir quantize: unknown output format '.npz' for c.npz: use .onnx, .mlir or .tflite"
    assert refused(capsys, ["quantize", "m.onnx", "--data", "c.npz", "-o", "q.onnx", "--summary", "q.onnx"]) == \
        "quantir quantize: --summary q.onnx: the summary is JSON; give a path ending in .json"
    assert digests(work) == before and not os.path.exists("q.onnx")


def test_outputs_that_are_one_file_are_refused(work, capsys, no_calibration):
    os.symlink("q.mlir", "q.json")  # the summary would land in the model's file
    assert refused(capsys, ["quantize", "m.onnx", "--data", "c.npz", "-o", "q.mlir", "--summary", "q.json"]) == \
        "quantir quantize: outputs q.mlir (-o) and q.json (--summary) are the same file; give each its own path"
    assert not os.path.lexists("q.mlir")


@pytest.mark.parametrize("argv,line", [
    (["convert", "m.onnx", "-o", "sym.onnx"], "output sym.onnx is the input model m.onnx"),
    (["convert", "m.mlir", "-o", "m.mlir"], "output m.mlir is the input model m.mlir"),
    (["run", "m.onnx", "--inputs", "c.npz", "--outputs", "c.npz"], "output c.npz is the input arrays c.npz"),
    (["opt", "m.mlir", "-o", "m.mlir"], "output m.mlir is the input m.mlir"),
    (["verify", "hard.onnx", "--inputs", "c.npz", "--json", "c.npz"], "output c.npz is the input arrays c.npz"),
    (["verify", "hard.onnx", "--inputs", "c.npz", "--json", "sym.onnx"],
     "output sym.onnx is the input model hard.onnx"),
])
def test_every_writing_command_refuses_to_overwrite_an_input(work, capsys, argv, line):
    before = digests(work)
    assert refused(capsys, argv) == f"quantir {argv[0]}: {line}; refusing to overwrite it"
    assert digests(work) == before


# -- item 8: destinations that cannot be written ---------------------------------------------------

@pytest.mark.parametrize("command", ["quantize", "convert", "run"])
def test_unwritable_destinations_are_one_line_errors(work, capsys, no_calibration, command):
    argv = {"quantize": ["quantize", "m.onnx", "--data", "c.npz", "-q", "-o"],
            "convert": ["convert", "m.onnx", "-o"],
            "run": ["run", "m.onnx", "--inputs", "c.npz", "--outputs"]}[command]
    suffix = ".npz" if command == "run" else ".onnx"
    os.mkdir(f"dir{suffix}")
    before = digests(work)
    cases = {f"dir{suffix}": "it is a directory",
             f"m.mlir/out{suffix}": "m.mlir is not a directory",
             f"missing/out{suffix}": "directory missing does not exist; create it first"}
    for out, reason in cases.items():
        assert refused(capsys, [*argv, out]) == f"quantir {command}: cannot write {out}: {reason}"
    assert digests(work) == before and not os.path.exists("missing")


def test_a_read_only_directory_is_refused(work, capsys, no_calibration, readonly_dir):
    out = readonly_dir.relative_to(work) / "q.onnx"
    for argv in (["quantize", "m.onnx", "--data", "c.npz", "-q", "-o", str(out)], ["convert", "m.onnx", "-o", str(out)],
                 ["opt", "m.mlir", "-o", str(out)]):
        assert refused(capsys, argv) == f"quantir {argv[0]}: cannot write {out}: directory ro is not writable"
    assert os.listdir(readonly_dir) == []


def test_api_save_creates_directories_only_when_asked(work):
    import quantir as qr
    r = qr.quantize("m.onnx", "c.npz", qr.Config(progress=False))
    with pytest.raises(OutputError, match=r"^cannot write out/q.mlir: directory out does not exist; "
                                              r"create it first$"):
        r.save("out/q.mlir")
    with pytest.raises(OutputError, match=r"^cannot write out/q.onnx: directory out does not exist"):
        r.save("out/q.onnx")
    assert not os.path.exists("out")
    for name in ("q.mlir", "q.onnx", "q.tflite", "q.json"):
        assert r.save(Path("out") / "sub" / name, make_parents=True).is_file()
    assert sorted(os.listdir("out/sub")) == ["q.json", "q.mlir", "q.onnx", "q.tflite"]


# -- modes -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o077, 0o600)])
def test_outputs_honour_the_umask_and_keep_an_overwritten_files_mode(work, mask, mode):
    saved = os.umask(mask)
    try:
        assert main(["quantize", "m.onnx", "--data", "c.npz", "-o", "q.tflite", "--summary", "q.json", "-q"]) == 0
        assert main(["convert", "m.onnx", "-o", "f.onnx"]) == 0
        assert main(["run", "m.mlir", "--inputs", "c.npz", "--outputs", "o.npz"]) == 0
        assert main(["opt", "m.mlir", "-o", "o.mlir"]) == 0
        for name in ("q.tflite", "q.json", "f.onnx", "o.npz", "o.mlir"):
            assert stat.S_IMODE(os.stat(name).st_mode) == mode, name
        os.chmod("f.onnx", 0o640)
        os.chmod("o.npz", 0o604)
        assert main(["convert", "m.onnx", "-o", "f.onnx"]) == 0
        assert main(["run", "m.mlir", "--inputs", "c.npz", "--outputs", "o.npz"]) == 0
        assert stat.S_IMODE(os.stat("f.onnx").st_mode) == 0o640
        assert stat.S_IMODE(os.stat("o.npz").st_mode) == 0o604
    finally:
        os.umask(saved)
    assert not [n for n in os.listdir(work) if n.endswith(".tmp")]


# -- a killed run ----------------------------------------------------------------------------------

CHILD = """
import os, sys, time
import numpy as np
real = np.lib.format.write_array

def slow(fp, array, **kwargs):  # write the array, then stall mid-archive until killed
    real(fp, array, **kwargs)
    open({marker!r}, "w").close()
    time.sleep(120)

np.lib.format.write_array = slow
from quantir.cli.main import main
sys.exit(main(["run", "big.onnx", "--inputs", "big.npz", "--outputs", "out.npz"]))
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 130)])
def test_a_run_killed_while_writing_leaves_the_old_output_and_no_temporary(tmp_path, make_onnx_model, sig, code):
    from onnx import helper
    model = make_onnx_model([helper.make_node("Relu", ["x"], ["y"])], [("x", np.float32, ("N", 1024))],
                            [("y", np.float32, ("N", 1024))])
    onnx.save(model, tmp_path / "big.onnx")
    np.savez(tmp_path / "big.npz", x=np.ones((4096, 1024), np.float32))  # a 16 MiB output
    (tmp_path / "out.npz").write_bytes(b"old outputs")
    marker = tmp_path / "writing"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    # SIGINT at its default, as in a terminal: a harness that ignores it (pytest-xdist's workers, nohup)
    # passes SIG_IGN on, and Python then installs no KeyboardInterrupt handler
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(marker=str(marker))], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the child never reached the write"
            time.sleep(0.05)
        partial = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
        assert len(partial) == 1 and os.path.getsize(tmp_path / partial[0]) > 16 * 2**20  # mid-write
        child.send_signal(sig)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == code, err
    assert "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["big.npz", "big.onnx", "out.npz", "writing"]
    assert (tmp_path / "out.npz").read_bytes() == b"old outputs"


def test_sigterm_handler_is_restored_after_main(work):
    before = signal.getsignal(signal.SIGTERM)
    assert main(["convert", "m.onnx", "-o", "x.mlir"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before
