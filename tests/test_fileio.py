"""``quantir.fileio``: outputs never destroy an input, never leave a partial file, honour the umask."""
from __future__ import annotations

import errno
import os
import stat
import subprocess

import pytest

from quantir import fileio
from quantir.errors import OutputError, QuantirError
from quantir.fileio import atomic_output, atomic_write, check_output, check_outputs, same_file


@pytest.fixture
def umask():
    """Set the process umask for one test; restored afterwards."""
    saved = os.umask(0o022)
    os.umask(saved)
    yield os.umask
    os.umask(saved)


@pytest.fixture
def readonly_dir(tmp_path):
    """A directory nobody may create files in: mode 0555, or, for root (whom modes do not stop),
    the immutable attribute."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode != 0:
        pytest.skip("running as root and chattr +i is not available: no directory is read-only to root")
    try:
        yield d
    finally:
        subprocess.run(["chattr", "-i", str(d)], check=True)


def files(d) -> list[str]:
    return sorted(os.listdir(d))


# -- outputs that are inputs ----------------------------------------------------------------------

def test_an_output_that_is_an_input_is_refused_by_name_hard_link_and_symlink(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes(b"model")
    os.link("m.onnx", "hard.onnx")
    os.symlink("m.onnx", "sym.onnx")
    (tmp_path / "sub").mkdir()
    os.symlink("..", "sub/up")
    for out in ("m.onnx", "./m.onnx", "hard.onnx", "sym.onnx", "sub/up/m.onnx", str(tmp_path / "m.onnx")):
        with pytest.raises(OutputError) as e:
            check_outputs({"-o": out}, {"input model": "m.onnx"})
        assert str(e.value) == f"output {out} is the input model m.onnx; refusing to overwrite it"
    check_outputs({"-o": "other.onnx"}, {"input model": "m.onnx"})  # a new file is fine
    assert (tmp_path / "m.onnx").read_bytes() == b"model"


def test_two_outputs_that_are_one_file_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match=r"^outputs a.json \(-o\) and ./a.json \(--summary\) are the same file; "
                                          r"give each its own path$"):
        check_outputs({"-o": "a.json", "--summary": "./a.json"}, {})
    check_outputs({"-o": "a.json", "--summary": None, "--json": "-"}, {"input": "-"})  # None and stdout skipped


def test_same_file():
    assert same_file(__file__, os.path.join(os.path.dirname(__file__), ".", os.path.basename(__file__)))
    assert not same_file(__file__, os.path.dirname(__file__))
    assert same_file("does/not/exist", "does/./not/exist")


# -- destinations that cannot be written -----------------------------------------------------------

def test_a_directory_a_path_under_a_file_and_a_missing_directory_are_one_line_errors(tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    cases = {tmp_path: "it is a directory",
             tmp_path / "f" / "out.onnx": f"{tmp_path / 'f'} is not a directory",
             tmp_path / "f" / "deeper" / "out.onnx": f"{tmp_path / 'f'} is not a directory",
             tmp_path / "new" / "out.onnx": f"directory {tmp_path / 'new'} does not exist; create it first",
             tmp_path / "new" / "deeper" / "out.onnx":
                 f"directory {tmp_path / 'new' / 'deeper'} does not exist; create it first"}
    for path, reason in cases.items():
        with pytest.raises(OutputError) as e:
            atomic_write(path, b"data")
        assert str(e.value) == f"cannot write {path}: {reason}"
    assert files(tmp_path) == ["f"] and (tmp_path / "f").read_bytes() == b"x"


def test_make_parents_creates_the_missing_directories(tmp_path):
    atomic_write(tmp_path / "a" / "b" / "out.bin", b"data", make_parents=True)
    assert (tmp_path / "a" / "b" / "out.bin").read_bytes() == b"data"
    assert files(tmp_path / "a" / "b") == ["out.bin"]


def test_a_read_only_directory_is_refused_before_writing(readonly_dir):
    with pytest.raises(OutputError) as e:
        atomic_write(readonly_dir / "out.onnx", b"data")
    assert str(e.value) == f"cannot write {readonly_dir / 'out.onnx'}: directory {readonly_dir} is not writable"
    assert files(readonly_dir) == []


@pytest.mark.parametrize("where,err", [("mkstemp", errno.EACCES), ("write", errno.ENOSPC), ("replace", errno.EISDIR)])
def test_os_errors_while_writing_become_output_errors_and_leave_no_temporary(tmp_path, monkeypatch, where, err):
    """What a race or a full disk does after the checks passed: a typed error, the old file intact."""
    target = tmp_path / "out.onnx"
    target.write_bytes(b"old")

    def fail(*args, **kwargs):
        raise OSError(err, os.strerror(err))

    if where == "mkstemp":
        monkeypatch.setattr(fileio.tempfile, "mkstemp", fail)
    elif where == "replace":
        monkeypatch.setattr(fileio.os, "replace", fail)
    with pytest.raises(OutputError) as e:
        with atomic_output(target) as f:
            f.write(b"new")
            if where == "write":
                fail()
    assert str(e.value) == f"cannot write {target}: {os.strerror(err)}"
    assert isinstance(e.value, QuantirError)
    assert target.read_bytes() == b"old" and files(tmp_path) == ["out.onnx"]


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, ValueError])
def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, exc):
    target = tmp_path / "out.npz"
    target.write_bytes(b"old")
    with pytest.raises(exc):
        with atomic_output(target) as f:
            f.write(b"partial" * 1000)
            assert [n for n in files(tmp_path) if n.endswith(".tmp")]  # the temporary exists meanwhile
            raise exc()
    assert target.read_bytes() == b"old" and files(tmp_path) == ["out.npz"]


def test_exit_removes_a_temporary_whose_cleanup_was_skipped(tmp_path):
    """An interrupt inside contextlib's frames never reaches the generator's ``except``: the
    atexit hook is the backstop."""
    cm = atomic_output(tmp_path / "out.bin")
    cm.__enter__().write(b"partial")  # abandoned: __exit__ never runs
    assert len(fileio._pending) == 1 and len(files(tmp_path)) == 1
    fileio._remove_pending()
    assert files(tmp_path) == [] and not fileio._pending


# -- modes -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_0666_less_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    atomic_write(tmp_path / "out.onnx", b"data")
    assert stat.S_IMODE(os.stat(tmp_path / "out.onnx").st_mode) == mode


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_an_overwritten_file_keeps_its_mode(tmp_path, umask, mask):
    umask(mask)
    target = tmp_path / "out.onnx"
    target.write_bytes(b"old")
    for mode in (0o640, 0o604, 0o444):
        target.chmod(mode)
        atomic_write(target, b"new")
        assert stat.S_IMODE(os.stat(target).st_mode) == mode and target.read_bytes() == b"new"


def test_a_symlink_destination_is_written_through(tmp_path):
    (tmp_path / "real.onnx").write_bytes(b"old")
    (tmp_path / "real.onnx").chmod(0o640)
    os.symlink("real.onnx", tmp_path / "link.onnx")
    atomic_write(tmp_path / "link.onnx", b"new")
    assert os.path.islink(tmp_path / "link.onnx") and (tmp_path / "real.onnx").read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(tmp_path / "real.onnx").st_mode) == 0o640
    assert files(tmp_path) == ["link.onnx", "real.onnx"]


def test_a_device_is_written_in_place(tmp_path):
    atomic_write("/dev/null", b"data")       # not replaced by a regular file
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_check_output_returns_the_file_that_will_be_replaced(tmp_path):
    os.symlink("real.onnx", tmp_path / "link.onnx")
    assert check_output(tmp_path / "link.onnx") == tmp_path / "real.onnx"
    assert check_output(tmp_path / "new.onnx") == tmp_path / "new.onnx"
