"""``quantir`` — one entry point, one module per subcommand.

Each subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int`` and is
imported only when used, so ``quantir opt`` never imports ONNX Runtime.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
import threading
from collections.abc import Iterator

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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that ``finally`` blocks run (the
    temporary file of an output being written is removed, see ``fileio``)."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (once; a second one is ignored,
    so that the cleanup it started finishes). Only the main thread can set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with sigterm_raises():
            return int(importlib.import_module(args._module).run(args) or 0)
    except QuantirError as e:
        print(f"quantir {args.command}: {e}", file=sys.stderr)
        return 1
    except Terminated:
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
