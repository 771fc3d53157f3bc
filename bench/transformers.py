"""all-MiniLM-L6-v2 quantized by the peers (and quantir), in ONNX Runtime: sentence-embedding cosine vs fp32.

Data: the evaluation sentences of Python's help texts (``quantir.datasets.sentences``), every one
of them, tokenized by ``quantir.datasets.wordpiece`` and run in batches of one token length (no
padding); calibration on the disjoint calibration sentences. The model: ``make models``
(.cache/models/minilm_l6.onnx). For each quantized model:

* cosine between its sentence embedding and fp32's, mean and minimum over the sentences;
* float ops: ONNX nodes that still compute in float. Q/DQ nodes and the ops that only move,
  reshape, gather or cast data (``DATA_OPS``) are not counted; any other node counts unless all
  its float inputs come from DequantizeLinear (its arithmetic then runs on integers: ONNX Runtime
  fuses DQ -> MatMul into an integer MatMul even where the output stays float, as
  MatMulIntegerToFloat). A node without float inputs (MatMulInteger, QLinearMatMul, ...) is
  integer, and so is the Add of an int32 bias (DequantizeLinear of an int32 constant) to such an
  integer MatMul: the bias of an integer FULLY_CONNECTED. Listed by op type;
* file size, and latency: 1 thread, batch 1, sequences of 32 and 128 tokens of real text,
  median of ``--rounds`` runs taken round-robin with fp32 so that load falls on all alike.

Peers: ONNX Runtime ``quantize_static`` (QDQ, QInt8 activations and weights, per-channel weights;
MinMax, Percentile, Entropy; a ``CalibrationDataReader`` over the calibration sentences),
ONNX Runtime ``quantize_dynamic`` (QInt8 weights) and NNCF 3.4 ``nncf.quantize`` (ONNX backend),
default and ``model_type=nncf.ModelType.TRANSFORMER`` (``make`` target $(BSTAMP) installs NNCF).
quantir's rows come from ``quantir_rows``: ``quantir.quantize`` with the default Config, a budget of
0.998, all-int8 (``budget=None``) and all-int16 (``activations="int16"``); the QDQ exports run in
ONNX Runtime, and the same integer models as .tflite in LiteRT's reference kernels (``litert_row``:
cosine on every evaluation sentence, and every tensor compared with quantir's interpreter on the
first 64 held-out sentences in one padded batch); an exception is recorded as its text.

ONNX Runtime's histogram calibrators (Percentile, Entropy) stack every intermediate tensor of
every calibration batch into one array, so their samples must all have one shape, and they hold
them all in memory: they calibrate on the first ``--histogram-sentences`` calibration sentences
(default 128), each padded (or cut) to ``--histogram-length`` tokens (default 64), as a user
padding to a fixed length would. ``ort_static_minmax_padded`` is MinMax on those same padded
samples: padding puts HF's -3.4e38 mask bias into the attention scores' range. (Entropy fails on
it: its symmetric histogram range of +-3.4e38 overflows float32, numpy's "Too many bins".) MinMax
and NNCF otherwise calibrate on every calibration sentence at its own length (nothing padded).

Dynamic rows (no calibration): ONNX Runtime's ``quantize_dynamic`` beside ``quantir.quantize_dynamic``
with each ``DynamicConfig.activations`` (auto, per_row, per_tensor): cosine as above, and latency at
batch x tokens 1x64, 1x128, 32x64 and 32x128 with fp32 beside (``dynamic_latencies``); and LiteRT's
dynamic-range .tflite (``quantir quantize --dynamic -o m.tflite``): cosine in BUILTIN_REF, every hybrid op
checked bit-exact on LiteRT's own inputs (``verify --isolated``), and LiteRT latency beside the float
.tflite of the same graph. ``--dynamic-only`` runs just these.

    .venv/bin/python bench/transformers.py            # ~15 min on 2 shared cores
    .venv/bin/python bench/transformers.py --dynamic-only   # the dynamic rows, a few minutes
    .venv/bin/python bench/transformers.py --quick    # fewer sentences and rounds, a smoke run
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import machine, round_robin, write_json, session  # noqa: E402

from quantir.datasets import sentences as S  # noqa: E402
from quantir.datasets.wordpiece import WordPiece, batches_by_length  # noqa: E402

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
QDQ_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
# ops that move, reshape, select or convert data without arithmetic on it
DATA_OPS = {"Shape", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Gather", "Slice", "Expand",
            "Flatten", "Identity", "Split", "Range", "Constant", "ConstantOfShape", "Cast"}
FLOAT_TYPES = {1, 10, 11, 16}   # TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16
ORT_METHODS = ("MinMax", "Percentile", "Entropy")
LATENCY_LENGTHS = (32, 128)
DYNAMIC_SHAPES = ((1, 64), (1, 128), (32, 64), (32, 128))   # batch x tokens, for the dynamic rows
DYNAMIC_ROWS = {"quantir_dynamic": "auto", "quantir_dynamic_per_row": "per_row",
                "quantir_dynamic_per_tensor": "per_tensor"}
VERIFY_SENTENCES = 64   # held-out sentences whose every tensor is compared, LiteRT against quantir


# -- data --------------------------------------------------------------------------------------------

def feeds_of(tokenizer: WordPiece, texts, batch_size: int) -> list[tuple[list[int], dict[str, np.ndarray]]]:
    return batches_by_length(tokenizer, list(texts), max_length=128, batch_size=batch_size)


def latency_feed(tokenizer: WordPiece, length: int) -> dict[str, np.ndarray]:
    """One row of exactly ``length`` tokens of real text: evaluation sentences run together, cut."""
    text = " ".join(S.evaluation_sentences()[:40])
    return tokenizer([text], max_length=length, pad_to=length)


# -- measuring one model -----------------------------------------------------------------------------

def embed(path: Path, batches, n: int, threads: int) -> np.ndarray:
    sess = session(path, threads)
    out = np.zeros((n, 384), np.float32)
    for idx, feeds in batches:
        out[idx] = sess.run(None, feeds)[0]
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.sum(a * b, axis=1) / np.maximum(den, 1e-12)


def float_ops(path: Path) -> dict[str, int]:
    """Nodes that compute in float, by op type (see the module docstring for the rule)."""
    import onnx
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    g = model.graph
    elem = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]}
    elem.update({t.name: t.data_type for t in g.initializer})
    producer = {o: n for n in g.node for o in n.output}
    int32_constants = {t.name for t in g.initializer if t.data_type == onnx.TensorProto.INT32}

    def from_dq(name: str) -> bool:
        return name in producer and producer[name].op_type == "DequantizeLinear"

    def integer(n) -> bool:
        fin = [i for i in n.input if i and elem.get(i, 1) in FLOAT_TYPES]   # untyped: assume float
        if all(from_dq(i) for i in fin):
            return True
        if n.op_type == "Add" and len(fin) == 2:   # integer MatMul + DQ(int32 bias)
            bias = [i for i in fin if from_dq(i) and producer[i].input[0] in int32_constants]
            acc = [producer.get(i) for i in fin if i not in bias]
            return len(bias) == 1 and acc[0] is not None and acc[0].op_type in ("MatMul", "Gemm") and integer(acc[0])
        return False

    counts: collections.Counter = collections.Counter()
    for n in g.node:
        if n.op_type not in QDQ_OPS and n.op_type not in DATA_OPS and not integer(n):
            counts[n.op_type] += 1
    return dict(sorted(counts.items()))


def measure(name: str, path: Path, ctx: dict, seconds: float, notes: list[str] | None = None) -> dict:
    emb = embed(path, ctx["eval"], ctx["n_eval"], ctx["threads"])
    cos = cosines(ctx["fp32"], emb)
    ops = float_ops(path)
    row = {"cosine_mean": float(cos.mean()), "cosine_min": float(cos.min()),
           "float_ops": int(sum(ops.values())), "float_op_types": ops,
           "size_bytes": path.stat().st_size, "quantize_seconds": round(seconds, 1)}
    if notes:
        row["notes"] = notes[:10]
    ctx["paths"][name] = path
    print(f"  {name}: cosine mean {row['cosine_mean']:.4f} min {row['cosine_min']:.4f}, "
          f"{row['float_ops']} float ops, {row['size_bytes'] / 1e6:.1f} MB, quantized in {seconds:.0f} s", flush=True)
    return row


# -- the peers ---------------------------------------------------------------------------------------

class Reader:
    """An ONNX Runtime CalibrationDataReader over a list of feed dicts."""

    def __init__(self, feeds: list[dict]):
        self.feeds = feeds
        self.it = iter(feeds)

    def get_next(self):
        return next(self.it, None)

    def rewind(self):
        self.it = iter(self.feeds)


def ort_static(model: Path, out: Path, calib: list[dict], method: str) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    # Not CalibMaxIntermediateOutputs: in ORT 1.32 MinMax drops the batches it folds (it clears
    # them without merging their ranges), so only the last few samples would count. MinMax keeps
    # just a ReduceMin/ReduceMax pair per tensor and batch anyway: its memory stays small.
    extra: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):   # its histogram chatter
        quantize_static(str(model), str(out), Reader(calib), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=getattr(CalibrationMethod, method), extra_options=extra)


def ort_dynamic(model: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(model), str(out), weight_type=QuantType.QInt8)


def nncf_quantize(model: Path, out: Path, calib: list[dict], transformer: bool) -> list[str]:
    os.environ.setdefault("NNCF_TELEMETRY_ENABLED", "0")
    import nncf
    import onnx
    notes: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING and record.getMessage() not in notes:
                notes.append(record.getMessage())

    logger = logging.getLogger("nncf")
    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [Collect()], False
    try:
        kwargs = {"model_type": nncf.ModelType.TRANSFORMER} if transformer else {}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            q = nncf.quantize(onnx.load(str(model)), nncf.Dataset(calib), subset_size=len(calib), **kwargs)
    finally:
        logger.handlers, logger.propagate = handlers, propagate
    onnx.save_model(q, str(out))
    return notes


def peer_rows(args, ctx: dict, work: Path) -> dict:
    rows: dict = {}
    calib, padded = ctx["calib"], ctx["calib_padded"]
    jobs = [(f"ort_static_{m.lower()}",
             lambda out, m=m: ort_static(args.model, out, calib if m == "MinMax" else padded, m)) for m in ORT_METHODS]
    jobs.append(("ort_static_minmax_padded", lambda out: ort_static(args.model, out, padded, "MinMax")))
    jobs.append(("ort_dynamic", lambda out: ort_dynamic(args.model, out)))
    jobs += [("nncf_default", lambda out: nncf_quantize(args.model, out, calib, False)),
             ("nncf_transformer", lambda out: nncf_quantize(args.model, out, calib, True))]
    for name, job in jobs:
        if args.only and name not in args.only:
            continue
        out = work / f"{name}.onnx"
        t = time.perf_counter()
        try:
            notes = job(out)
            rows[name] = measure(name, out, ctx, time.perf_counter() - t, notes)
        except Exception as e:   # a peer that fails is a result too
            rows[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
            print(f"  {name}: failed: {rows[name]['error'][:300]}", flush=True)
    return rows


# -- quantir -----------------------------------------------------------------------------------------

def quantir_rows(args, ctx: dict, work: Path) -> dict:
    """QUANTIR'S ROWS GO HERE. ``quantir.quantize`` on every calibration sentence (batches of one
    length, unpadded), saved as QDQ and run in ONNX Runtime like the peers: the default Config
    (what `quantir quantize MODEL --data CALIB -o OUT` does), a tighter budget, all-int8 and all-int16;
    an exception is kept as text."""
    import quantir
    from quantir.quantize.config import Config

    # the default (mixed precision to an output cosine of 0.995 on the kept calibration
    # sentences), a tighter budget, int8 only (budget=None) and every activation int16
    configs = {"quantir_default": None, "quantir_budget_0.998": {"budget": 0.998},
               "quantir_int8_only": {"budget": None}, "quantir_int16": {"activations": "int16"}}
    rows: dict = {}
    for name, options in configs.items():
        out = work / f"{name}.onnx"
        t = time.perf_counter()
        try:
            config = Config(progress=False, **options) if options else None
            result = quantir.quantize(str(args.model), calibration=[f for _, f in ctx["calib_batches"]],
                                      config=config)
            result.save(out)
            rows[name] = measure(name, out, ctx, time.perf_counter() - t)
            if options:
                rows[name]["config"] = {k: v for k, v in options.items()}
            mixed = result.summary_dict().get("mixed_precision")
            if mixed is not None:
                rows[name]["mixed_precision"] = {k: v for k, v in mixed.items() if k != "promoted"} | {
                    "promoted_classes": len(mixed["promoted"]),
                    "promoted_tensors": sum(len(c["tensors"]) for c in mixed["promoted"])}
            rows[name]["litert"] = litert_row(result, work / f"{name}.tflite", ctx)
            int16 = sum(1 for p in result.params.values() if getattr(p, "bits", 8) == 16)
            rows[name]["int16_tensors"] = int16
            print(f"    int16 tensors {int16}" + (f"; mixed precision: {rows[name]['mixed_precision']}"
                                                 if mixed is not None else ""), flush=True)
        except Exception as e:
            frames = traceback.extract_tb(e.__traceback__)
            ours = [f for f in frames if "/quantir/" in f.filename]   # the last quantir frame, not ORT's
            where = (ours or frames)[-1]
            rows[name] = {"error": f"{type(e).__name__}: {e}"[:2000],
                          "raised_at": f"{Path(where.filename).name}:{where.lineno} ({where.name})"}
            print(f"  {name}: failed: {rows[name]['error'][:300]} at {rows[name]['raised_at']}", flush=True)
    return rows


def dynamic_rows(args, ctx: dict, work: Path) -> dict:
    """``quantir.quantize_dynamic`` (no calibration data) with each activation scheme of
    ``DynamicConfig.activations``, run in ONNX Runtime like the peers' ``ort_dynamic``."""
    import quantir
    from quantir.quantize.dynamic import DynamicConfig
    rows: dict = {}
    for name, activations in DYNAMIC_ROWS.items():
        out = work / f"{name}.onnx"
        t = time.perf_counter()
        try:
            result = quantir.quantize_dynamic(str(args.model), DynamicConfig(activations=activations))
            result.save(out)
            rows[name] = measure(name, out, ctx, time.perf_counter() - t)
            rows[name]["config"] = {"activations": activations}
            rows[name]["per_row_inputs"] = list(result.per_row)
        except Exception as e:
            rows[name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
            print(f"  {name}: failed: {rows[name]['error'][:300]}", flush=True)
    return rows


def litert_dynamic_row(args, ctx: dict, work: Path, tokenizer: WordPiece, rounds: int) -> dict:
    """LiteRT's dynamic-range model (``quantir quantize --dynamic -o m.tflite``: hybrid FULLY_CONNECTED /
    EMBEDDING_LOOKUP, the rest float32): cosine in BUILTIN_REF on every evaluation sentence; `verify
    --isolated` on the first 32 (every hybrid op on LiteRT's own inputs); latency (1 thread, LiteRT's
    optimized kernels, 1x64 and 1x128) beside the float .tflite of the same graph."""
    import quantir
    from quantir.backends.tflite.export import export_tflite
    from quantir.backends.tflite.litert import run_model
    from quantir.quantize.calibrate import ensure_names
    from quantir.quantize.config import Config
    from quantir.quantize.expand import expand
    from quantir.verify import verify_tflite
    path, fpath = work / "quantir_dynamic.tflite", work / "fp32.tflite"
    try:
        t = time.perf_counter()
        result = quantir.quantize_hybrid(str(args.model))
        result.save(path)
        seconds = time.perf_counter() - t
        m = quantir.load(str(args.model))
        ensure_names(m.main)
        expand(m.main, Config())
        fpath.write_bytes(export_tflite(m).to_bytes())
        data = path.read_bytes()
        emb = np.zeros((ctx["n_eval"], 384), np.float32)
        for idx, feeds in ctx["eval"]:
            emb[idx] = run_model(data, [feeds[k] for k in INPUTS])[0]
        cos = cosines(ctx["fp32"], emb)
        feeds32 = {k: v[:32] for k, v in ctx["verify_feeds"].items()}
        report = verify_tflite(path, feeds32, batch=32, isolated=True)
        hybrid = [d for d in report.ops if d.op.startswith("hybrid.")]
        lat = {f"1x{n}": litert_latency({"fp32_tflite": fpath, "quantir_dynamic_tflite": path},
                                        dynamic_feed(tokenizer, 1, n), max(5, rounds // 5)) for n in (64, 128)}
        row = {"cosine_mean": float(cos.mean()), "cosine_min": float(cos.min()), "size_bytes": path.stat().st_size,
               "fp32_tflite_bytes": fpath.stat().st_size, "quantize_s": round(seconds, 2),
               "hybrid_ops": len(hybrid), "hybrid_ops_bit_exact": sum(d.output.equal for d in hybrid),
               "float_ops_max_relative": max((d.relative for d in report.ops if d.in_float), default=0.0),
               "verified_sentences": report.samples, "litert_latency_ms": lat,
               "summary": result.summary_dict() if hasattr(result, "summary_dict") else None}
    except Exception as e:
        row = {"error": f"{type(e).__name__}: {e}"[:1000]}
    shown = {k: v for k, v in row.items() if k != "summary"}
    print(f"  quantir_dynamic_tflite (LiteRT BUILTIN_REF): {shown}", flush=True)
    return row


def litert_latency(paths: dict[str, Path], feed: dict[str, np.ndarray], rounds: int) -> dict[str, float]:
    """Median ms of ``invoke`` (1 thread, LiteRT's optimized kernels without XNNPACK), the models taken
    round-robin, each interpreter built and warmed up once."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    its = {}
    for name, p in paths.items():
        it = Interpreter(model_path=str(p), num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        for d in it.get_input_details():
            it.resize_tensor_input(d["index"], feed[d["name"]].shape)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], feed[d["name"]].astype(d["dtype"]))
        it.invoke()
        its[name] = it
    times: dict[str, list[float]] = {k: [] for k in its}
    for _ in range(rounds):
        for name, it in its.items():
            t0 = time.perf_counter()
            it.invoke()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {k: round(float(np.median(v)), 2) for k, v in times.items()}


def dynamic_feed(tokenizer: WordPiece, batch: int, length: int) -> dict[str, np.ndarray]:
    """``batch`` rows of exactly ``length`` tokens of real text, each another stretch of the evaluation sentences."""
    words = " ".join(S.evaluation_sentences()).split()
    return tokenizer([" ".join(words[i * 150:(i + 1) * 150]) for i in range(batch)], max_length=length, pad_to=length)


def dynamic_latencies(paths: dict[str, Path], tokenizer: WordPiece, rounds: int, budget_s: float) -> dict:
    """Median ms (1 thread) of fp32, ONNX Runtime's quantize_dynamic and quantir's dynamic models at each of
    ``DYNAMIC_SHAPES``, taken round-robin in one process; batch 32 runs a fifth of ``rounds`` (at least 5)."""
    out: dict = {}
    for batch, length in DYNAMIC_SHAPES:
        n = rounds if batch == 1 else max(5, rounds // 5)
        times = round_robin({k: session(p) for k, p in paths.items()}, dynamic_feed(tokenizer, batch, length), n,
                            budget_s)
        out[f"{batch}x{length}"] = {k: round(float(np.median(v)), 3) for k, v in times.items()}
        print(f"    {batch}x{length}: " + ", ".join(f"{k} {v:.1f}" for k, v in out[f"{batch}x{length}"].items()),
              flush=True)
    return out


def dynamic_table(rows: dict, lat: dict) -> str:
    names = [k for k in ("fp32", "ort_dynamic", *DYNAMIC_ROWS) if k in rows]
    head = f"{'dynamic':<28}{'cos mean':>9}{'cos min':>9}{'MB':>7}" + "".join(f"{'ms@' + k:>11}" for k in lat)
    lines = [head, "-" * len(head)]
    for name in names:
        r = rows[name]
        if "error" in r:
            lines.append(f"{name:<28}  error: {r['error'][:150]}")
            continue
        cos = (1.0, 1.0) if name == "fp32" else (r["cosine_mean"], r["cosine_min"])
        lines.append(f"{name:<28}{cos[0]:>9.4f}{cos[1]:>9.4f}{r['size_bytes'] / 1e6:>7.1f}"
                     + "".join(f"{lat[k].get(name, float('nan')):>11.1f}" for k in lat))
    return "\n".join(lines)


def litert_row(result, path: Path, ctx: dict) -> dict:
    """The same integer model as a .tflite in LiteRT's reference kernels (BUILTIN_REF): its cosine on
    every evaluation sentence (the batches of one length), and `quantir verify` on the first
    ``VERIFY_SENTENCES`` of them padded into one batch (every tensor, LiteRT against quantir)."""
    from quantir.backends.tflite.litert import run_model
    from quantir.verify import verify_tflite
    try:
        result.save(path)
        data = path.read_bytes()
        emb = np.zeros((ctx["n_eval"], 384), np.float32)
        for idx, feeds in ctx["eval"]:
            emb[idx] = run_model(data, [feeds[k] for k in INPUTS])[0]
        cos = cosines(ctx["fp32"], emb)
        report = verify_tflite(path, ctx["verify_feeds"], batch=VERIFY_SENTENCES)
        tensors = report.outputs + report.intermediates
        row = {"cosine_mean": float(cos.mean()), "cosine_min": float(cos.min()), "verified_sentences": report.samples,
               "tensors_compared": len(tensors), "tensors_differing": sum(1 for t in tensors if t.differing),
               "size_bytes": path.stat().st_size}
    except Exception as e:
        row = {"error": f"{type(e).__name__}: {e}"[:1000]}
    print(f"    LiteRT (BUILTIN_REF): {row}", flush=True)
    return row


# -- latency, table, main ----------------------------------------------------------------------------

def latencies(paths: dict[str, Path], tokenizer: WordPiece, rounds: int, budget_s: float) -> dict:
    out: dict = {}
    for length in LATENCY_LENGTHS:
        feed = latency_feed(tokenizer, length)
        times = round_robin({k: session(p) for k, p in paths.items()}, feed, rounds, budget_s)
        out[str(length)] = {k: round(float(np.median(v)), 3) for k, v in times.items()}
    return out


def table(rows: dict, lat: dict) -> str:
    head = f"{'model':<22}{'cos mean':>9}{'cos min':>9}{'float ops':>10}{'MB':>7}" + \
        "".join(f"{'ms@' + k:>9}" for k in lat) + "  float op types"
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        ms = "".join(f"{lat[k].get(name, float('nan')):>9.2f}" for k in lat)
        if "error" in r:
            lines.append(f"{name:<22}  error: {r['error'][:150]}")
        elif name == "fp32":
            lines.append(f"{name:<22}{1:>9.4f}{1:>9.4f}{r['float_ops']:>10}{r['size_bytes'] / 1e6:>7.1f}{ms}")
        else:
            types = ", ".join(f"{k} {v}" for k, v in r["float_op_types"].items())
            lines.append(f"{name:<22}{r['cosine_mean']:>9.4f}{r['cosine_min']:>9.4f}{r['float_ops']:>10}"
                         f"{r['size_bytes'] / 1e6:>7.1f}{ms}  {types}")
            lite = r.get("litert")
            if lite and "error" not in lite:
                lines.append(f"{'  .tflite in LiteRT':<22}{lite['cosine_mean']:>9.4f}{lite['cosine_min']:>9.4f}"
                             f"{0:>10}{lite['size_bytes'] / 1e6:>7.1f}  every tensor of "
                             f"{lite['verified_sentences']} sentences: {lite['tensors_differing']} of "
                             f"{lite['tensors_compared']} differ from quantir")
            elif lite:
                lines.append(f"{'  .tflite in LiteRT':<22}  error: {lite['error'][:150]}")
    return "\n".join(lines)


def provenance() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for pkg in ("numpy", "onnx", "onnxruntime", "nncf"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / ".cache/models/minilm_l6.onnx")
    ap.add_argument("--vocab", type=Path, default=ROOT / ".cache/models/minilm_l6.vocab.txt")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON results (default bench/results/transformers.json, with --dynamic-only "
                         "transformers_dynamic.json)")
    ap.add_argument("--quick", action="store_true", help="64 calibration / 128 evaluation sentences, 10 rounds")
    ap.add_argument("--rounds", type=int, default=50, help="latency runs per model and length (median)")
    ap.add_argument("--histogram-sentences", type=int, default=128,
                    help="calibration sentences for ORT's Percentile and Entropy (memory-bound)")
    ap.add_argument("--histogram-length", type=int, default=64,
                    help="tokens each of those is padded or cut to (ORT's histograms need one shape)")
    ap.add_argument("--threads", type=int, default=2, help="ORT threads for the accuracy runs (latency: 1)")
    ap.add_argument("--only", nargs="*", help="peer rows to run (default all), e.g. ort_dynamic nncf_transformer")
    ap.add_argument("--no-quantir", action="store_true")
    ap.add_argument("--dynamic-only", action="store_true",
                    help="only the dynamic rows: ONNX Runtime's quantize_dynamic and quantir's, cosine and latency "
                         "at batch x tokens 1x64, 1x128, 32x64, 32x128 beside fp32 (a few minutes)")
    args = ap.parse_args()
    args.out = args.out or ROOT / f"bench/results/transformers{'_dynamic' if args.dynamic_only else ''}.json"
    if not args.model.is_file() or not args.vocab.is_file():
        print(f"skip: {args.model} or {args.vocab} missing (`make models`)")
        return 0
    logging.getLogger().setLevel(logging.ERROR)
    tokenizer = WordPiece.from_file(args.vocab)
    cal_texts, ev_texts = S.calibration_sentences(), S.evaluation_sentences()
    if args.quick:
        cal_texts, ev_texts, args.rounds = cal_texts[:64], ev_texts[:128], 10
        args.histogram_sentences = min(args.histogram_sentences, 64)
    ctx: dict = {"threads": args.threads, "paths": {"fp32": args.model}, "n_eval": len(ev_texts),
                 "eval": feeds_of(tokenizer, ev_texts, 32),
                 "calib_batches": feeds_of(tokenizer, cal_texts, 16)}
    # peers calibrate one sentence per item: ORT's readers and NNCF's Dataset see each at its length
    ctx["calib"] = [{k: v[j:j + 1] for k, v in f.items()} for _, f in ctx["calib_batches"]
                    for j in range(f["input_ids"].shape[0])]
    n_hist = min(args.histogram_sentences, len(cal_texts))
    padded = tokenizer(list(cal_texts[:n_hist]), max_length=args.histogram_length, pad_to=args.histogram_length)
    ctx["calib_padded"] = [{k: v[j:j + 1] for k, v in padded.items()} for j in range(n_hist)]
    print(f"MiniLM: {len(cal_texts)} calibration / {len(ev_texts)} evaluation sentences", flush=True)
    ctx["fp32"] = embed(args.model, ctx["eval"], len(ev_texts), args.threads)
    ctx["verify_feeds"] = tokenizer(list(ev_texts[:VERIFY_SENTENCES]), max_length=128)   # padded: masks matter
    fp32_ops = float_ops(args.model)
    rows: dict = {"fp32": {"float_ops": int(sum(fp32_ops.values())), "float_op_types": fp32_ops,
                           "size_bytes": args.model.stat().st_size}}
    with tempfile.TemporaryDirectory(prefix="bench_transformers_") as d:
        work = Path(d)
        if args.dynamic_only:
            args.only = ["ort_dynamic"]
        rows.update(peer_rows(args, ctx, work))
        if not args.no_quantir and not args.dynamic_only:
            rows.update(quantir_rows(args, ctx, work))
        if not args.no_quantir:
            rows.update(dynamic_rows(args, ctx, work))
            rows["quantir_dynamic_tflite"] = litert_dynamic_row(args, ctx, work, tokenizer, args.rounds)
        lat = {}
        if not args.dynamic_only:
            print("latency (1 thread, batch 1) ...", flush=True)
            lat = latencies(ctx["paths"], tokenizer, args.rounds, budget_s=120)
        print("dynamic models' latency (1 thread) ...", flush=True)
        dyn = {k: ctx["paths"][k] for k in ("fp32", "ort_dynamic", *DYNAMIC_ROWS) if k in ctx["paths"]}
        dyn_lat = dynamic_latencies(dyn, tokenizer, args.rounds, budget_s=240)
    if not args.dynamic_only:
        print(table(rows, lat))
    print(dynamic_table(rows, dyn_lat))
    t = rows.get("quantir_dynamic_tflite", {})
    if "error" not in t and t:
        print(f"{'quantir_dynamic_tflite':<28}{t['cosine_mean']:>9.4f}{t['cosine_min']:>9.4f}"
              f"{t['size_bytes'] / 1e6:>7.1f}  LiteRT BUILTIN_REF; {t['hybrid_ops_bit_exact']}/{t['hybrid_ops']} "
              f"hybrid ops bit-exact on LiteRT's inputs; LiteRT ms (optimized kernels, 1 thread) "
              + ", ".join(f"{k}: {v}" for k, v in t["litert_latency_ms"].items()))
    result = {
        "what": "all-MiniLM-L6-v2: mean/min cosine of sentence embeddings vs fp32 on held-out sentences, in "
                "ONNX Runtime; float ops = nodes computing in float (not Q/DQ, not data movement); latency ms, "
                "1 thread, batch 1, median",
        "sentences": {"calibration": len(cal_texts), "evaluation": len(ev_texts),
                      "histogram_calibration": f"first {n_hist} calibration sentences, padded or cut to "
                                               f"{args.histogram_length} tokens"},
        "settings": {"ort_static": "QDQ, QInt8 activations and weights, per_channel=True, no pre-processing",
                     "ort_dynamic": "QInt8 weights, defaults",
                     "nncf": "nncf.quantize ONNX backend, subset_size = all calibration sentences"},
        "rows": rows, "latency_ms": lat, "rounds": args.rounds, "versions": provenance(), "machine": machine(),
        "dynamic_latency_ms": dyn_lat,
        "dynamic_latency": "median ms, 1 thread, batch x tokens of real text, fp32 / ONNX Runtime quantize_dynamic / "
                           "quantir quantize_dynamic taken round-robin in one process",
    }
    out = args.out.resolve()
    write_json(result, out, ROOT if out.is_relative_to(ROOT) else out.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
