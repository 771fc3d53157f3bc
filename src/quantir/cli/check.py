"""``quantir check MODEL``: validate a quantized model against the LiteRT int8 spec table."""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="quantized model: quantir .mlir, an ONNX QDQ model or an int8 .tflite")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..api import load
    from ..quantize.check import check_module

    if Path(args.model).suffix == ".onnx":
        # keep the QuantizeLinear/DequantizeLinear pairs: constant folding would erase the weights' DQ
        from ..frontends.onnx import load_onnx
        from ..quantize.check_qdq import check_qdq
        # (keep_unsupported: ONNX Runtime contrib ops, e.g. a weight-only MatMulNBits, are checked as opaque nodes)
        report = check_qdq(load_onnx(args.model, optimize=False, keep_qdq=True, keep_unsupported=True))
    elif Path(args.model).suffix == ".tflite":
        from ..backends.tflite.check import check_tflite   # also what LiteRT refuses in the file itself
        report = check_tflite(args.model)
    else:
        report = check_module(load(args.model))
    for v in report.violations:
        print(v)
    unknown = sorted(set(report.unknown))
    print(f"{report.checked} ops checked, {len(report.violations)} violations"
          + (f"; cannot check (quantized, but quantir has no spec rule for them): {', '.join(unknown)}"
             if unknown else ""))
    return 0 if report.ok else 1
