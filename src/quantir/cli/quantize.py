"""``quantir quantize MODEL --data CALIB.npz -o OUT.{onnx,mlir,tflite}``."""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path


def _at_least_one(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="float model (.onnx or .mlir)")
    p.add_argument("--data", nargs="+", metavar="NPZ",
                   help=".npz of calibration samples: keys are input names, axis 0 indexes samples; several "
                        "files for a model with dynamic dims, one sample size per file (required, except "
                        "with --weights-only and --dynamic)")
    p.add_argument("--dynamic", action="store_true",
                   help="dynamic quantization (no --data; .onnx or .mlir): MatMul/Gemm weights int8 per channel, "
                        "activations quantized at run time (DynamicQuantizeLinear + MatMulInteger); "
                        "--exclude NODE keeps MatMuls float. With -o OUT.tflite: LiteRT's dynamic-range model "
                        "(int8 weights on FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D, EMBEDDING_LOOKUP; weights "
                        "under --min-elements stay float)")
    p.add_argument("--dynamic-activations", choices=("auto", "per_row", "per_tensor"), default=None,
                   help="with --dynamic -o OUT.onnx: run-time activation scales per row where no normalization "
                        "bounds the rows (auto, the default), per row everywhere, or one per tensor")
    p.add_argument("--symmetric-inputs", action="store_true",
                   help="with --dynamic -o OUT.tflite: write asymmetric_quantize_inputs=false (one scale per input "
                        "row, no zero point); LiteRT's converter writes true, the default")
    w = p.add_argument_group("weight-only quantization (no --data needed; .onnx or .mlir)")
    w.add_argument("--weights-only", choices=("int8", "int4"), default=None,
                   help="quantize only the MatMul/Gemm/Conv weights and Gather tables; activations stay float. "
                        "With --data, the rounding search weights each weight's error by its inputs")
    w.add_argument("--block", type=int, default=None, metavar="N",
                   help="block-wise scales, N elements (32..256) along the reduction axis (default per channel)")
    w.add_argument("--asymmetric", action="store_true", help="a zero point per channel or block")
    w.add_argument("--min-elements", type=int, default=1024,
                   help="weights with fewer elements stay float (default 1024, LiteRT's rule)")
    w.add_argument("--matmul-nbits", action=argparse.BooleanOptionalAction, default=None,
                   help="int4 blocked MatMul weights and Gather tables as ONNX Runtime's MatMulNBits and "
                        "GatherBlockQuantized (the default: faster in ONNX Runtime); --no-matmul-nbits: standard "
                        "DequantizeLinear before each float op, for any ONNX runtime")
    p.add_argument("-o", "--output", default=None,
                   help="output path: .onnx, .mlir or .tflite (format by extension); required unless --emit-stats")
    p.add_argument("--emit-stats", default=None, metavar="OUT.mlir",
                   help="write the float module with a quant.stats op on every observed tensor (what calibration "
                        "saw); `quantir quantize OUT.mlir -o M.tflite` then quantizes from it with no --data")
    p.add_argument("--format", choices=("qdq", "qoperator"), default="qdq", help="ONNX flavour (default qdq)")
    p.add_argument("--activations", choices=("int8", "uint8", "int16"), default="int8",
                   help="int8 (default); uint8: the ONNX export's storage (same values, zero point + 128; ONNX "
                        "Runtime on x86 fuses it fully); int16: LiteRT's 16x8 mode, every activation int16")
    p.add_argument("--budget", default=None, metavar="FLOOR",
                   help="mixed precision: promote the fewest tensors to int16 until the outputs meet it on the "
                        "calibration samples, every output: its mean cosine (0.998; outputs that score classes, a "
                        "softmax or a linear head, also their top-1 agreement; a conv's channels moved last, "
                        "[N, positions, K<=64], each channel's correlation; 'cos:0.998' the cosine alone), its "
                        "SQNR ('30dB'), its top-1 agreement along the last axis ('top1:0.995'), or 'off' for "
                        "all-int8 (default 0.995)")
    p.add_argument("--int16", nargs="*", default=(), metavar="TENSOR",
                   help="tensors (ONNX value names) to store in int16, with their same-scale classes")
    p.add_argument("--bias-correction", choices=("off", "weights", "empirical"), default="weights",
                   help="fold each conv/FC's mean output error into its bias: from the weights' rounding "
                        "(default), measured on the integer graph (empirical, slower), or off")
    p.add_argument("--weight-rounding", choices=("auto", "nearest", "hessian"), default="auto",
                   help="int8 weights: nearest step, or hessian (GPTQ: rounded together so each conv/FC output "
                        "moves least on the calibration samples); auto (default): hessian when tensors are int16 "
                        "(promoted by the budget, or --activations int16) and it meets the budget, else nearest")
    p.add_argument("--io", choices=("float", "int8"), default="float",
                   help=".tflite interface: float32 through QUANTIZE/DEQUANTIZE (default) or int8 tensors")
    p.add_argument("--method", choices=("minmax", "percentile", "entropy", "mse"), default="entropy",
                   help="how activation ranges are chosen from the calibration data")
    p.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor instead of per channel")
    p.add_argument("--no-channel-split", action="store_true",
                   help="keep a conv -> activation -> depthwise conv whose channels differ in range by 16x or more "
                        "as it is (default: its small channels get a conv, activation and depthwise conv, so a "
                        "scale, of their own; exact in float)")
    p.add_argument("--exclude", nargs="*", default=(), metavar="NAME",
                   help="node names (or op kinds like nn.softmax) to keep in float")
    p.add_argument("--max-samples", type=int, default=None, help="use at most this many calibration samples")
    p.add_argument("--engine", choices=("ort", "interpreter"), default="ort", help="fp32 calibration executor")
    p.add_argument("--workers", type=_at_least_one, default=None, metavar="N",
                   help="calibration samples the mixed-precision search runs at once, on threads (default: every "
                        "CPU); only the speed changes")
    p.add_argument("--target", choices=("litert", "onnxruntime"), default=None,
                   help="the runtime the model is for, whose integer arithmetic the empirical bias correction, "
                        "the calibration callbacks and the summary's per-layer errors use (default: from the "
                        "output's extension: .onnx -> onnxruntime, .tflite/.mlir -> litert)")
    p.add_argument("--summary", metavar="JSON", help="also write the summary as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")


