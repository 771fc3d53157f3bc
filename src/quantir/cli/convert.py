"""``quantir convert MODEL -o OUT``: re-express a model in another format (by extension).

An int8 ``.tflite`` (or an integer ``.mlir``) becomes an ONNX QDQ/QOperator model, IR text or
a ``.tflite`` again; a float model becomes float ONNX or IR text. The input file is only read.
"""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="model to read: .onnx, .mlir or int8 .tflite")
    p.add_argument("-o", "--output", required=True, help="output path: .onnx, .mlir or .tflite")
    p.add_argument("--format", choices=("qdq", "qoperator"), default="qdq", help="ONNX flavour of an integer model")
    p.add_argument("--io", choices=("float", "int8"), default="float", help=".tflite interface (see quantize)")
    p.add_argument("--activations", choices=("int8", "uint8"), default="int8", help="ONNX activation storage")


def _is_integer(module) -> bool:
    from ..ir.dialects import quant
    return any(op.opdef in (quant.QCAST, quant.DCAST) or op.name.startswith("qnn.") for op in module.main.ops)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..errors import QuantirError
    from ..fileio import atomic_write, check_outputs
    from .run import load_model

    out = Path(args.output)
    if out.suffix not in (".mlir", ".onnx", ".tflite"):
        raise QuantirError(f"unknown output format '{out.suffix}' for {out}: use .onnx, .mlir or .tflite")
    check_outputs({"-o": out}, {"input model": args.model})
    module = load_model(args.model)
    if out.suffix == ".mlir":
        from ..text import print_module
        atomic_write(out, print_module(module).encode())
    elif out.suffix == ".onnx" and _is_integer(module):
        from ..backends.onnx import save_quantized  # type: ignore[attr-defined]
        save_quantized(module, out, format=args.format, activations=args.activations)
    elif out.suffix == ".onnx":
        from ..backends.onnx import save_onnx
        save_onnx(module, out)
    else:  # .tflite
        from ..backends.tflite.export import save_tflite
        save_tflite(module, out, io=args.io)
    print(f"wrote {out}")
    return 0
