"""``quantir`` — one entry point, one module per subcommand.

Each subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int`` and is
imported only when used, so ``quantir opt`` never imports ONNX Runtime.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import QuantirError

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "opt": ("quantir.cli.opt", "parse, verify and print IR text; run passes (like mlir-opt)"),
    "quantize": ("quantir.cli.quantize", "quantize a float model to int8 with calibration data"),
    "check": ("quantir.cli.check", "check a quantized model against the LiteRT int8 spec"),
    "run": ("quantir.cli.run", "run a model (.onnx, .mlir, .tflite) on inputs from an .npz file"),
    "show": ("quantir.cli.show", "print a model (.onnx, .mlir, .tflite) as IR text with large constants elided"),
    "convert": ("quantir.cli.convert", "write a model in another format: .tflite -> .onnx (QDQ/QOperator), .mlir, ..."),
    "verify": ("quantir.cli.verify", "check a .tflite bit-exact: LiteRT's reference kernels vs quantir, every tensor"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quantir", description="Post-training integer quantization compiler.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except QuantirError as e:
        print(f"quantir {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
