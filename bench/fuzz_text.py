"""Fuzz ``quantir.text.parse_module``: nothing may escape but ParseError and VerifyError.

Inputs are mutations of the golden files' chunks and of printed qnn ops (character edits, token
deletions, duplications, swaps and replacements, splices of two chunks), runs of random MLIR
tokens, and adversarial inputs (one in ten): integer literals around Python's 4,300-digit
int/str limit, nesting deep enough to reach the recursion limit, tokens of 10^5-10^6 characters,
NUL bytes, bytes that are not UTF-8 (decoded with ``surrogateescape``, as ``quantir opt`` and
``quantir.load`` read files) and Unicode digits and spaces. Every input that parses is also
printed, re-parsed and re-printed: the second print must equal the first (the printer's output
is a fixed point of print . parse).

A finding is an exception other than ParseError/VerifyError, a broken round trip, an input
that takes over 10 s, or a peak resident set above 1 GB.

    PYTHONPATH=src python bench/fuzz_text.py -n 100000          # writes bench/results/fuzz_text.json

Exit status 1 on any finding.

``--differential N`` also runs N mutated chunks through ``quantir opt`` and ``iree-opt
--allow-unregistered-dialect`` (one ``--split-input-file`` run each) and reports how often
both give the same first diagnostic (message and position) or the same printed output, with
the kinds of disagreement (mostly constructs quantir declines, such as regions on arbitrary
ops). It is informative, not a pass/fail criterion.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import random
import re
import resource
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from quantir.errors import ParseError, VerifyError  # noqa: E402
from quantir.text import parse_module, print_module  # noqa: E402

GOLDEN = ROOT / "tests" / "text" / "golden"
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%@#!^][\w$.\-]+|\d+\.\d*(?:[eE][+-]?\d+)?|0x[0-9a-fA-F]+|\d+|'
                    r"[A-Za-z_][\w$.]*|->|\{-#|#-\}|\.\.\.|\S")
_POOL = ["%0", "%arg0", "%1#1", "@f", "@\"q\"", "#a", "!t", "^bb0", "func.func", "module", "return",
         "quant.qcast", "quant.dcast", "quant.scast", "arith.constant", '"test.op"', '"quant.stats"',
         "dense", "dense_resource", "array", "unit", "true", "false", "loc", "attributes", "private",
         "to", "tensor", "<", ">", "(", ")", "{", "}", "[", "]", ":", ",", "=", "->", "?", "x", "*",
         "-", "+", "...", "{-#", "#-}", "f32", "f16", "bf16", "f64", "i1", "i8", "i32", "i64", "ui8",
         "si8", "index", "none", "4x", "2x3xf32", "1", "0", "-1", "255", "0x7FC00000", "1.5", "1.0e39",
         "1e3", '"0x0100"', '"s\\n"', '"\\q"', "!quant.uniform<i8:f32, 0.5>", "!quant.uniform<i8:f32:0, {1.0,2.0}>",
         "!quant.uniform<i8:f32:{0:1}, {{1.0}}>", "!quant.any<i8>", "dialect_resources", "builtin",
         "//", "\n", " ", "// -----", "%", "@", "#", "!", '"', "\\"]
_CHARS = "%@#!^(){}[]<>:,=-+*?.x0123456789abcdefi\"\\ \n\tu_"


def seeds() -> list[str]:
    out = []
    for path in sorted(GOLDEN.glob("*.mlir")):
        out.extend(chunk for chunk in path.read_text().split("// -----") if chunk.strip())
    return out


def mutate(text: str, rng: random.Random, corpus: list[str]) -> str:
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        kind = rng.randrange(8)
        if kind < 3:  # character edits
            if not text:
                text = rng.choice(_CHARS)
                continue
            i = rng.randrange(len(text))
            op = rng.randrange(3)
            if op == 0:
                text = text[:i] + text[i + 1:]
            elif op == 1:
                text = text[:i] + rng.choice(_CHARS) + text[i:]
            else:
                text = text[:i] + rng.choice(_CHARS) + text[i + 1:]
            continue
        tokens = [m for m in _TOKEN.finditer(text)]
        if not tokens:
            text += rng.choice(_POOL)
            continue
        t = rng.choice(tokens)
        if kind == 3:  # delete a token
            text = text[:t.start()] + text[t.end():]
        elif kind == 4:  # duplicate a token
            text = text[:t.end()] + " " + t.group(0) + text[t.end():]
        elif kind == 5:  # replace a token
            text = text[:t.start()] + rng.choice(_POOL) + text[t.end():]
        elif kind == 6:  # swap two tokens
            u = rng.choice(tokens)
            a, b = sorted((t, u), key=lambda m: m.start())
            if a.end() <= b.start():
                text = text[:a.start()] + b.group(0) + text[a.end():b.start()] + a.group(0) + text[b.end():]
        else:  # splice with another seed
            other = rng.choice(corpus)
            j = rng.randrange(len(other) + 1)
            text = text[:t.start()] + other[j:j + rng.randrange(1, 200)] + text[t.end():]
    return text


QNN_SEED = """func.func @main(%arg0: tensor<1x3x5x5x!quant.uniform<i8:f32, 2.000000e-02:-5>>, %arg1: tensor<2x3x3x3x!quant.uniform<i8<-127:127>:f32:0, {3.000000e-03,4.000000e-03}>>) -> tensor<1x2x3x3x!quant.uniform<i8:f32, 5.000000e-02:3>> {
  %0 = "qnn.conv"(%arg0, %arg1) {activation = "RELU6", dilations = array<i64: 1, 1>, multiplier = array<i64: 1319413916, 1759218622>, pads = array<i64: 0, 0, 0, 0>, shift = array<i64: -9, -9>, strides = array<i64: 1, 1>} : (tensor<1x3x5x5x!quant.uniform<i8:f32, 2.000000e-02:-5>>, tensor<2x3x3x3x!quant.uniform<i8<-127:127>:f32:0, {3.000000e-03,4.000000e-03}>>) -> tensor<1x2x3x3x!quant.uniform<i8:f32, 5.000000e-02:3>>
  %1 = "qnn.requantize"(%0) {multiplier = array<i64: 1073741824>, shift = array<i64: 0>} : (tensor<1x2x3x3x!quant.uniform<i8:f32, 5.000000e-02:3>>) -> tensor<1x2x3x3x!quant.uniform<i8:f32, 5.000000e-02:3>>
  return %1 : tensor<1x2x3x3x!quant.uniform<i8:f32, 5.000000e-02:3>>
}
"""  # noqa: E501  (one op per line, as the printer writes it)

# adversarial inputs: (opener, closer) pairs nested past every depth limit and the recursion limit
_NESTING = [("[", "]"), ("{a = ", "}"), ("dense<[", "]>"), ("tensor<", ">"), ("tuple<", ">"), ("(", ") -> ()"),
            ("!foo<", ">"), ("<", ">"), ("loc(fused[", "])"), ("loc(callsite(", ' at "b"))'), ("module {\n", "}\n"),
            ('"t.op"() ({\n', "}) : () -> ()\n"), ("func.func @f() {\n", "return\n}\n")]
_NUMBER = re.compile(r"(?<![\w.$])(?:0x[0-9a-fA-F]+|\d+)")   # literals, result counts, first dims (4x8)
_ODD_CHARS = ["\x00", "\u00b2", "\u0663", "\u00a0", "\ufeff", "\u2028", "\r", "\v", "\f", "\x1b", "\ud800",
              "\U0001f600"]
ADVERSARIAL = ("huge_integer", "deep_nesting", "long_token", "nul_bytes", "invalid_utf8", "odd_characters")


def _insert(text: str, rng: random.Random, piece: str) -> str:
    i = rng.randrange(len(text) + 1)
    return text[:i] + piece + text[i:]


def _at_token(text: str, rng: random.Random, piece: str) -> str:
    """``piece`` in place of a random token (or inserted when there is none)."""
    tokens = list(_TOKEN.finditer(text))
    if not tokens:
        return text + piece
    t = rng.choice(tokens)
    return text[:t.start()] + piece + text[t.end():]


def adversarial(kind: str, text: str, rng: random.Random) -> str:
    if kind == "huge_integer":
        n = rng.choice([4299, 4300, 4301, 5000, 20000])
        digits = rng.choice("123456789") + "".join(rng.choice("0123456789") for _ in range(n - 1))
        piece = rng.choice([digits, digits, "-" + digits, "0x" + "F" * rng.choice([3570, 3571, 3572, 5000]),
                            "%0#" + digits, "i" + digits, digits + ".0", "1.0e" + digits])
        numbers = list(_NUMBER.finditer(text))   # most often in place of a number, where the parser converts it
        if numbers and rng.random() < 0.8:
            m = rng.choice(numbers)
            return text[:m.start()] + piece + text[m.end():]
        return _at_token(text, rng, piece)
    if kind == "deep_nesting":
        opener, closer = rng.choice(_NESTING)
        d = rng.choice([99, 101, 199, 201, 1000, 5000, 50000])
        body = rng.choice(["1", "f32", '"a"', "", "i8"])
        return _at_token(text, rng, opener * d + body + closer * rng.choice([d, d, d - 1, 0]))
    if kind == "long_token":
        n = rng.choice([10 ** 5, 10 ** 6])
        piece = rng.choice(["a" * n, '"' + "a" * n + '"', "%" + "v" * n, "@" + "s" * n, "#" + "x" * n,
                            "1." + "5" * n, "1.0e-" + "9" * n, "x".join(["4"] * (n // 100)) + "xf32",
                            "x".join(rng.choice("4?") for _ in range(n // 100)) + "xf32",
                            '"0x' + "AB" * (n // 2) + '"', " " * n, "// " + "c" * n + "\n"])
        return _at_token(text, rng, piece)
    if kind == "nul_bytes":
        for _ in range(rng.randint(1, 4)):
            text = _insert(text, rng, "\x00" * rng.randint(1, 3))
        return text
    if kind == "invalid_utf8":
        data = bytearray(text.encode("utf-8", "surrogateescape"))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data) + 1)
            data[i:i] = bytes(rng.randrange(0x80, 0x100) for _ in range(rng.randint(1, 3)))
        return data.decode("utf-8", "surrogateescape")
    for _ in range(rng.randint(1, 3)):   # odd_characters
        text = _insert(text, rng, rng.choice(_ODD_CHARS))
    return text


def random_tokens(rng: random.Random) -> str:
    return " ".join(rng.choice(_POOL) for _ in range(rng.randrange(1, 40)))


def run(n: int, seed: int, slow_s: float = 10.0) -> dict:
    rng = random.Random(seed)
    corpus = seeds() + [QNN_SEED]
    counts = {"inputs": 0, "parse_error": 0, "verify_error": 0, "parsed": 0, "round_trips": 0}
    by_kind = collections.Counter()
    failures: list[dict] = []
    slowest = (0.0, "")
    start = time.perf_counter()
    for i in range(n):
        if i % 10 == 9:
            kind, text = "random_tokens", random_tokens(rng)
        elif i % 10 == 8:
            kind = ADVERSARIAL[(i // 10) % len(ADVERSARIAL)]
            text = adversarial(kind, rng.choice(corpus), rng)
        else:
            kind, text = "mutation", mutate(rng.choice(corpus), rng, corpus)
        by_kind[kind] += 1
        counts["inputs"] += 1
        t0 = time.perf_counter()
        outcome = _one(text, counts, failures)
        took = time.perf_counter() - t0
        if took > slowest[0]:
            slowest = (took, kind)
        if took > slow_s:
            failures.append({"input": text[:2000], "error": f"slow: {took:.1f} s ({kind}, {outcome})"})
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if peak_mb > 1024:
        failures.append({"input": "", "error": f"peak resident set {peak_mb:.0f} MB > 1 GB"})
    return {"seed": seed, "seeds": len(corpus), **counts, "by_kind": dict(by_kind), "failures": len(failures),
            "elapsed_s": round(elapsed, 2), "inputs_per_s": round(counts["inputs"] / elapsed, 1),
            "slowest_input_s": round(slowest[0], 3), "slowest_kind": slowest[1], "peak_rss_mb": round(peak_mb),
            "failure_examples": failures[:20]}


def _one(text: str, counts: dict, failures: list[dict]) -> str:
    """Parse, then print/parse/print; count the outcome, record a finding."""
    try:
        module = parse_module(text, "fuzz.mlir")
    except ParseError:
        counts["parse_error"] += 1
        return "parse_error"
    except VerifyError:
        counts["verify_error"] += 1
        return "verify_error"
    except Exception as e:  # a bug: record it
        failures.append({"input": text[:20000], "error": f"{type(e).__name__}: {e}"[:2000],
                         "traceback": traceback.format_exc(limit=8)})
        return "escaped"
    counts["parsed"] += 1
    try:
        first = print_module(module, large_elements="inline")
        second = print_module(parse_module(first, "printed.mlir", verify=False), large_elements="inline")
        if first != second:
            failures.append({"input": text[:20000], "error": "print(parse(print(m))) != print(m)",
                             "first": first[:20000], "second": second[:20000]})
            return "round_trip_broken"
        counts["round_trips"] += 1
        return "round_trip"
    except Exception as e:
        failures.append({"input": text[:20000], "error": f"round trip: {type(e).__name__}: {e}"[:2000],
                         "traceback": traceback.format_exc(limit=8)})
        return "escaped"


_DIAG = re.compile(r"^<stdin>:(\d+):(\d+): error: (.*)$")


def differential(n: int, seed: int) -> dict:
    """Compare quantir opt and iree-opt on mutated chunks (see the module docstring)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from oracle_tools import iree_opt_path
    from quantir.cli.opt import process

    exe = iree_opt_path()
    if exe is None:
        return {"skipped": "iree-opt not installed"}
    rng = random.Random(seed)
    legacy = ("quant.stats", "const_fake_quant", "coupled_ref")  # upstream MLIR removed them
    corpus = [c for c in seeds() if not any(k in c for k in legacy)]
    chunks: list[str] = []
    while len(chunks) < n:
        t = mutate(rng.choice(corpus), rng, corpus)
        if "// -----" not in t and "expected-" not in t and not any(k in t for k in legacy):
            chunks.append(t)
    text = "\n// -----\n".join(chunks)
    opts = argparse.Namespace(split_input_file=True, verify_diagnostics=False, canonicalize=False,
                              mlir_print_op_generic=False, mlir_elide_elementsattrs_if_larger=None)
    start = time.perf_counter()
    q_out, q_err, _ = process(text, "<stdin>", opts)
    proc = subprocess.run([exe, "--allow-unregistered-dialect", "--split-input-file"], input=text,
                          capture_output=True, text=True, timeout=600)
    starts = [1]
    for c in chunks[:-1]:
        starts.append(starts[-1] + c.count("\n") + 2)

    def first_errors(stderr: str) -> dict[int, tuple]:
        out: dict[int, tuple] = {}
        for line in stderr.splitlines():
            m = _DIAG.match(line)
            if m:
                out.setdefault(bisect.bisect_right(starts, int(m[1])) - 1, (int(m[1]), int(m[2]), m[3]))
        return out

    qe, ie = first_errors(q_err), first_errors(proc.stderr)
    qo, io_ = q_out.split("// -----\n"), proc.stdout.split("// -----\n")
    agree, kinds = 0, collections.Counter()
    for i in range(n):
        a, b = qe.get(i), ie.get(i)
        same = a == b and (a is not None or (i < len(qo) and i < len(io_) and qo[i] == io_[i]))
        if same:
            agree += 1
        else:
            kinds[f"{a[2][:70] if a else 'accepted'} | {b[2][:70] if b else 'accepted'}"] += 1
    return {"chunks": n, "agree": agree, "agree_fraction": round(agree / n, 4),
            "elapsed_s": round(time.perf_counter() - start, 2),
            "disagreements (quantir | iree-opt)": dict(kinds.most_common(25))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=100_000, help="number of inputs (default 100000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fuzz_text.json")
    ap.add_argument("--differential", type=int, default=0, metavar="N",
                    help="also compare N mutated chunks with iree-opt (default 0: off)")
    args = ap.parse_args(argv)
    report = run(args.n, args.seed)
    if args.differential:
        report["differential"] = differential(args.differential, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    summary = {k: v for k, v in report.items() if k != "failure_examples"}
    print(json.dumps(summary, indent=1))
    for f in report["failure_examples"][:5]:
        print("---", f["error"], "\n", ascii(f["input"][:500]), "\n", f.get("traceback", ""), file=sys.stderr)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
