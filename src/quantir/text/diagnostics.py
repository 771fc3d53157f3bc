"""Diagnostics as ``mlir-opt`` reports and checks them.

* :func:`verify_module`: every verifier failure, one per function as MLIR's verifier reports
  them (functions are verified independently), then module-level ones.
* :func:`diagnostics_of`: an error plus its follow-ups (``err.followups``: notes and further
  errors) as :class:`Diagnostic` records; :func:`render` prints one in LLVM ``SourceMgr``
  style: ``FILE:LINE:COL: error: MESSAGE``, the source line and a caret.
* :class:`ExpectedDiagnostics`: ``--verify-diagnostics``. ``// expected-error {{msg}}``
  (also ``-note``, ``-warning``, ``-remark``, ``-re`` with ``{{regex}}`` pieces) applies to
  its own line, ``@+N``/``@-N`` to a line offset, ``@above``/``@below`` to the nearest line
  above/below that holds no designator. A diagnostic matches when it is on that line, of that
  kind, and contains the text. Mismatches are reported with mlir-opt's wording:
  ``unexpected error: ...`` and ``expected error "..." was not produced``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import Location, QuantirError, VerifyError
from ..ir.core import Function, Module, Operation
from ..ir.verify import verify as _verify, verify_function, verify_module_op

__all__ = ["Diagnostic", "verify_module", "diagnostics_of", "render", "ExpectedDiagnostics",
           "split_input", "SPLIT_MARKER"]

SPLIT_MARKER = "// -----"
_NO_TERMINATOR = "block with no terminator, has "


@dataclass(frozen=True)
class Diagnostic:
    severity: str            # error, note, warning, remark
    loc: Location | None
    message: str
    length: int = 1          # columns underlined (^~~~) when rendered


def verify_module(module: Module) -> list[QuantirError]:
    """All verifier errors of ``module``: at most one per function, then symbol clashes."""
    try:
        verify_module_op(module)  # the module op is verified before what it contains
    except VerifyError as e:
        return [e]
    errors: list[QuantirError] = []
    for fn in module.functions:
        try:
            verify_function(fn)
        except VerifyError as e:
            if e.message.startswith(_NO_TERMINATOR) and fn.ops:
                from .printer import print_op  # MLIR prints the op itself in the message
                e = VerifyError(_NO_TERMINATOR + print_op(fn.ops[-1], generic=True), e.loc)
            errors.append(e)
    seen: dict[str, Location | None] = {}
    for fn in module.functions:
        if fn.name in seen:
            err = VerifyError(f"redefinition of symbol named '{fn.name}'", fn.loc)
            if seen[fn.name] is not None:
                err.followups = [("note", seen[fn.name], "see existing symbol definition here")]  # type: ignore[attr-defined]
            errors.append(err)
        else:
            seen[fn.name] = fn.loc
    if not errors:
        try:
            _verify(module)  # anything module-level the per-function pass does not cover
        except VerifyError as e:
            errors.append(e)
    return errors


def diagnostics_of(err: QuantirError) -> list[Diagnostic]:
    out = [Diagnostic("error", err.loc, err.message)]
    for severity, loc, message in getattr(err, "followups", ()):
        out.append(Diagnostic(severity, loc, message))
    return out


def op_at(module: Module | None, loc: Location | None) -> Operation | Function | None:
    """The op (or function) a verifier error is about: the first whose location is ``loc``."""
    if module is None or loc is None:
        return None
    for fn in module.functions:
        if fn.loc == loc:
            return fn
        for op in fn.ops:
            if op.loc == loc:
                return op
    return None


def _bytes_escaped(text: str) -> str:
    """Bytes that are not UTF-8 (kept as surrogates when the file was read) as ``\\xNN``, so that
    a diagnostic can be written to any stream; other lone surrogates as ``\\udNNN``."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def render(diag: Diagnostic, lines: list[str] | None, *, show_source: bool = True) -> str:
    """One diagnostic as LLVM's SourceMgr prints it (``lines``: the file split on ``\\n``)."""
    if diag.loc is None:
        return _bytes_escaped(f"{diag.severity}: {diag.message}\n")
    head = _bytes_escaped(f"{diag.loc}: {diag.severity}: {diag.message}\n")
    if not show_source or lines is None or not 1 <= diag.loc.line <= len(lines):
        return head
    line = lines[diag.loc.line - 1].rstrip("\r")
    if not line.isascii():  # LLVM shows such a line without a caret; bytes that are not UTF-8 as \xNN
        line = _bytes_escaped(line)
        return f"{head}{line}\n"
    col = max(diag.loc.col - 1, 0)
    pad = "".join(c if c == "\t" else " " for c in line[:col])
    return f"{head}{line}\n{pad}^{'~' * max(diag.length - 1, 0)}\n"


def render_error(err: QuantirError, lines: list[str] | None, module: Module | None = None,
                 print_op_on_diagnostic: bool = True) -> str:
    """An error with its follow-ups; a verifier error gets MLIR's ``see current operation``."""
    diags = diagnostics_of(err)
    out = [render(diags[0], lines)]
    if print_op_on_diagnostic and isinstance(err, VerifyError):
        op = op_at(module, err.loc)
        if op is not None and not err.message.startswith("empty block"):
            from .printer import print_function, print_op
            text = (print_op(op, generic=True) if isinstance(op, Operation)
                    else "\n" + print_function(op, generic=True))
            out.append(render(Diagnostic("note", err.loc, "see current operation: " + text),
                              lines, show_source=False))
    for d in diags[1:]:
        out.append(render(d, lines, show_source=not (d.severity == "note" and d.loc == err.loc)))
    return "".join(out)