TARGET_BY_EXTENSION = {".onnx": "onnxruntime", ".tflite": "litert", ".mlir": "litert"}


def target_for(output: str, target: str | None) -> str:
    """``--target`` as given, else the runtime the output's format is deployed on."""
    return target if target is not None else TARGET_BY_EXTENSION[Path(output).suffix]


def run(args: argparse.Namespace) -> int:
    from ..api import quantize
    from ..errors import OutputError, QuantirError, QuantizationWarning
    from ..fileio import check_outputs

    if args.output is None and (args.emit_stats is None or args.dynamic or args.weights_only is not None):
        raise QuantirError("quantize needs an output: -o OUT.{onnx,mlir,tflite} (or --emit-stats OUT.mlir)")
    if args.dynamic:
        return run_dynamic(args)
    if args.symmetric_inputs:
        raise QuantirError("--symmetric-inputs applies to --dynamic -o OUT.tflite (LiteRT's dynamic-range ops)")
    if args.weights_only is not None:
        return run_weights_only(args)
    from ..errors import CalibrationError
    if args.block is not None or args.asymmetric or args.matmul_nbits is not None:
        raise QuantirError("--block, --asymmetric and --matmul-nbits apply to --weights-only int8|int4")
    if args.emit_stats is not None:
        return run_emit_stats(args)
    if not args.data and not _holds_stats(args.model):
        raise CalibrationError("quantize needs calibration data: --data CALIB.npz (or --weights-only int8|int4, "
                          "which needs none, or a .mlir written by --emit-stats)")

    # before any work: a refused or unwritable output must not cost a calibration run
    if Path(args.output).suffix not in (".onnx", ".mlir", ".tflite"):
        raise OutputError(f"unknown output format '{Path(args.output).suffix}' for {args.output}: "
                          f"use .onnx, .mlir or .tflite")
    if args.summary and Path(args.summary).suffix != ".json":
        raise OutputError(f"--summary {args.summary}: the summary is JSON; give a path ending in .json")
    check_outputs({"-o": args.output, "--summary": args.summary},
                  {"input model": args.model, **{"calibration data" + (f" #{i + 1}" if i else ""): path
                                                 for i, path in enumerate(args.data or ())}})
    config = _config(args)
    with warnings.catch_warnings(action="ignore", category=QuantizationWarning):   # printed below, one line each
        result = quantize(args.model, None if not args.data else args.data[0] if len(args.data) == 1 else args.data,
                          config)
    for w in result.warnings:   # even with -q: the model may be unusable
        print(f"quantir quantize: warning: {w}", file=sys.stderr)
    with warnings.catch_warnings(record=True) as saved:   # what the export could not express, one line each
        warnings.simplefilter("always", QuantizationWarning)
        result.save(args.output, format=args.format, io=args.io,
                    activations="uint8" if args.activations == "uint8" else "int8")
    for w in saved:
        if issubclass(w.category, QuantizationWarning):
            print(f"quantir quantize: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if args.summary:
        result.save(args.summary)
    if not args.quiet:
        if not args.data:
            print("quantized from the quant.stats ops of the model (no calibration data; no mixed-precision "
                  "budget search, no per-layer errors)")
        print(result.summary())
        print(f"wrote {args.output}")
    return 0


def _holds_stats(model: str) -> bool:
    if Path(model).suffix != ".mlir":
        return False
    from ..api import load
    from ..quantize.stats_ir import holds_stats
    return holds_stats(load(model))


def run_emit_stats(args: argparse.Namespace) -> int:
    """``--emit-stats OUT.mlir``: the calibration statistics as IR (``quantir.calibration_stats``)."""
    from ..api import calibration_stats
    from ..errors import CalibrationError, OutputError
    from ..fileio import atomic_write, check_outputs, prepare_output
    from ..text import print_module

    if Path(args.emit_stats).suffix != ".mlir":
        raise OutputError(f"--emit-stats {args.emit_stats}: statistics are MLIR text; give a path ending in .mlir")
    if args.output is not None or args.summary:
        raise OutputError("--emit-stats writes the statistics only; quantize from them in a second run: "
                          f"quantir quantize {args.emit_stats} -o OUT.tflite")
    if not args.data:
        raise CalibrationError("--emit-stats needs calibration data: --data CALIB.npz")
    check_outputs({"--emit-stats": args.emit_stats},
                  {"input model": args.model, **{"calibration data" + (f" #{i + 1}" if i else ""): path
                                                 for i, path in enumerate(args.data)}})
    module = calibration_stats(args.model, args.data[0] if len(args.data) == 1 else args.data,
                               _config(args, output=args.emit_stats))
    prepare_output(Path(args.emit_stats))
    atomic_write(Path(args.emit_stats), print_module(module).encode())
    if not args.quiet:
        n = sum(op.name == "quant.stats" for op in module.main.ops)
        print(f"wrote {args.emit_stats}: {n} quant.stats ops (method {args.method})")
    return 0


def _config(args: argparse.Namespace, output: str | None = None):
    from ..quantize.config import Config
    return Config(method=args.method, per_channel=not args.per_tensor, exclude=tuple(args.exclude),
                  engine=args.engine, max_samples=args.max_samples, progress=not args.quiet, workers=args.workers,
                  bias_correction=args.bias_correction, weight_rounding=args.weight_rounding,
                  target=target_for(output or args.output, args.target),
                  activations="int16" if args.activations == "int16" else "int8", int16=tuple(args.int16),
                  channel_split=not args.no_channel_split,
                  **({} if args.budget is None else {"budget": args.budget}))


def run_weights_only(args: argparse.Namespace) -> int:
    """``--weights-only``: quantize_weights, the summary with the files' sizes, the model written atomically."""
    import os

    from ..api import quantize_weights
    from ..errors import OutputError
    from ..fileio import check_outputs
    from ..quantize.weight_only import WeightOnlyConfig

    if Path(args.output).suffix not in (".onnx", ".mlir", ".tflite"):
        raise OutputError(f"unknown output format '{Path(args.output).suffix}' for {args.output}: a weight-only "
                          f"model is written as .onnx, .mlir or .tflite (per-channel weights only)")
    if args.summary and Path(args.summary).suffix != ".json":
        raise OutputError(f"--summary {args.summary}: the summary is JSON; give a path ending in .json")
    data = list(args.data or ())
    check_outputs({"-o": args.output, "--summary": args.summary},
                  {"input model": args.model, **{f"calibration data #{i + 1}": d for i, d in enumerate(data)}})
    config = WeightOnlyConfig(bits=int(args.weights_only[3:]), block_size=args.block, symmetric=not args.asymmetric,
                              min_elements=args.min_elements)
    calibration = None if not data else (data[0] if len(data) == 1 else data)
    result = quantize_weights(args.model, config, calibration)
    result.save(args.output, **({} if args.matmul_nbits is None else {"matmul_nbits": args.matmul_nbits}))
    if args.summary:
        import json

        from ..fileio import atomic_write
        atomic_write(Path(args.summary), json.dumps(result.summary_dict(), indent=2).encode())
    if not args.quiet:
        print(result.summary())
        before, after = os.path.getsize(args.model), os.path.getsize(args.output)
        print(f"file size: {before / 1e6:.2f} MB -> {after / 1e6:.2f} MB ({after / before:.3f}x)")
        print(f"wrote {args.output}")
    return 0


def run_dynamic(args: argparse.Namespace) -> int:
    """``--dynamic``: quantize_dynamic, its summary, the model written atomically; no calibration data."""
    from ..api import quantize_dynamic
    from ..errors import OutputError, QuantirError
    from ..fileio import check_outputs
    from ..quantize.dynamic import DynamicConfig

    if args.weights_only is not None or args.data:
        raise QuantirError("--dynamic needs no calibration data and cannot be combined with --weights-only or "
                           "--data: drop one")
    if args.dynamic_activations and Path(args.output).suffix == ".tflite":
        raise QuantirError("--dynamic-activations applies to the ONNX dynamic model: LiteRT's dynamic-range ops "
                           "scale their inputs per row (see --symmetric-inputs)")
    if args.symmetric_inputs and Path(args.output).suffix != ".tflite":
        raise QuantirError("--symmetric-inputs is an option of LiteRT's dynamic-range ops: write -o OUT.tflite")
    if Path(args.output).suffix not in (".onnx", ".mlir", ".tflite"):
        raise OutputError(f"unknown output format '{Path(args.output).suffix}' for {args.output}: a dynamic "
                          f"model is written as .onnx, .mlir or .tflite (LiteRT's dynamic-range ops)")
    if args.summary and Path(args.summary).suffix != ".json":
        raise OutputError(f"--summary {args.summary}: the summary is JSON; give a path ending in .json")
    check_outputs({"-o": args.output, "--summary": args.summary}, {"input model": args.model})
    if Path(args.output).suffix == ".tflite":
        from ..api import quantize_hybrid
        from ..quantize.hybrid import HybridConfig
        result = quantize_hybrid(args.model, HybridConfig(min_elements=args.min_elements, exclude=tuple(args.exclude),
                                                          asymmetric_quantize_inputs=not args.symmetric_inputs))
    else:
        result = quantize_dynamic(args.model, DynamicConfig(exclude=tuple(args.exclude),
                                                            activations=args.dynamic_activations or "auto"))
    result.save(args.output)
    if args.summary:
        import json

        from ..fileio import atomic_write
        atomic_write(Path(args.summary), json.dumps(result.summary_dict(), indent=2).encode())
    if not args.quiet:
        print(result.summary())
        print(f"wrote {args.output}")
    return 0
