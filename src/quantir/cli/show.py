"""``quantir show MODEL [--elide N]``: print a model as IR text.

``MODEL`` is an ``.onnx`` file (imported and folded, as ``quantir run`` sees it) or
``.mlir`` text. Elements attributes with more than ``N`` elements (default 16; splats
excepted) print as ``dense_resource<__elided__>``, as ``mlir-opt
--mlir-elide-elementsattrs-if-larger=N`` does, so a 20 MB model prints as its structure;
``--elide -1`` keeps every constant (large ones as ``dense_resource`` blobs at the end).
Errors exit 1 with one line on stderr.
"""
from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model to print: .onnx or .mlir")
    parser.add_argument("--elide", type=int, default=16, metavar="N",
                        help="elide constants of more than N elements (default 16; -1 keeps them all)")
    parser.add_argument("--generic", action="store_true", help="print every op in MLIR's generic form")


def run(args: argparse.Namespace) -> int:
    from ..text.printer import print_module
    from .run import load_model, one_line_errors
    with one_line_errors():
        module = load_model(args.model)
    if args.elide < 0:
        text = print_module(module, generic=args.generic)
    else:
        text = print_module(module, large_elements="elide", threshold=args.elide, generic=args.generic)
    sys.stdout.write(text)
    return 0
