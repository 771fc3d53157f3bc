"""Golden text tests of the quantizer's stages: annotate -> solve -> lower.

Each ``golden/<case>.mlir`` is a small float model in the ``nn`` dialect, with comment lines
that declare ranges (``// RANGES: %1 = [0.0, 2.5]``, the file's own SSA names). Calibration is
readable from the file alone: each argument's data is 16 samples whose elements are evenly
spaced over its declared range, and each region's calibration callback returns the range
declared for its output (every region output needs a line; only a float op's output, which
the solver observes on the data, has none). ``_stages.py`` holds the rules and the formats.

Next to the input, three expected files say what each stage decided:

- ``<case>.annotate.txt``: one line per region (pattern, LiteRT op, fused activation, the ops
  it claims, its inputs), one line per op left float with its reason;
- ``<case>.solve.txt``: one line per value (scale, zero point, ``fixed`` by the op or
  ``calibrated`` from the range, the range), weights with their per-channel scales and bias;
- ``<case>.lower.mlir``: the integer module as ``print_module`` writes it.

A difference fails with a unified diff. ``QUANTIR_UPDATE_GOLDEN=1`` rewrites the expected files
instead: review the diff as a change of the quantizer's behaviour before committing it.
"""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from . import _stages
from ._stages import (
    GoldenError,
    all_cases,
    canonical_input,
    compare,
    load_case,
    non_comment_lines,
    run_case,
)

UPDATE = os.environ.get("QUANTIR_UPDATE_GOLDEN") == "1"
CASES = all_cases()


@pytest.fixture(scope="module")
def produced():
    """Each case run once for all its stages."""
    cache: dict = {}

    def get(case):
        if case.path not in cache:
            cache[case.path] = run_case(case)
        return cache[case.path]
    return get