def split_input(text: str) -> list[tuple[int, int]]:
    """``--split-input-file``: (start, end) offsets of the chunks between ``// -----`` markers
    (split on the raw marker, as mlir-opt does)."""
    chunks, start = [], 0
    while True:
        i = text.find(SPLIT_MARKER, start)
        if i < 0:
            chunks.append((start, len(text)))
            return chunks
        chunks.append((start, i))
        start = i + len(SPLIT_MARKER)


_EXPECTED = re.compile(r"expected-(error|note|remark|warning)(-re)? *"
                       r"(@([+-][0-9]+|above|below|unknown))? *\{\{(.*)\}\}$")


@dataclass
class _Expected:
    kind: str
    line: int              # 1-based line in the whole file
    loc: Location          # where `expected-...` starts
    text: str
    regex: re.Pattern | None = None
    matched: bool = False

    def matches(self, message: str) -> bool:
        return bool(self.regex.search(message)) if self.regex is not None else self.text in message


def _compile_mlir_regex(text: str) -> re.Pattern:
    """``-re``: literal text with ``{{regex}}`` pieces."""
    parts, i = [], 0
    while True:
        j = text.find("{{", i)
        if j < 0:
            parts.append(re.escape(text[i:]))
            break
        k = text.find("}}", j + 2)
        if k < 0:
            parts.append(re.escape(text[i:]))
            break
        parts.append(re.escape(text[i:j]) + "(?:" + text[j + 2:k] + ")")
        i = k + 2
    return re.compile("".join(parts))


class _ChunkLocator:
    """Locations of offsets in a chunk, counted in the whole file (without indexing it all)."""

    def __init__(self, text: str, filename: str, start: int, end: int):
        from .lexing import FastSource
        self.base_line = text.count("\n", 0, start)
        self.chunk_start = start
        self.source = FastSource(text[start:end], filename)
        self.first_line_col = start - (text.rfind("\n", 0, start) + 1)

    def location(self, pos: int) -> Location:
        loc = self.source.location(pos - self.chunk_start)
        col = loc.col + (self.first_line_col if loc.line == 1 else 0)
        return Location(loc.file, loc.line + self.base_line, col)


@dataclass
class ExpectedDiagnostics:
    """The ``expected-*`` designators of one buffer (a whole file or one split chunk)."""

    filename: str
    expected: list[_Expected] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)

    @classmethod
    def scan(cls, text: str, start: int, end: int, filename: str) -> "ExpectedDiagnostics":
        self = cls(filename)
        source = _ChunkLocator(text, filename, start, end)
        first_line = text.count("\n", 0, start)
        line_start = start
        chunk_lines = text[start:end].split("\n")
        pending_below: list[_Expected] = []
        last_plain = first_line  # 0-based index of the last line without a designator
        for i, raw in enumerate(chunk_lines):
            line_no = first_line + i + 1
            m = _EXPECTED.search(raw.rstrip())
            if m is None:
                for e in pending_below:
                    e.line = line_no
                pending_below.clear()
                last_plain = line_no
            else:
                e = _Expected(m.group(1), line_no, source.location(line_start + m.start()), m.group(5))
                if m.group(2):
                    try:
                        e.regex = _compile_mlir_regex(e.text)
                    except re.error as err:
                        self.problems.append(Diagnostic("error", e.loc, f"invalid regex: {err}"))
                        continue
                offset = m.group(4)
                if offset:
                    if offset[0] in "+-":   # past 18 digits no file has that line: no 5000-digit int()
                        delta = int(offset[1:]) if len(offset) <= 19 else 1 << 62
                        e.line += delta * (1 if offset[0] == "+" else -1)
                    elif offset == "above":
                        e.line = last_plain
                    elif offset == "below":
                        pending_below.append(e)
                        e.line = first_line + len(chunk_lines)
                    else:  # unknown locations never occur in quantir's diagnostics
                        e.line = -1
                self.expected.append(e)
            line_start += len(raw) + 1
        return self

    def process(self, diag: Diagnostic) -> None:
        """Check one emitted diagnostic; remember mismatches."""
        line = diag.loc.line if diag.loc is not None else -1
        near_miss = None
        for e in self.expected:
            if e.line == line and e.matches(diag.message):
                if e.kind == diag.severity:
                    e.matched = True
                    return
                near_miss = e
        if near_miss is not None:
            self.problems.append(Diagnostic(
                "error", near_miss.loc,
                f"'{diag.severity}' diagnostic emitted when expecting a '{near_miss.kind}'"))
        else:
            self.problems.append(Diagnostic("error", diag.loc, f"unexpected {diag.severity}: {diag.message}"))

    def finish(self) -> list[Diagnostic]:
        """The problems found, missing expectations last; empty when everything matched."""
        missing = [Diagnostic("error", e.loc, f'expected {e.kind} "{e.text}" was not produced', len(e.text))
                   for e in self.expected if not e.matched]
        return self.problems + missing
