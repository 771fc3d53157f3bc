"""Fuzz quantir's type parser: nothing may escape but ParseError/VerifyError.

Inputs are mutations of valid type strings (character and token edits, splices of two
seeds, deep nesting past the depth limit and the recursion limit, integer literals around
Python's 4,300-digit int/str limit, Unicode digits, NUL bytes, bytes that are not UTF-8 as
``surrogateescape`` decodes them) and random token soups. For inputs that parse, the printed form
must parse back to itself (except where MLIR itself cannot read its output back: hex or
range-edge sub-channel scales in a non-f64 format).

    .venv/bin/python bench/fuzz_types.py --n 100000 [--seed 0] [--out bench/results/fuzz_types.json]

Writes a JSON summary; exits 1 if anything else escaped, an input took over 10 s or the peak
resident set passed 1 GB.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import random
import resource
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from quantir.errors import ParseError, VerifyError  # noqa: E402
from quantir.types.floatfmt import format_apfloat  # noqa: E402
from quantir.types.floatsem import fval_from_double, round_to  # noqa: E402
from quantir.types.quant import scale_range_message  # noqa: E402
from quantir.types import (  # noqa: E402
    FLOAT_TYPE_NAMES, FloatType, OpaqueType, Type, UniformQuantizedSubChannelType, any_quantized, calibrated,
    parse_type, uniform, uniform_per_axis, uniform_sub_channel,
)

HAND_SEEDS = [
    "!quant.uniform<i8:f32, 0.05:-3>", "!quant<uniform<u8<1:255>:f16, 0x3FB999999999999A:128>>",
    "!quant.uniform<i8:f32:1, {0.5:10, 0.25}>", "!quant.uniform<i8:f32:{0:2,1:3}, {{1.0,2.0},{3.0:1,4.0}}>",
    "!quant.any<i8:f32>", "!quant.any<u4<0:10>>", "!quant.calibrated<f32<-1.0:1.0>>",
    "tensor<2x?x!quant.uniform<si8:f32, 1.0>>", "tensor<*x!quant.uniform<f8E4M3FN:f32, 0.5>>",
    "tensor<!quant.uniform<i8<-127:127>:bf16, 2.>>", "vector<2x[4]xf32>", "memref<?x4xi8, 1>",
    "(i8, tensor<4xf32>) -> (f32, i8)", "() -> ()", "complex<f64>", "tuple<i8, !quant.any<i8>>",
    "!foo.bar<1, {x}>", '!foo<"a>b">', "tensor<0x10xf32>", "i16777215", "f8E4M3B11FNUZ",
    "!quant.uniform<i8:f32, 1.0e38>", "!quant.uniform<i8:f32, 0x7FF8000000000000>",
]
TOKENS = ["<", ">", "{", "}", "(", ")", "[", "]", ":", ",", "->", "x", "?", "*", "-", "+", ".", "...",
          "!quant.uniform", "!quant.any", "!quant.calibrated", "!quant", "uniform", "any", "tensor", "vector",
          "memref", "complex", "tuple", "i8", "u8", "si8", "ui8", "i33", "i0", "u", "f32", "f16", "bf16",
          "f8E4M3FN", "f80", "index", "none", "0", "1", "-1", "127", "255", "9223372036854775808", "0x10",
          "0x7FF8000000000000", "1.0", "0.5", "2.", "1e3", "1.0e400", '"s"', '"', "//", "\n", " ", "true",
          "9" * 4300, "9" * 4301, "1" * 5000, "0x" + "F" * 3571, "0x" + "F" * 3572, "i" + "9" * 5000, "\u00b2",
          "\u0663",
          "\x00", "\udcff", "\ufeff", "\u00a0"]
CHARS = "<>{}()[]:,.-+*?!x0123456789abefiu \n\"'/\\#%@$_"


def random_valid_type(rng: random.Random) -> str:
    et = rng.choice(FLOAT_TYPE_NAMES)
    lo, hi = FloatType(et).min_denormal, FloatType(et).max_finite
    nice = [x for x in (0.05, 1.0, 0.5, lo, hi, 123456.7) if lo <= x <= hi and x > 0]

    def scale() -> float:
        if rng.random() < 0.5:
            return rng.choice(nice)
        x = math.exp(rng.uniform(math.log(max(lo, 1e-300)), math.log(min(hi, 1e300))))
        return min(max(x, lo), hi)

    storage = rng.choice(["i8", "u8", "si8", "ui8", "i4", "u16", "i32", "i1", "f8E5M2", "f8E4M3FN"])
    kind = rng.randrange(5)
    if kind == 0:
        t = uniform(storage, et, scale=scale(), zero_point=rng.randint(-300, 300))
    elif kind == 1:
        n = rng.randint(1, 4)
        t = uniform_per_axis(storage, et, axis=rng.randint(0, 3), scales=[scale() for _ in range(n)],
                             zero_points=[rng.randint(-5, 5) for _ in range(n)])
    elif kind == 2:
        t = uniform_sub_channel(storage, et, block_sizes=[(0, rng.randint(1, 8))],
                                scales=[[scale() for _ in range(2)] for _ in range(2)])
    elif kind == 3:
        t = any_quantized(storage, rng.choice([None, et]))
    else:
        t = calibrated(et, -rng.random() * 10, rng.random() * 10 + 0.1)
    text = str(t)
    return f"tensor<{rng.randint(1, 9)}x?x{text}>" if rng.random() < 0.3 else text


def mutate(text: str, rng: random.Random, seeds: list[str]) -> str:
    for _ in range(rng.choice([1, 1, 1, 2, 3, 5])):
        op = rng.randrange(8)
        i = rng.randrange(len(text) + 1)
        if op == 0 and text:
            text = text[:i] + text[i + 1:]
        elif op == 1:
            text = text[:i] + rng.choice(CHARS) + text[i:]
        elif op == 2:
            text = text[:i] + rng.choice(TOKENS) + text[i:]
        elif op == 3 and text:
            text = text[:i] + rng.choice(CHARS) + text[i + 1:]
        elif op == 4:  # duplicate a slice
            j = rng.randrange(i, len(text) + 1)
            text = text[:j] + text[i:j] + text[j:]
        elif op == 5:  # splice another seed
            other = rng.choice(seeds)
            k = rng.randrange(len(other) + 1)
            text = text[:i] + other[k:]
        elif op == 6 and text:  # delete a slice
            j = rng.randrange(i, len(text) + 1)
            text = text[:i] + text[j:]
        elif op == 7:  # deep nesting
            d = rng.choice([5, 50, 300, 5000])
            opener, closer = rng.choice([("(", ") -> i8"), ("{", "}"), ("tensor<", ">"), ("<", ">")])
            text = text[:i] + opener * d + text[i:] + closer * d
    return text


def token_soup(rng: random.Random) -> str:
    return "".join(rng.choice(TOKENS) + rng.choice(["", "", " "]) for _ in range(rng.randint(1, 25)))


def _walk(t):
    yield t
    for child in ([getattr(t, "element_type", None)] + list(getattr(t, "inputs", ())) +
                  list(getattr(t, "results", ())) + list(getattr(t, "types", ()))):
        if isinstance(child, Type):
            yield from _walk(child)


def reads_back(t) -> bool:
    """False where MLIR itself cannot read its output back: sub-channel scales of a non-f64
    format that print as hex (bits of that format, read as a double's bits) or that print
    below the range (f16's smallest subnormal prints as 5.960460e-08); opaque types whose
    data MLIR deems "pretty" although it holds several <...> groups (``!a<b<c>d<e>>``)."""
    for q in _walk(t):
        if isinstance(q, OpaqueType):
            return False
        if not isinstance(q, UniformQuantizedSubChannelType) or q.expressed_type.name == "f64":
            continue
        sem = q.expressed_type.semantics
        for x in q.scales:
            text = format_apfloat(round_to(sem, fval_from_double(x)), sem)
            if text.startswith("0x") or scale_range_message(float(text), q.expressed_type):
                return False
    return True


def _check_time(t0: float, text: str, escapes: list[dict], limit_s: float = 10.0) -> None:
    took = time.perf_counter() - t0
    if took > limit_s:
        escapes.append({"input": text[:2000], "error": f"slow: {took:.1f} s"})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "fuzz_types.json"))
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    seeds = HAND_SEEDS + [random_valid_type(rng) for _ in range(400)]

    counts = collections.Counter()
    messages = collections.Counter()
    escapes: list[dict] = []
    t0 = time.perf_counter()
    for k in range(args.n):
        r = rng.random()
        text = token_soup(rng) if r < 0.15 else rng.choice(seeds) if r < 0.2 else mutate(rng.choice(seeds), rng, seeds)
        t_in = time.perf_counter()
        try:
            t = parse_type(text)
        except ParseError as e:
            counts["parse_error"] += 1
            _check_time(t_in, text, escapes)
            messages[e.message.split(":")[0][:60]] += 1
            if e.loc is None:
                escapes.append({"input": text, "error": "ParseError without a location"})
            continue
        except VerifyError as e:
            counts["verify_error"] += 1
            _check_time(t_in, text, escapes)
            messages["VerifyError: " + e.message[:50]] += 1
            continue
        except Exception as e:  # noqa: BLE001 - the point of the fuzzer
            counts["escaped"] += 1
            escapes.append({"input": text, "error": repr(e), "traceback": traceback.format_exc()[-2000:]})
            continue
        counts["accepted"] += 1
        _check_time(t_in, text, escapes)
        printed = str(t)
        try:
            again = str(parse_type(printed))
            if again != printed:
                escapes.append({"input": text, "error": f"print/parse not a fixed point: {printed!r} -> {again!r}"})
        except ParseError:
            if reads_back(t):
                escapes.append({"input": text, "error": f"printed form does not parse: {printed!r}"})
            else:
                counts["mlir_unreadable_output"] += 1
        except Exception as e:  # noqa: BLE001
            escapes.append({"input": text, "error": f"reparse of {printed!r}: {e!r}"})
    elapsed = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if peak_mb > 1024:
        escapes.append({"input": "", "error": f"peak resident set {peak_mb:.0f} MB > 1 GB"})

    result = {
        "inputs": args.n, "seed": args.seed, "seconds": round(elapsed, 2),
        "inputs_per_second": round(args.n / elapsed), "counts": dict(counts),
        "escaped": len(escapes), "peak_rss_mb": round(peak_mb), "escapes": escapes[:50],
        "top_messages": messages.most_common(25),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{args.n} inputs in {elapsed:.1f}s ({result['inputs_per_second']}/s): "
          + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) + f"; escaped={len(escapes)}")
    for msg, n in messages.most_common(8):
        print(f"  {n:6d}  {msg}")
    for e in escapes[:5]:
        print("ESCAPE:", ascii(e["input"][:200]), "->", e["error"][:300])
    print(f"wrote {out}")
    return 1 if escapes else 0


if __name__ == "__main__":
    sys.exit(main())
