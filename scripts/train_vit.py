#!/usr/bin/env python3
"""Train a small Vision Transformer on Fashion-MNIST and export it to ONNX (dynamo, opset 18).

Makes ``models/vit_fmnist.onnx`` (input "input" float32 [N,1,28,28] with a dynamic batch, output
"logits" float32 [N,10]) and ``models/vit_fmnist.json`` (seed, epochs, training time, the fp32
test top-1 measured by onnxruntime on all 10,000 test images, versions, op counts).

The network is the textbook pre-LN ViT, small enough to train on two CPU cores:

    patches   Conv 4x4 stride 4 (1 -> 64)         28x28 -> 7x7 = 49 tokens
    CLS       a learned token in front            50 tokens (a zero slot padded in front, + CLS)
    position  a learned embedding, added          [1, 50, 64]
    4 blocks  x + MHA(LN(x)); x + MLP(LN(x))      4 heads of 16, MLP 64 -> 128 -> 64, exact GELU
    head      LN, then Linear(64 -> 10) on the CLS token

Attention is written out as MatMul / Softmax / MatMul (not F.scaled_dot_product_attention,
whose export is a fused form) because that is what a quantizer meets in exported encoders.

Deterministic on CPU: fixed seeds, ``torch.use_deterministic_algorithms(True)``, a seeded
generator for shuffling and augmentation, and a fixed thread count. Results are reproducible
for a given thread count and CPU. The input is normalised exactly as
``quantir.datasets.fashion_mnist.to_model_input`` does, so calibration data read with that
reader matches what the model saw. Run from the repository root with the torch venv:

    .venv-models/bin/python scripts/train_vit.py --out .cache/models/vit_fmnist.onnx   # make vit
    .venv-models/bin/python scripts/train_vit.py --epochs 1 --out /tmp/vit.onnx        # smoke run

The committed models/vit_fmnist.{onnx,json} are the output of ``make vit`` (the defaults: 9 epochs,
1 thread), copied from .cache/models: 19.4 minutes on a 2-core machine shared with other jobs,
fp32 test top-1 85.60% (torch and onnxruntime agree). Test accuracy was still rising at the last
epoch (85.1, 85.5, 85.6% over epochs 7-9); more epochs would give more, at ~2.5 minutes each.
One thread, not two: with the machine's other jobs, two threads made each step ~10x slower.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:
    sys.exit(
        "train_vit.py needs PyTorch (CPU build) and onnx + onnxruntime + onnxscript:\n"
        "  pip install torch==2.13.0        # CPU build; install it first, alone\n"
        "  pip install onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2"
    )
import numpy as np  # noqa: E402

from quantir.datasets.fashion_mnist import MEAN, STD, load_fashion_mnist, to_model_input  # noqa: E402

OPSET = 18


class Attention(nn.Module):
    """Multi-head self-attention as explicit MatMul -> Softmax -> MatMul."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                          # [b, heads, n, head_dim]
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, n, d)
        return self.proj(out)


class Block(nn.Module):
    """Pre-LN transformer block: x + MHA(LN(x)), then x + MLP(LN(x)) with exact GELU."""

    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, dim: int = 64, depth: int = 4, heads: int = 4, mlp: int = 128, patch: int = 4):
        super().__init__()
        tokens = (28 // patch) ** 2
        self.patch = nn.Conv2d(1, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, tokens + 1, dim))
        self.blocks = nn.ModuleList(Block(dim, heads, mlp) for _ in range(depth))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)
        nn.init.trunc_normal_(self.pos, std=0.02)
        nn.init.trunc_normal_(self.cls, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)              # [b, 49, dim]
        # The CLS token goes into a zero slot padded in front, added with the position embedding.
        # Same function as cat([cls.expand(b, -1, -1), x]) + pos, but that exports an Expand to the
        # run-time batch size, which quantir's importer cannot give a static shape.
        x = F.pad(x, (0, 0, 1, 0)) + torch.cat([self.cls + self.pos[:, :1], self.pos[:, 1:]], dim=1)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x[:, 0]))


def augment(x: torch.Tensor, gen: torch.Generator, shift: int) -> torch.Tensor:
    """Per image: a random horizontal flip and a random shift of up to ``shift`` pixels
    (the border filled with black)."""
    n = x.shape[0]
    flip = torch.rand(n, generator=gen) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    if shift == 0:
        return x
    padded = F.pad(x, (shift,) * 4, value=float(-MEAN / STD))  # a black pixel after normalisation
    dy, dx = torch.randint(0, 2 * shift + 1, (2, n), generator=gen)
    ar = torch.arange(28)
    rows = (dy[:, None] + ar)[:, :, None]
    cols = (dx[:, None] + ar)[:, None, :]
    return padded[torch.arange(n)[:, None, None], 0, rows, cols][:, None]


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1000) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    return correct / len(x)