def test_the_cases_are_there():
    assert {c.name for c in CASES} >= {"conv_relu", "residual_add", "same_scale_chain", "fixed_outputs",
                                       "stays_float", "div_const", "resize_nearest"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_input_is_printed_form(case):
    """The names in RANGES lines and in the stage outputs are the printer's: the input must read
    as ``print_module`` writes it (comments aside)."""
    printed = canonical_input(case)
    assert non_comment_lines(case.text) == non_comment_lines(printed), \
        f"{case.path.name} is not in printed form; it prints as:\n{printed}"


@pytest.mark.parametrize("stage", _stages.STAGES)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_stage(case, stage, produced):
    compare(produced(case)[stage], case.expected_path(stage), update=UPDATE)


# -- what the expected texts alone do not check ---------------------------------------------------

def test_lowered_modules_pass_the_spec_check():
    """The expected integer modules parse back (real IR, verified) and meet the LiteRT int8 spec."""
    from quantir.quantize.check import check_module
    from quantir.text import parse_module

    for case in CASES:
        report = check_module(parse_module(case.expected_path("lower").read_text()))
        assert report.checked > 0 and report.ok, f"{case.name}: {[str(v) for v in report.violations]}"


def test_declared_ranges_reach_the_solver(produced):
    """A RANGES line for a region output is the range the solver used for it, and its scale is
    that range over 255 steps; an argument's range is the one its evenly spaced data spans."""
    case = load_case(_stages.GOLDEN_DIR / "residual_add.mlir")
    lines = {line.split(":", 1)[0]: line for line in produced(case)["solve"].splitlines()}
    for name, (lo, hi) in [("%0", (-0.75, 0.75)), ("%1", (-2.5, 2.5)), ("%arg0", (-2.0, 2.0))]:
        assert case.ranges[name] == (lo, hi)
        assert lines[name].startswith(f"{name}: scale {np.float32((hi - lo) / 255)!s} zero_point ")
        assert lines[name].endswith(f" calibrated range [{lo}, {hi}]")


# -- the test of the test -------------------------------------------------------------------------

def test_a_changed_expected_text_fails_with_a_diff(tmp_path, produced):
    case = load_case(_stages.GOLDEN_DIR / "conv_relu.mlir")
    text = produced(case)["annotate"]
    expected = tmp_path / "conv_relu.annotate.txt"
    expected.write_text(text.replace("[RELU6]", "[RELU]"))
    with pytest.raises(AssertionError) as e:
        compare(text, expected)
    message = str(e.value)
    assert message.startswith("conv_relu.annotate.txt differs (QUANTIR_UPDATE_GOLDEN=1 rewrites it):\n")
    assert "--- conv_relu.annotate.txt (expected)\n+++ conv_relu.annotate.txt (produced)\n" in message
    changed = [line for line in message.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    relu6 = next(line for line in text.splitlines() if "[RELU6]" in line)
    assert changed == ["-" + relu6.replace("[RELU6]", "[RELU]"), "+" + relu6]
    compare(text, expected, update=True)   # the update mode writes the produced text ...
    compare(text, expected)                # ... which then compares equal


def test_a_missing_expected_file_says_how_to_make_it(tmp_path):
    with pytest.raises(AssertionError, match=r"^new\.solve\.txt does not exist: run with QUANTIR_UPDATE_GOLDEN=1"):
        compare("x\n", tmp_path / "new.solve.txt")


def _case_with(tmp_path, ranges: str):
    src = (_stages.GOLDEN_DIR / "stays_float.mlir").read_text()
    body = src[src.index("module {"):]
    path = tmp_path / "case.mlir"
    path.write_text(ranges + body)
    return path


def test_a_range_the_quantizer_would_ignore_is_an_error(tmp_path):
    # %0 is the float Neg's output: the solver observes it on the data, a declared range would be dropped
    path = _case_with(tmp_path, "// RANGES: %arg0 = [-2.0, 1.0]\n// RANGES: %0 = [-1.0, 2.0]\n"
                                "// RANGES: %2 = [0.0, 2.0]\n")
    with pytest.raises(GoldenError) as e:
        run_case(load_case(path))
    assert str(e.value) == ("case.mlir: RANGES names %0, which is neither an argument nor a region's output: "
                            "the quantizer observes its range on the data, the line would be ignored")


@pytest.mark.parametrize("ranges, message", [
    ("// RANGES: %2 = [0.0, 1.0]\n",
     "case.mlir: argument %arg0 has no '// RANGES: %arg0 = [low, high]' line; its calibration data is built from it"),
    ("// RANGES: %arg0 = [-1.0, 1.0]\n",
     ("case.mlir: region output %2 has no '// RANGES: %2 = [low, high]' line; it is what the calibration callback "
      "returns")),
    ("// RANGES: %arg0 = [-1.0, 1.0]\n// RANGES: %9 = [0.0, 1.0]\n",
     "case.mlir: RANGES names %9, which the function does not define"),
    ("// RANGES: %arg0 = [1.0, -1.0]\n", "case.mlir:1: low 1 is above high -1"),
    ("// RANGES: %arg0 = [-1.0, 1.0]\n// RANGES: %arg0 = [-1.0, 1.0]\n", "case.mlir:2: %arg0 is declared twice"),
    ("// RANGES: %arg0 = [-1.0, one]\n",
     "case.mlir:1: the bounds of %arg0 are not numbers: '// RANGES: %arg0 = [-1.0, one]'"),
    ("// RANGES: %arg0 -1.0 1.0\n",
     "case.mlir:1: expected '// RANGES: %name = [low, high]', found '// RANGES: %arg0 -1.0 1.0'"),
])
def test_malformed_ranges_are_named(tmp_path, ranges, message):
    path = _case_with(tmp_path, ranges)
    with pytest.raises(GoldenError) as e:
        run_case(load_case(path))
    assert str(e.value) == message


def test_update_rewrites_every_stage(tmp_path):
    """``QUANTIR_UPDATE_GOLDEN=1`` on a fresh copy writes the three expected files, equal to the
    checked-in ones."""
    shutil.copy(_stages.GOLDEN_DIR / "div_const.mlir", tmp_path)
    (case,) = all_cases(tmp_path)
    texts = run_case(case)
    for stage in _stages.STAGES:
        compare(texts[stage], case.expected_path(stage), update=True)
        assert case.expected_path(stage).read_text() == (_stages.GOLDEN_DIR / case.expected_path(stage).name
                                                         ).read_text()


def test_two_fixed_outputs_in_one_class():
    """``golden/fixed_concat.mlir``: the lowered module meets the spec (TANH's output at 1/128, 0,
    SOFTMAX's at 1/256, -128, each requantized into the concat)."""
    from quantir.quantize.check import check_module
    from quantir.text import parse_module

    case = load_case(_stages.GOLDEN_DIR / "fixed_concat.mlir")
    report = check_module(parse_module(run_case(case)["lower"]))
    assert report.ok, [str(v) for v in report.violations]
