"""A missing, unreadable or non-UTF-8 IR file (issue 11, item 6): ``quantir opt``, ``check``, ``show``,
``run`` and ``quantir.load`` read it through one path (``text.files.read_ir_file``) and say the same
one line, naming the file; never a FileNotFoundError or UnicodeDecodeError traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

import quantir as qr
from quantir.cli.main import main
from quantir.errors import ParseError

GOOD = 'func.func @f() {\n  "test.op"() {v = 1 : i64} : () -> ()\n  return\n}\n'
COMMANDS = [["opt"], ["check"], ["show"], ["run", "--inputs", "in.npz", "--outputs", "out.npz"]]


def cli_error(capsys, command: list[str], path: Path) -> str:
    """Run ``quantir COMMAND PATH``: exit 1 and exactly one line on stderr, which is returned."""
    argv = [command[0], str(path), *command[1:]]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.rstrip("\n")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_missing_file(tmp_path, capsys, command):
    path = tmp_path / "missing.mlir"
    assert cli_error(capsys, command, path) == f"quantir {command[0]}: {path}: no such file"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_directory(tmp_path, capsys, command):
    path = tmp_path / "dir.mlir"
    path.mkdir()
    assert cli_error(capsys, command, path) == f"quantir {command[0]}: {path}: is a directory, not IR text"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_path_under_a_file(tmp_path, capsys, command):
    (tmp_path / "file").write_text(GOOD)
    path = tmp_path / "file" / "x.mlir"      # open() fails with ENOTDIR, even for root
    assert cli_error(capsys, command, path) == f"quantir {command[0]}: {path}: cannot read the IR text: Not a directory"


@pytest.mark.parametrize("command", [["check"], ["show"], ["run", "--inputs", "in.npz", "--outputs", "out.npz"]],
                         ids=lambda c: c[0])
def test_a_byte_that_is_not_utf8_outside_a_string_is_located(tmp_path, capsys, command):
    path = tmp_path / "bad.mlir"
    path.write_bytes(GOOD.encode() + b"\xff\n")
    assert cli_error(capsys, command, path) == f"quantir {command[0]}: {path}:5:1: error: unexpected character"


def test_opt_locates_a_byte_that_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_bytes(GOOD.encode() + b"\xff\n")
    assert main(["opt", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"{path}:5:1: error: unexpected character"
    assert "Traceback" not in err


def test_bytes_that_are_not_utf8_inside_strings_and_names_are_data(tmp_path, capsys):
    # as in mlir-opt: the lexer reads bytes; the printer escapes them, so the output is UTF-8
    path = tmp_path / "bytes.mlir"
    path.write_bytes(b'func.func @"f\xff"() {\n  "test\xfe.op"() {"k\xfd" = "v\xfc"} : () -> ()\n  return\n}\n')
    out = tmp_path / "out.mlir"
    assert main(["opt", str(path), "-o", str(out)]) == 0
    printed = out.read_bytes().decode("utf-8")    # strict: nothing undecodable was written
    assert 'func.func @"f\\FF"()' in printed
    assert '"test\\FE.op"() {"k\\FD" = "v\\FC"}' in printed


def test_load_uses_the_same_path(tmp_path):
    with pytest.raises(ParseError) as info:
        qr.load(tmp_path / "missing.mlir")
    assert str(info.value) == f"{tmp_path / 'missing.mlir'}: no such file"
    bad = tmp_path / "bad.mlir"
    bad.write_bytes(GOOD.encode() + b"\xff\n")
    with pytest.raises(ParseError) as info:
        qr.load(bad)
    assert str(info.value) == f"{bad}:5:1: error: unexpected character"
    ok = tmp_path / "ok.mlir"
    ok.write_text(GOOD)
    assert qr.load(ok).functions[0].name == "f"
