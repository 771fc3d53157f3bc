#!/usr/bin/env python3
"""Run ONNX's backend node tests through quantir and report pass / fail / unsupported per op.

Prints one row per ONNX op type that has node tests (ops quantir does not import are
listed as "not imported"), and writes ``bench/results/onnx_conformance.json`` with the
per-case outcomes. Exit status 1 when any case of a supported op fails.

    python scripts/onnx_conformance.py            # all ops
    python scripts/onnx_conformance.py Conv Resize
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import onnx  # noqa: E402

from quantir.frontends.onnx import SUPPORTED_OPS  # noqa: E402
from quantir.frontends.onnx.conformance import collect_cases, run_case  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ops", nargs="*", help="only these ONNX op types")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "onnx_conformance.json")
    p.add_argument("--verbose", "-v", action="store_true", help="print every failing or unsupported case")
    args = p.parse_args(argv)

    start = time.perf_counter()
    cases = [c for c in collect_cases(REPO / ".cache") if not args.ops or c.op_type in args.ops]
    rows: dict[str, dict[str, int]] = defaultdict(lambda: {"pass": 0, "fail": 0, "unsupported": 0,
                                                           "not imported": 0})
    records = []
    for case in cases:
        if case.op_type in SUPPORTED_OPS:
            outcome = run_case(case)
            status, reason = outcome.status, outcome.reason
        else:
            status, reason = "not imported", f"quantir does not import {case.op_type}"
        rows[case.op_type][status] += 1
        records.append({"case": case.name, "op": case.op_type, "status": status, "reason": reason})
        if args.verbose and status in ("fail", "unsupported"):
            print(f"{status:12s} {case.name}: {reason[:200]}")

    width = max(len(op) for op in rows) + 2
    print(f"{'op':{width}s}{'pass':>6s}{'fail':>6s}{'unsup':>7s}{'not imported':>14s}")
    totals = defaultdict(int)
    for op in sorted(rows):
        r = rows[op]
        for k, v in r.items():
            totals[k] += v
        print(f"{op:{width}s}{r['pass']:6d}{r['fail']:6d}{r['unsupported']:7d}{r['not imported']:14d}")
    print(f"{'total':{width}s}{totals['pass']:6d}{totals['fail']:6d}{totals['unsupported']:7d}"
          f"{totals['not imported']:14d}")
    supported = [op for op in rows if op in SUPPORTED_OPS]
    print(f"{len(supported)} supported op types with node tests, {len(rows) - len(supported)} not imported; "
          f"{time.perf_counter() - start:.1f} s")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "onnx_version": onnx.__version__,
        "totals": dict(totals),
        "per_op": {op: rows[op] for op in sorted(rows)},
        "cases": records,
    }, indent=1))
    print(f"wrote {args.out}")
    return 1 if totals["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