def train(model: nn.Module, xtr, ytr, xte, yte, args: argparse.Namespace, gen: torch.Generator) -> float:
    """AdamW, linear warm-up for one epoch then cosine decay to zero, per step; the seconds it took."""
    steps_per_epoch = (len(xtr) + args.batch_size - 1) // args.batch_size
    total_steps = args.epochs * steps_per_epoch
    warmup = min(steps_per_epoch, total_steps // 5)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or name in ("cls", "pos") else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total_steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        total = 0.0
        for i in range(0, len(xtr), args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss = F.cross_entropy(model(augment(xtr[idx], gen, args.shift)), ytr[idx], label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        acc = evaluate(model, xte, yte)
        print(f"epoch {epoch + 1}/{args.epochs}  loss {total / len(xtr):.4f}  "
              f"test top-1 {acc:.4f}  {time.time() - t0:.0f}s", flush=True)
    return time.time() - t0


def export_onnx(model: nn.Module, out: Path) -> None:
    """Dynamo exporter, opset 18, dynamic batch; written atomically as one file."""
    import onnx

    out.parent.mkdir(parents=True, exist_ok=True)
    model.eval()
    batch = torch.export.Dim("N", min=1, max=4096)
    program = torch.onnx.export(
        model, (torch.zeros(2, 1, 28, 28),), dynamo=True, opset_version=OPSET,
        input_names=["input"], output_names=["logits"], dynamic_shapes={"x": {0: batch}},
    )
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=out.parent)
    os.close(fd)
    try:
        onnx.save(program.model_proto, tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes the file owner-only
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check_onnx(path: Path, model: nn.Module, images: np.ndarray, labels: np.ndarray) -> tuple[float, float, dict]:
    """ORT's top-1 on all ``images``, the largest |ORT - torch| on the first 64, and the op counts."""
    import onnx
    import onnxruntime as ort

    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    ops: dict[str, int] = {}
    for node in proto.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = to_model_input(images)
    logits = np.concatenate([sess.run(["logits"], {"input": x[i:i + 1000]})[0] for i in range(0, len(x), 1000)])
    with torch.no_grad():
        ref = model.eval()(torch.from_numpy(x[:64])).numpy()
    diff = float(np.abs(logits[:64] - ref).max())
    return float((logits.argmax(1) == labels).mean()), diff, dict(sorted(ops.items()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / ".cache" / "models" / "vit_fmnist.onnx")
    p.add_argument("--epochs", type=int, default=9)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--shift", type=int, default=2, help="random shift augmentation, pixels (0: flips only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads; 1 because 2 threads on a shared 2-core machine ran ~10x slower per step")
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = False  # no kernel here reads uninitialised memory
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)

    train_u8, train_y = load_fashion_mnist("train")
    test_u8, test_y = load_fashion_mnist("test")
    xtr, ytr = torch.from_numpy(to_model_input(train_u8)), torch.from_numpy(train_y)
    xte, yte = torch.from_numpy(to_model_input(test_u8)), torch.from_numpy(test_y)

    model = ViT()
    params = int(sum(p.numel() for p in model.parameters()))
    print(f"ViT: {params} parameters", flush=True)
    train_seconds = train(model, xtr, ytr, xte, yte, args, gen)
    torch_acc = evaluate(model, xte, yte)

    export_onnx(model, args.out)
    ort_acc, diff, ops = check_onnx(args.out, model, test_u8, test_y)
    print(f"torch fp32 test top-1 {torch_acc:.4f}; onnxruntime on {args.out.name}: {ort_acc:.4f}; "
          f"max |ORT - torch| on 64 test images {diff:.2e}")
    print("ops:", ops)
    if diff > 1e-4:
        print(f"error: ONNX Runtime differs from torch by {diff:.2e} > 1e-4", file=sys.stderr)
        return 1

    import onnx
    import onnxruntime
    meta = {
        "model": args.out.name,
        "command": ".venv-models/bin/python scripts/train_vit.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "dataset": "Fashion-MNIST (Debian package dataset-fashion-mnist)",
        "input": {"name": "input", "shape": ["N", 1, 28, 28], "dtype": "float32",
                  "normalisation": f"(uint8 / 255 - {MEAN}) / {STD}",
                  "reader": "quantir.datasets.fashion_mnist.to_model_input"},
        "output": {"name": "logits", "shape": ["N", 10], "dtype": "float32", "meaning": "class logits"},
        "architecture": {"patch": "Conv 4x4 stride 4", "tokens": 50, "dim": 64, "depth": 4, "heads": 4,
                         "mlp": 128, "norm": "pre-LN", "activation": "exact GELU", "head": "LN + Linear on CLS"},
        "fp32_test_top1": round(ort_acc, 4),
        "fp32_test_correct": int(round(ort_acc * len(test_y))),
        "test_images": int(len(test_y)),
        "measured_by": "onnxruntime CPUExecutionProvider on the exported file",
        "torch_test_top1": round(torch_acc, 4),
        "max_abs_diff_ort_vs_torch_64_images": diff,
        "opset": OPSET,
        "exporter": "torch.onnx.export(dynamo=True)",
        "ops": ops,
        "parameters": params,
        "torch_version": torch.__version__,
        "onnx_version": onnx.__version__,
        "onnxruntime_version": onnxruntime.__version__,
        "seed": args.seed,
        "training": {
            "epochs": args.epochs, "batch_size": args.batch_size, "optimizer": "AdamW",
            "lr_max": args.lr, "weight_decay": args.weight_decay,
            "schedule": "linear warm-up (1 epoch), cosine to 0, per step",
            "loss": "cross-entropy, label_smoothing=0.05", "grad_clip": 1.0,
            "augmentation": "random horizontal flip" + (f", random shift up to {args.shift} px" if args.shift else ""),
            "threads": args.threads, "deterministic": True, "seconds": round(train_seconds, 1),
        },
    }
    meta_path = args.out.with_suffix(".json")
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) and {meta_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
