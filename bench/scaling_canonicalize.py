"""How ``quantir opt --canonicalize`` scales with the number of qcast/dcast pairs (issue 11, item 10).

Builds a chain ``x -> qcast -> dcast -> qcast -> dcast ... -> return`` of N pairs (every pair
folds away: ``dcast(qcast(x)) -> x``) and a fan-out of N pairs reading one argument, parses the
text, canonicalizes it and prints the seconds per N. Linear means the time per pair stays flat.
Writes bench/results/scaling_canonicalize.json.

    .venv/bin/python bench/scaling_canonicalize.py [--sizes 1000,2000,4000]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time

from quantir.passes import Canonicalize
from quantir.text import parse_module

T = "tensor<4xf32>"
Q = "tensor<4x!quant.uniform<i8:f32, 0.5>>"


def chain_text(n: int) -> str:
    lines = [f"func.func @main(%x: {T}) -> {T} {{"]
    v = "%x"
    for i in range(n):
        lines.append(f"  %q{i} = quant.qcast {v} : {T} to {Q}")
        lines.append(f"  %d{i} = quant.dcast %q{i} : {Q} to {T}")
        v = f"%d{i}"
    lines += [f"  return {v} : {T}", "}"]
    return "\n".join(lines) + "\n"


def fanout_text(n: int) -> str:
    """N pairs on the same argument, each result added into a running sum (kept alive)."""
    lines = [f"func.func @main(%x: {T}) -> {T} {{"]
    acc = "%x"
    for i in range(n):
        lines.append(f"  %q{i} = quant.qcast %x : {T} to {Q}")
        lines.append(f"  %d{i} = quant.dcast %q{i} : {Q} to {T}")
        lines.append(f'  %s{i} = "nn.add"({acc}, %d{i}) : ({T}, {T}) -> {T}')
        acc = f"%s{i}"
    lines += [f"  return {acc} : {T}", "}"]
    return "\n".join(lines) + "\n"


def time_canonicalize(text: str) -> float:
    module = parse_module(text)
    start = time.perf_counter()
    Canonicalize().run(module)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,2000,4000,8000,16000,32000")
    args = ap.parse_args()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for shape, make in (("chain", chain_text), ("fanout", fanout_text)):
            seconds = time_canonicalize(make(n))
            rows.append({"shape": shape, "pairs": n, "seconds": round(seconds, 4),
                         "us_per_pair": round(seconds / n * 1e6, 2)})
            print(f"{shape:7s} {n:6d} pairs  {seconds:8.3f} s  {seconds / n * 1e6:7.1f} us/pair", flush=True)
    out = pathlib.Path(__file__).parent / "results" / "scaling_canonicalize.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"bench": "scaling_canonicalize", "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
