"""``quantir verify MODEL.tflite --inputs IN.npz``: LiteRT's reference kernels vs quantir, element by element."""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="int8, 16x8 or dynamic-range .tflite model")
    p.add_argument("--inputs", required=True,
                   help=".npz keyed by the model's input names (axis 0 indexes samples)")
    p.add_argument("--resolver", choices=("reference", "optimized", "default"), default="reference",
                   help="LiteRT kernels: reference = BUILTIN_REF (the oracle, default); optimized = without "
                        "XNNPACK; default = with XNNPACK (float requantization, not bit-exact)")
    p.add_argument("--outputs-only", action="store_true", help="compare the outputs only, not every intermediate")
    p.add_argument("--isolated", action="store_true",
                   help="also run each op on LiteRT's own input tensors (a dynamic-range model's float ops round "
                        "differently from LiteRT's, so its tensors differ end to end; in isolation every integer "
                        "and hybrid op must be bit-exact, and the exit status follows that)")
    p.add_argument("--batch", type=int, default=16, help="samples per invocation when the batch is dynamic")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from ..fileio import atomic_write, check_outputs
    from ..verify import verify_tflite

    check_outputs({"--json": args.json}, {"input model": args.model, "input arrays": args.inputs})
    report = verify_tflite(args.model, args.inputs, resolver=args.resolver, intermediates=not args.outputs_only,
                           batch=args.batch, isolated=args.isolated)
    print(report.text())
    if args.json:
        atomic_write(args.json, json.dumps(report.as_dict(), indent=2).encode())
    return 0 if report.ok or (args.isolated and report.ops_ok) else 1
