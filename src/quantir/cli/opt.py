"""``quantir opt``: parse, verify and print IR text, optionally canonicalized -- ``mlir-opt``'s
contract, so the same golden files run through both tools.

* ``FILE`` or ``-`` (stdin); the canonical form goes to stdout (or ``-o FILE``, written
  atomically), diagnostics to stderr as ``FILE:LINE:COL: error: MESSAGE``; exit 1 on error.
* ``--split-input-file``: chunks between ``// -----`` lines are processed independently, their
  outputs joined by ``// -----`` lines; line numbers count in the whole file.
* ``--verify-diagnostics``: the diagnostics must be exactly the ``// expected-error {{...}}``
  ones (see :mod:`quantir.text.diagnostics`); exit 0 iff they are.
* Passes, run in command-line order: ``--canonicalize``, and upstream's quant passes
  ``--normalize-quant-types``, ``--strip-func-quant-types``, ``--lower-quant-ops``
  (:mod:`quantir.passes.quant_lowering`), and ``--convert-fake-quant``
  (:mod:`quantir.passes.fake_quant`).

Imports of the compiler are deferred to :func:`run` so that ``quantir --help`` stays fast.
"""
from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", nargs="?", default="-", help="input file, '-' for stdin (default)")
    parser.add_argument("-o", dest="output", default="-", metavar="FILE", help="output file (default stdout)")
    parser.add_argument("--split-input-file", action="store_true",
                        help="process chunks separated by '// -----' independently")
    parser.add_argument("--verify-diagnostics", action="store_true",
                        help="check diagnostics against '// expected-error {{...}}' comments")
    parser.add_argument("--canonicalize", action=_PassFlag, nargs=0, help="run the canonicalize pass")
    parser.add_argument("--normalize-quant-types", action=_PassFlag, nargs=0,
                        help="sub-channel types with one scale, or scales along one axis, as per-tensor/per-axis")
    parser.add_argument("--strip-func-quant-types", action=_PassFlag, nargs=0,
                        help="function signatures in storage integers, with quant.scast at the boundaries")
    parser.add_argument("--lower-quant-ops", action=_PassFlag, nargs=0,
                        help="per-tensor quant.qcast/dcast into arith and tensor ops as upstream MLIR "
                             "(truncating fptosi; see --lower-quant-round)")
    parser.add_argument("--lower-quant-round", choices=("truncate", "nearest-even"), default="truncate",
                        help="quantir's option for --lower-quant-ops: 'nearest-even' rounds x / scale with "
                             "math.roundeven before the zero point is added, as ONNX QuantizeLinear "
                             "(default: truncate, as upstream)")
    parser.add_argument("--convert-fake-quant", action=_PassFlag, nargs=0,
                        help="quant.const_fake_quant(_per_axis) into a quant.qcast/dcast pair with the nudged "
                             "!quant.uniform type (the original design's conversion; quantir.passes.fake_quant)")
    parser.add_argument("--mlir-print-op-generic", action="store_true", help="print every op in generic form")
    parser.add_argument("--mlir-elide-elementsattrs-if-larger", type=int, metavar="N", default=None,
                        help="print elements attributes of more than N elements as dense_resource<__elided__>")
    parser.add_argument("--allow-unregistered-dialect", action="store_true",
                        help="accepted for mlir-opt compatibility; quantir always allows them")


class _PassFlag(argparse.Action):
    """A pass flag: sets its own attribute and appends its pass name to ``args.pipeline``, so
    passes run in command-line order as in mlir-opt."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)
        namespace.pipeline = [*(getattr(namespace, "pipeline", None) or []), self.dest.replace("_", "-")]


def _make_pass(name: str, args):
    from ..passes import quant_lowering as ql
    from ..passes.canonicalize import Canonicalize
    if name == "convert-fake-quant":
        from ..passes.fake_quant import ConvertFakeQuant
        return ConvertFakeQuant()
    if name == "lower-quant-ops":
        return ql.LowerQuantOps(ql.LowerQuantOptions(round=getattr(args, "lower_quant_round", "truncate")))
    return {"canonicalize": Canonicalize, "normalize-quant-types": ql.NormalizeQuantTypes,
            "strip-func-quant-types": ql.StripFuncQuantTypes}[name]()


def run(args: argparse.Namespace) -> int:
    from ..fileio import check_outputs
    check_outputs({"-o": args.output}, {"input": args.input})
    text = _read(args.input)
    filename = "<stdin>" if args.input == "-" else args.input
    out, err, ok = process(text, filename, args)
    if err:
        sys.stderr.write(err)
    if ok or args.output == "-":  # like mlir-opt, an output file is kept only on success
        _write(args.output, out)
    return 0 if ok else 1


def process(text: str, filename: str, args: argparse.Namespace) -> tuple[str, str, bool]:
    """Run the tool on ``text``: (stdout, stderr, success)."""
    from ..text.diagnostics import split_input
    from ..text.lexing import FastSource

    chunks = split_input(text) if args.split_input_file else [(0, len(text))]
    source, lines = FastSource(text, filename), text.split("\n")
    outputs, errors, ok = [], [], True
    for start, end in chunks:
        out, err, chunk_ok = _process_chunk(source, lines, start, end, args)
        outputs.append(out)
        errors.append(err)
        ok &= chunk_ok
    return "// -----\n".join(outputs), "".join(errors), ok


def _process_chunk(source, lines: list[str], start: int, end: int, args) -> tuple[str, str, bool]:
    from ..errors import QuantirError
    from ..text.diagnostics import ExpectedDiagnostics, diagnostics_of, render, render_error
    from ..text.parser import parse_source
    from ..text.printer import print_module

    expected = ExpectedDiagnostics.scan(source.text, start, end, source.filename) if args.verify_diagnostics else None
    module = None
    failures: list[QuantirError] = []
    try:
        module = parse_source(source, start=start, end=end, verify=False)
        from ..text.diagnostics import verify_module
        failures = verify_module(module)
    except QuantirError as e:
        failures = [e]
    if expected is not None:
        for failure in failures:
            for d in diagnostics_of(failure):
                expected.process(d)
        problems = expected.finish()
        err = "".join(render(d, lines) for d in problems)
        ok = not problems
    else:
        err = "".join(render_error(e, lines, module) for e in failures)
        ok = not failures
    if failures:
        return "", err, ok
    assert module is not None
    for name in _pipeline(args):
        try:
            _make_pass(name, args).run(module)
        except QuantirError as e:
            return "", render_error(e, lines, module), False
    elide = args.mlir_elide_elementsattrs_if_larger
    try:
        printed = print_module(module, large_elements="inline" if elide is None else "elide",
                               threshold=elide or 0, generic=args.mlir_print_op_generic)
    except QuantirError as e:   # an op the requested form cannot show (a region in generic form)
        return "", render_error(e, lines, module), False
    return printed + "\n", err, ok


def _pipeline(args) -> list[str]:
    """The passes to run; a Namespace built without the flags' actions may only say canonicalize."""
    pipeline = getattr(args, "pipeline", None)
    if pipeline is None:
        return ["canonicalize"] if getattr(args, "canonicalize", False) else []
    return pipeline


def _read(path: str) -> str:
    from ..text.files import read_ir_file
    return read_ir_file(path)


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from ..fileio import atomic_write
    atomic_write(path, text.encode("utf-8", "surrogateescape"))
