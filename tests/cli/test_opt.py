"""``quantir opt``: the mlir-opt-like command line (in-process, plus one real subprocess)."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from quantir.cli.main import main

GOOD = """func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %q = quant.qcast %x : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.5>>
  %d = quant.dcast %q : tensor<4x!quant.uniform<i8:f32, 0.5>> to tensor<4xf32>
  return %d : tensor<4xf32>
}
"""
BAD = "func.func @f(%x: f32) {\n  %q = quant.qcast %x : f32 to !quant.uniform<i8:f16, 0.5>\n  return\n}\n"


def opt(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    try:
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["opt", *args])
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def test_prints_the_canonical_form(tmp_path):
    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    code, out, err = opt(str(path))
    assert code == 0 and err == ""
    assert out.startswith("module {\n  func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n")
    assert out.endswith("  }\n}\n\n")


def test_stdin_and_canonicalize():
    for args in ([], ["-"]):
        code, out, _ = opt(*args, "--canonicalize", stdin=GOOD)
        assert code == 0
        assert "quant." not in out and "return %arg0 : tensor<4xf32>" in out


def test_errors_go_to_stderr_with_location(tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(BAD)
    code, out, err = opt(str(path))
    assert code == 1 and out == ""
    assert err.startswith(f"{path}:2:8: error: expressed type in quantized type expected to match float type\n"
                          "  %q = quant.qcast %x : f32 to !quant.uniform<i8:f16, 0.5>\n       ^\n")
    assert "note: see current operation: %0 = \"quant.qcast\"(%arg0)" in err
    _, _, err = opt("-", stdin="func.func @f( {")
    assert err.startswith("<stdin>:1:14: error: expected non-function type\n")


def test_split_input_file_keeps_going():
    code, out, err = opt("--split-input-file", "-", stdin=GOOD + "// -----\n" + BAD + "// -----\n" + GOOD)
    assert code == 1
    chunks = out.split("// -----\n")
    assert len(chunks) == 3 and chunks[1] == "" and chunks[0] == chunks[2] != ""
    assert err.startswith("<stdin>:8:8: error:")  # lines count in the whole file


def test_verify_diagnostics():
    expected = BAD.replace("  %q", "  // expected-error @+1 {{expressed type}}\n  %q")
    assert opt("--verify-diagnostics", "-", stdin=expected)[0] == 0
    code, _, err = opt("--verify-diagnostics", "-", stdin=BAD)
    assert code == 1 and "error: unexpected error: expressed type" in err
    code, _, err = opt("--verify-diagnostics", "-",
                       stdin=GOOD.replace("  return", "  // expected-error {{nope}}\n  return"))
    assert code == 1 and 'error: expected error "nope" was not produced' in err


def test_generic_and_elide():
    _, out, _ = opt("--mlir-print-op-generic", "-", stdin=GOOD)
    assert out.startswith('"builtin.module"() ({\n  "func.func"() <{function_type')
    _, out, _ = opt("--mlir-elide-elementsattrs-if-larger", "2", "-",
                    stdin="func.func private @f() attributes {x = dense<[1, 2, 3]> : tensor<3xi8>}")
    assert "dense_resource<__elided__> : tensor<3xi8>" in out


def test_output_file_is_written_atomically(tmp_path):
    target = tmp_path / "out.mlir"
    target.write_text("old")
    assert opt("-o", str(target), "-", stdin=BAD)[0] == 1
    assert target.read_text() == "old"  # kept on failure, like mlir-opt
    assert opt("-o", str(target), "-", stdin=GOOD)[0] == 0
    assert target.read_text().startswith("module {")
    assert [p.name for p in tmp_path.iterdir()] == ["out.mlir"]  # no temporary left behind


def test_real_command_line(tmp_path):
    path = tmp_path / "in.mlir"
    path.write_text(GOOD)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.run([sys.executable, "-m", "quantir", "opt", str(path), "--canonicalize"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "return %arg0" in proc.stdout
    # the opt subcommand does not pull in the heavy parts of quantir
    check = ("import sys, quantir.cli.opt; "
             "print(sorted(m for m in sys.modules if m.startswith('quantir.')))")
    mods = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env).stdout
    assert "quantir.text" not in mods and "quantir.ir" not in mods
