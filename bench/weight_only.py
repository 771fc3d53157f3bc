"""Weight-only quantization of all-MiniLM-L6-v2 in ONNX Runtime: quantir beside ONNX Runtime's own tools.

Rows: quantir int4 block 32 (round-to-nearest, MSE search, GPTQ on 256 calibration sentences;
symmetric and asymmetric; the default export with ONNX Runtime's MatMulNBits/GatherBlockQuantized
and the standard DequantizeLinear one), int8 per channel, and ONNX Runtime's
``MatMulNBitsQuantizer`` (int4 block 32, symmetric; its MatMul weights only) when installed, all
measured in this run: mean/min sentence-embedding cosine vs fp32 on the evaluation sentences, file
size, latency (1 thread, batch 1 and 32, sequence 64 and 128, median ms). Also EfficientNet-Lite0
int8 weight-only: top-1 agreement with fp32 on the real photos. JSON: bench/results/weight_only.json.
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import machine, round_robin, write_json, session  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.datasets import sentences as S  # noqa: E402
from quantir.datasets.wordpiece import WordPiece, batches_by_length  # noqa: E402

SHAPES = ((1, 64), (1, 128), (32, 64), (32, 128))


def embed(path: Path, batches, n: int) -> np.ndarray:
    sess = session(path, 2)
    out = np.zeros((n, 384), np.float32)
    for idx, feeds in batches:
        out[idx] = sess.run(None, feeds)[0]
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)


def latency_feed(tokenizer: WordPiece, batch: int, length: int) -> dict:
    text = " ".join(S.evaluation_sentences()[:40])
    one = tokenizer([text], max_length=length, pad_to=length)
    return {k: np.repeat(v, batch, axis=0) for k, v in one.items()}


def ort_nbits(model: Path, out: Path, block: int) -> str | None:
    """ONNX Runtime's own int4 weight-only tool, if this onnxruntime has it; None, or why not."""
    try:
        import onnx
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError as e:
        return f"not installed: {e}"
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.ERROR)   # a line per node
    q = MatMulNBitsQuantizer(onnx.load(str(model)), block_size=block, is_symmetric=True)
    q.process()
    q.model.save_model_to_file(str(out), use_external_data_format=False)
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / ".cache/models/minilm_l6.onnx")
    ap.add_argument("--vocab", type=Path, default=ROOT / ".cache/models/minilm_l6.vocab.txt")
    ap.add_argument("--efficientnet", type=Path, default=ROOT / ".cache/models/efficientnet_lite0.onnx")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/weight_only.json")
    ap.add_argument("--rounds", type=int, default=15, help="latency runs per model and shape (median)")
    ap.add_argument("--quick", action="store_true", help="128 evaluation sentences, 5 rounds")
    args = ap.parse_args()
    if not args.model.is_file() or not args.vocab.is_file():
        print(f"skip: {args.model} or {args.vocab} missing (`make models`)")
        return 0
    logging.getLogger().setLevel(logging.ERROR)
    tok = WordPiece.from_file(args.vocab)
    texts = S.evaluation_sentences()
    if args.quick:
        texts, args.rounds = texts[:128], 5
    batches = batches_by_length(tok, list(texts), max_length=128, batch_size=32)
    calib = [f for _, f in batches_by_length(tok, list(S.calibration_sentences()[:256]), max_length=128,
                                             batch_size=32)]
    ref = embed(args.model, batches, len(texts))
    fp32_size = args.model.stat().st_size
    rows: dict = {"fp32": {"size_bytes": fp32_size, "size_ratio": 1.0}}
    W = qr.WeightOnlyConfig
    variants = {   # name: (config, calibration, ONNX Runtime contrib ops)
        "quantir int4 b32 rtn": (W(bits=4, block_size=32, rounding="rtn"), None, True),
        "quantir int4 b32 mse": (W(bits=4, block_size=32), None, True),
        "quantir int4 b32 gptq": (W(bits=4, block_size=32), calib, True),
        "quantir int4 b32 gptq DQ": (W(bits=4, block_size=32), calib, False),
        "quantir int4 b32 asym gptq": (W(bits=4, block_size=32, symmetric=False), calib, True),
        "quantir int8 per-channel": (W(bits=8), None, True),
    }
    paths = {"fp32": args.model}
    with tempfile.TemporaryDirectory(prefix="bench_weight_only_") as d:
        work = Path(d)
        for name, (cfg, cal, nbits) in variants.items():
            t = time.perf_counter()
            result = qr.quantize_weights(args.model, cfg, cal)
            p = work / (name.replace(" ", "_").replace("+", "_") + ".onnx")
            result.save(p, matmul_nbits=nbits)
            seconds = time.perf_counter() - t
            c = cosines(ref, embed(p, batches, len(texts)))
            sq = [x.sqnr_db for x in result.layers]
            rows[name] = {"cosine_mean": float(c.mean()), "cosine_min": float(c.min()), "size_bytes": p.stat().st_size,
                          "size_ratio": p.stat().st_size / fp32_size, "seconds": round(seconds, 1),
                          "weight_sqnr_db_mean": float(np.mean(sq)),
                          "weight_sqnr_rtn_db_mean": float(np.mean([x.sqnr_rtn_db for x in result.layers]))}
            print(f"{name}: {rows[name]}", flush=True)
            paths[name] = p
        why = ort_nbits(args.model, work / "ort_nbits.onnx", 32)
        if why is None:
            p = work / "ort_nbits.onnx"
            c = cosines(ref, embed(p, batches, len(texts)))
            rows["ORT MatMulNBitsQuantizer int4 b32"] = {
                "cosine_mean": float(c.mean()), "cosine_min": float(c.min()), "size_bytes": p.stat().st_size,
                "size_ratio": p.stat().st_size / fp32_size}
            paths["ORT MatMulNBitsQuantizer int4 b32"] = p
        else:
            rows["ORT MatMulNBitsQuantizer int4 b32"] = {"error": why}
        timed = [k for k in paths if k in ("fp32", "quantir int4 b32 gptq", "quantir int4 b32 gptq DQ",
                                           "quantir int8 per-channel", "ORT MatMulNBitsQuantizer int4 b32")]
        lat: dict = {}
        for batch, length in SHAPES:
            times = round_robin({k: session(paths[k]) for k in timed}, latency_feed(tok, batch, length),
                                args.rounds, budget_s=60, min_rounds=3)
            lat[f"{batch}x{length}"] = {k: round(float(np.median(v)), 2) for k, v in times.items()}
    eff = efficientnet(args.efficientnet)
    head = f"{'model':<36}{'cos mean':>9}{'cos min':>9}{'size':>7}" + "".join(f"{'ms ' + s:>10}" for s in lat)
    print(head + "\n" + "-" * len(head))
    for name, r in rows.items():
        if "error" in r:
            print(f"{name:<36}  {r['error'][:100]}")
            continue
        ms = "".join(f"{lat[s].get(name, float('nan')):>10.1f}" for s in lat)
        print(f"{name:<36}{r.get('cosine_mean', 1.0):>9.4f}{r.get('cosine_min', 1.0):>9.4f}"
              f"{r['size_ratio']:>6.3f}x{ms}")
    print(f"EfficientNet-Lite0 int8 weight-only: {eff}")
    result = {"what": "weight-only quantization, all-MiniLM-L6-v2 in ONNX Runtime (default session options): "
                      "sentence-embedding cosine vs fp32 on the evaluation sentences, file size vs fp32, latency "
                      "1 thread median ms by batch x sequence",
              "sentences": len(texts), "rows": rows, "latency_ms": lat, "rounds": args.rounds,
              "efficientnet_lite0": eff, "machine": machine()}
    out = args.out.resolve()
    write_json(result, out, ROOT if out.is_relative_to(ROOT) else out.parent)
    return 0


def efficientnet(path: Path) -> dict:
    """int8 per-channel weight-only EfficientNet-Lite0: top-1 against fp32 on every real photo, in ORT."""
    if not path.is_file():
        return {"error": f"{path} missing"}
    try:
        from quantir.datasets import photos
        x, names = photos.load_efficientnet_batch()
    except Exception as e:   # scikit-image / scikit-learn not installed
        return {"error": f"{type(e).__name__}: {e}"[:200]}
    result = qr.quantize_weights(path, qr.WeightOnlyConfig(bits=8))
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "eff.onnx"
        result.save(p)
        s, f = session(p), session(path)
        name = s.get_inputs()[0].name
        q, r = s.run(None, {name: x})[0], f.run(None, {name: x})[0]
        return {"photos": len(names), "top1_agree": int((q.argmax(1) == r.argmax(1)).sum()),
                "size_ratio": p.stat().st_size / path.stat().st_size}


if __name__ == "__main__":
    sys.exit(main())
