"""A small FileCheck: LLVM FileCheck's semantics for the directives quantir's golden tests use.

Directives (prefix ``CHECK``): ``CHECK:`` (the pattern occurs after the previous match),
``CHECK-NEXT:`` (on the line after the previous match), ``CHECK-SAME:`` (on the same line,
after the previous match), ``CHECK-EMPTY:`` (the next line is empty), ``CHECK-NOT:`` (does not
occur between the previous match and the next one), ``CHECK-LABEL:`` (splits the input into
blocks, matched first; the other checks stay inside their block).

Patterns are literal text except ``{{regex}}``; ``[[NAME:regex]]`` captures a variable that
``[[NAME]]`` uses later. Like FileCheck without ``--strict-whitespace``, a run of spaces or tabs
in a pattern matches any non-empty run of spaces or tabs, and leading/trailing blanks of a
pattern are ignored. A match never spans lines.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["check", "FileCheckError", "parse_checks", "Check"]

_DIRECTIVE = re.compile(r"//\s*(CHECK(?:-NEXT|-SAME|-NOT|-LABEL|-EMPTY|-DAG)?):(.*)$")
_TOKEN = re.compile(r"\{\{(.*?)\}\}|\[\[([A-Za-z_][A-Za-z0-9_]*)(?::(.*?))?\]\]")


class FileCheckError(AssertionError):
    pass


@dataclass
class Check:
    kind: str        # CHECK, CHECK-NEXT, ...
    pattern: str
    line: int        # line of the directive in the check file (1-based)


def parse_checks(check_text: str) -> list[Check]:
    checks = []
    for i, line in enumerate(check_text.splitlines(), 1):
        m = _DIRECTIVE.search(line)
        if m:
            if m.group(1) == "CHECK-DAG":
                raise FileCheckError(f"line {i}: CHECK-DAG is not supported")
            checks.append(Check(m.group(1), m.group(2).strip(), i))
    return checks


def _compile(pattern: str, variables: dict[str, str]) -> tuple[re.Pattern, list[str]]:
    """The regex of a pattern and the names of the variables it defines (in group order)."""
    out, names, pos = [], [], 0
    for m in _TOKEN.finditer(pattern):
        out.append(_literal(pattern[pos:m.start()]))
        regex, name, definition = m.groups()
        if regex is not None:
            out.append(f"(?:{regex})")
        elif definition is not None:
            names.append(name)
            out.append(f"(?P<{name}>{definition})")
        else:
            if name not in variables:
                raise FileCheckError(f"undefined variable [[{name}]] in pattern {pattern!r}")
            out.append(_literal(variables[name]))
        pos = m.end()
    out.append(_literal(pattern[pos:]))
    return re.compile("".join(out)), names


def _literal(text: str) -> str:
    return "[ \t]+".join(re.escape(part) for part in re.split(r"[ \t]+", text))


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    e = text.find("\n", pos)
    return len(text) if e < 0 else e


def _search(regex: re.Pattern, text: str, start: int, end: int) -> re.Match | None:
    """First match in text[start:end] that stays on one line."""
    pos = start
    while pos <= end:
        m = regex.search(text, pos, end)
        if m is None:
            return None
        if "\n" not in m.group(0):
            return m
        pos = m.start() + 1
    return None


def _context(text: str, pos: int) -> str:
    line_no = text.count("\n", 0, pos) + 1
    lines = text.splitlines()
    lo = max(line_no - 3, 0)
    shown = "\n".join(f"{'>>' if i + 1 == line_no else '  '} {i + 1:4}| {line}"
                      for i, line in enumerate(lines[lo:lo + 6], lo))
    return f"input line {line_no}:\n{shown}"


def check(check_text: str, output: str, name: str = "<checks>") -> None:
    """Raise FileCheckError unless ``output`` satisfies the CHECK directives of ``check_text``."""
    checks = parse_checks(check_text)
    if not checks:
        raise FileCheckError(f"{name}: no CHECK directives")
    variables: dict[str, str] = {}
    # Labels first: they cut the output into blocks.
    groups: list[tuple[Check | None, list[Check]]] = [(None, [])]
    for c in checks:
        if c.kind == "CHECK-LABEL":
            groups.append((c, []))
        else:
            groups[-1][1].append(c)
    bounds: list[tuple[int, int]] = []
    pos = 0
    for label, _ in groups:
        if label is None:
            bounds.append((0, 0))
            continue
        regex, names = _compile(label.pattern, variables)
        m = _search(regex, output, pos, len(output))
        if m is None:
            raise FileCheckError(f"{name}:{label.line}: CHECK-LABEL: {label.pattern!r} not found\n"
                                 f"{_context(output, pos)}")
        variables.update({n: m.group(n) for n in names})
        bounds.append((m.start(), m.end()))
        pos = m.end()
    for gi, (label, body) in enumerate(groups):
        start = bounds[gi][1]
        end = bounds[gi + 1][0] if gi + 1 < len(groups) else len(output)
        if label is None and len(groups) > 1:
            end = bounds[1][0]
        _check_block(body, output, start, end, variables, name, label is not None)


def _check_block(body: list[Check], text: str, start: int, end: int, variables: dict[str, str],
                 name: str, after_label: bool) -> None:
    pos = start
    last_match_line_end = _line_end(text, start) if after_label else None
    pending_not: list[Check] = []
    for c in body:
        if c.kind == "CHECK-NOT":
            pending_not.append(c)
            continue
        if c.kind == "CHECK-EMPTY":
            nl = text.find("\n", pos)
            if nl < 0 or nl + 1 > end or _line_end(text, nl + 1) != nl + 1:
                raise FileCheckError(f"{name}:{c.line}: CHECK-EMPTY: the next line is not empty\n{_context(text, pos)}")
            _check_not(pending_not, text, pos, nl + 1, variables, name)
            pending_not = []
            pos = nl + 1
            last_match_line_end = nl + 1
            continue
        regex, names = _compile(c.pattern, variables)
        if c.kind == "CHECK-SAME":
            m = _search(regex, text, pos, _line_end(text, pos))
        elif c.kind == "CHECK-NEXT":
            if last_match_line_end is None:
                raise FileCheckError(f"{name}:{c.line}: CHECK-NEXT without a previous match")
            nxt = last_match_line_end + 1
            m = _search(regex, text, nxt, min(_line_end(text, nxt), end)) if nxt <= end else None
        else:
            m = _search(regex, text, pos, end)
        if m is None:
            raise FileCheckError(f"{name}:{c.line}: {c.kind}: {c.pattern!r} not found\n{_context(text, pos)}")
        _check_not(pending_not, text, pos, m.start(), variables, name)
        pending_not = []
        variables.update({n: m.group(n) for n in names})
        pos = m.end()
        last_match_line_end = _line_end(text, m.end())
    _check_not(pending_not, text, pos, end, variables, name)


def _check_not(nots: list[Check], text: str, start: int, end: int, variables: dict[str, str], name: str) -> None:
    for c in nots:
        regex, _ = _compile(c.pattern, variables)
        m = _search(regex, text, start, end)
        if m is not None:
            raise FileCheckError(f"{name}:{c.line}: CHECK-NOT: {c.pattern!r} found\n{_context(text, m.start())}")
