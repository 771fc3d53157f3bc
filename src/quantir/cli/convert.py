"""``quantir convert MODEL -o OUT``: re-express a model in another format (by extension).

An int8 ``.tflite`` (or an integer ``.mlir``) becomes an ONNX QDQ/QOperator model, IR text or
a ``.tflite`` again; a float model becomes float ONNX or IR text. An ONNX QDQ model (quantized
already: ``QuantizeLinear -> DequantizeLinear`` pairs, e.g. ONNX Runtime's ``quantize_static``)
becomes the integer model with its own parameters (``quantir.convert_qdq``), repairing what LiteRT's
int8 spec forbids unless ``--strict``; so does a QOperator model (``QLinearConv``, ``QGemm``, ...:
``quant_format=QuantFormat.QOperator``), rewritten to QDQ in memory first. The input file is only read.
"""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="model to read: .onnx, .mlir or int8 .tflite")
    p.add_argument("-o", "--output", required=True, help="output path: .onnx, .mlir or .tflite")
    p.add_argument("--format", choices=("qdq", "qoperator"), default="qdq", help="ONNX flavour of an integer model")
    p.add_argument("--io", choices=("float", "int8"), default="float", help=".tflite interface (see quantize)")
    p.add_argument("--activations", choices=("int8", "uint8"), default="int8", help="ONNX activation storage")
    p.add_argument("--strict", action="store_true",
                   help="QDQ/QOperator input: refuse parameters LiteRT's int8 spec forbids instead of repairing them")
    p.add_argument("--inputs", help="QDQ/QOperator input: .npz of samples to measure each repair's error on "
                                    "(default: random inputs over the input's quantized range)")


def _is_integer(module) -> bool:
    from ..ir.dialects import quant
    return any(op.opdef in (quant.QCAST, quant.DCAST) or op.name.startswith("qnn.") for op in module.main.ops)


def _is_qdq(module) -> bool:
    """A QDQ model has activation pairs: a DequantizeLinear reading a QuantizeLinear (a QOperator
    model's QuantizeLinear feeds QLinear ops instead)."""
    from ..ir.dialects import nn
    return any(op.opdef is nn.DEQUANTIZE_LINEAR and getattr(getattr(op.operands[0], "op", None), "opdef", None)
               is nn.QUANTIZE_LINEAR for op in module.main.ops)


def _is_qoperator(path) -> bool:
    """A QOperator model: ``QLinear*``/``QGemm`` nodes, or dynamic quantization's integer ops (which
    ``convert_qdq`` refuses, naming the node)."""
    from ..frontends.onnx.qoperator_to_qdq import is_qoperator_file
    return is_qoperator_file(path)


def _has_fake_quant(module) -> bool:
    """IR a QAT tool wrote: fake-quant ops, or ``quant.qcast -> quant.dcast`` pairs (convert_qdq)."""
    from ..ir.dialects import quant
    return any(op.opdef in (quant.CONST_FAKE_QUANT, quant.CONST_FAKE_QUANT_PER_AXIS) or op.opdef is quant.DCAST
               and getattr(getattr(op.operands[0], "op", None), "opdef", None) is quant.QCAST
               for op in module.main.ops)


def _convert_qdq(args: argparse.Namespace, out) -> int:
    from ..api import convert_qdq
    converted = convert_qdq(args.model, strict=args.strict, samples=args.inputs)
    print(converted.summary())
    if out.suffix == ".tflite":
        converted.save(out, io=args.io)
    else:
        converted.save(out)
    print(f"wrote {out}")
    return 0


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..errors import QuantirError
    from ..fileio import atomic_write, check_outputs
    from .run import load_model

    out = Path(args.output)
    if out.suffix not in (".mlir", ".onnx", ".tflite"):
        raise QuantirError(f"unknown output format '{out.suffix}' for {out}: use .onnx, .mlir or .tflite")
    check_outputs({"-o": out}, {"input model": args.model})
    onnx_input = str(args.model).endswith(".onnx")
    if onnx_input and _is_qoperator(args.model):   # before loading: the importer has no QLinear* ops
        return _convert_qdq(args, out)
    module = load_model(args.model)
    if onnx_input and _is_qdq(module) or str(args.model).endswith(".mlir") and _has_fake_quant(module):
        return _convert_qdq(args, out)
    if args.strict or args.inputs:
        raise QuantirError("--strict and --inputs apply to an ONNX QDQ model (or QOperator); this one has no "
                           "QuantizeLinear/DequantizeLinear and no QLinear ops")
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
