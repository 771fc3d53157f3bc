"""How ``quantir opt --canonicalize`` scales with the number of qcast/dcast pairs (issue 11, item 10).

Builds a chain ``x -> qcast -> dcast -> qcast -> dcast ... -> return`` of N pairs (every pair
folds away: ``dcast(qcast(x)) -> x``) and a fan-out of N pairs reading one argument,
canonicalizes it and prints the seconds per N. Linear means the time per pair stays flat.
Writes bench/results/scaling_canonicalize.json.

    .venv/bin/python bench/scaling_canonicalize.py [--sizes 1000,2000,4000]
"""
from __future__ import annotations

import argparse
import gc
import json
import pathlib
import time

from quantir.ir import Function, Module
from quantir.ir.dialects import func, nn, quant
from quantir.passes import Canonicalize
from quantir.types import TensorType, f32, parse_type

T = TensorType((4,), f32)
Q = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.5>"))


def build(n: int, fanout: bool) -> Module:
    """A chain of N qcast/dcast pairs, or N pairs on one argument whose results are summed.

    Built through the API, not parsed: parsing is timed by the text benchmarks, and at ~1 ms
    per op it would dominate the run."""
    fn = Function.create("main", [T], [T])
    x = v = fn.arguments[0]
    for _ in range(n):
        q = fn.body.append(quant.QCAST.build([x if fanout else v], [Q])).result
        d = fn.body.append(quant.DCAST.build([q], [T])).result
        v = fn.body.append(nn.ADD.build([v, d], [T])).result if fanout else d
    fn.body.append(func.RETURN.build([v], []))
    return Module([fn])


def time_canonicalize(n: int, fanout: bool, repeats: int = 3) -> float:
    """The best of ``repeats`` runs, each on a fresh module (the machine may be shared)."""
    best = float("inf")
    for _ in range(repeats):
        module = build(n, fanout)
        gc.collect()
        start = time.perf_counter()
        Canonicalize().run(module)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,2000,4000,8000,16000,32000")
    args = ap.parse_args()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for shape in ("chain", "fanout"):
            seconds = time_canonicalize(n, fanout=shape == "fanout")
            rows.append({"shape": shape, "pairs": n, "seconds": round(seconds, 4),
                         "us_per_pair": round(seconds / n * 1e6, 2)})
            print(f"{shape:7s} {n:6d} pairs  {seconds:8.3f} s  {seconds / n * 1e6:7.1f} us/pair", flush=True)
    out = pathlib.Path(__file__).parent / "results" / "scaling_canonicalize.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"bench": "scaling_canonicalize", "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
