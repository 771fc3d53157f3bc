"""--verify-diagnostics semantics and diagnostic rendering, as mlir-opt's."""
from __future__ import annotations

from quantir.errors import Location
from quantir.text.diagnostics import Diagnostic, ExpectedDiagnostics, render, split_input

TEXT = """func.func @f() {
  // expected-error @+1 {{first}}
  "a.b"() : () -> ()
  "a.b"() : () -> ()  // expected-error {{same line}}
  // expected-error @below {{below}}
  // expected-note @above {{above}}
  "a.b"() : () -> ()
  // expected-error @-6 {{minus}}
  // expected-error-re @+1 {{value {{[0-9]+}} out}}
  return
}
"""


def _loc(line, col=1):
    return Location("t.mlir", line, col)


def test_offsets_and_matching():
    e = ExpectedDiagnostics.scan(TEXT, 0, len(TEXT), "t.mlir")
    for line, msg in [(3, "the first one"), (4, "on the same line"), (7, "from below"), (3, "above"),
                      (2, "minus six"), (10, "value 42 out of range")]:
        e.process(Diagnostic("note" if msg == "above" else "error", _loc(line), msg))
    assert e.finish() == []


def test_unexpected_missing_and_near_miss():
    e = ExpectedDiagnostics.scan(TEXT, 0, len(TEXT), "t.mlir")
    e.process(Diagnostic("error", _loc(3), "surprise"))
    e.process(Diagnostic("warning", _loc(4), "same line"))
    problems = e.finish()
    messages = [p.message for p in problems]
    assert messages[0] == "unexpected error: surprise"
    assert messages[1] == "'warning' diagnostic emitted when expecting a 'error'"
    assert 'expected error "first" was not produced' in messages
    missing = next(p for p in problems if p.message.startswith('expected error "first"'))
    assert (missing.loc.line, missing.loc.col, missing.length) == (2, 6, len("first"))


def test_render_like_sourcemgr():
    lines = ["  %0 = quant.qcast %a : f32"]
    text = render(Diagnostic("error", Location("q.mlir", 1, 8), "boom"), lines)
    assert text == "q.mlir:1:8: error: boom\n  %0 = quant.qcast %a : f32\n       ^\n"
    assert render(Diagnostic("error", Location("q.mlir", 1, 3), "x", 4), lines).endswith("  ^~~~\n")


def test_split_on_the_raw_marker():
    text = "a\n// -----\nb\n// ----- c\nd"
    chunks = [text[s:e] for s, e in split_input(text)]
    assert chunks == ["a\n", "\nb\n", " c\nd"]
