#!/usr/bin/env python3
"""Train the small Fashion-MNIST CNN that quantir's tests quantize, and export it to ONNX.

Makes ``models/fashion_mnist_cnn.onnx`` (opset 17, input "input" float32 [N,1,28,28] with a
dynamic batch, output "probs" float32 [N,10]) and ``models/fashion_mnist_cnn.json`` (the fp32
accuracy measured by onnxruntime on all 10,000 test images, plus the settings).

The network is small but exercises what a quantizer must handle:

    stem      Conv3x3(1->24) BN ReLU6                                  28x28
    block1    DW3x3 BN ReLU6 -> PW1x1 BN, + stem (residual Add), HardSwish
    down1     DW3x3/2 BN ReLU6 -> PW1x1(24->48) BN HardSwish            14x14
    mix       Concat[ PW1x1(48->32) BN ReLU6 ,
                      DW3x3 BN ReLU6 -> PW1x1(48->32) BN HardSwish ]    64 ch
    down2     DW3x3/2 BN ReLU6 -> PW1x1(64->96) BN HardSwish             7x7
    block2    DW3x3 BN ReLU6 -> PW1x1 BN, + down2 (residual Add), HardSwish
    head      GlobalAveragePool -> Flatten -> Linear(96->10) -> Softmax

Deterministic on CPU: fixed seeds, ``torch.use_deterministic_algorithms(True)``, a seeded
generator for shuffling and augmentation, and a fixed thread count. The input is
normalised exactly as ``quantir.datasets.fashion_mnist.to_model_input`` does.

Run from the repository root. On an idle 2-core machine an epoch takes ~45 s with the
default 2 threads (~110 s with ``--threads 1``), so about 5-6 minutes in all. Results are
bit-for-bit reproducible for a given thread count and CPU; the committed model was made
with ``--threads 1`` (see the "command" field of the JSON):

    python scripts/train_fashion_mnist.py            # writes models/fashion_mnist_cnn.{onnx,json}
    python scripts/train_fashion_mnist.py --epochs 1 --out /tmp/fm.onnx   # quick smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

try:
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError:
    sys.exit(
        "train_fashion_mnist.py needs PyTorch (CPU build) and onnx + onnxruntime:\n"
        "  pip install torch==2.13.0        # CPU build; install it first, alone\n"
        "  pip install onnx==1.23.2 onnxruntime==1.32.0"
    )
import numpy as np

from quantir.datasets.fashion_mnist import MEAN, STD, load_fashion_mnist, to_model_input


class DSConv(nn.Module):
    """Depthwise-separable conv: depthwise KxK (groups=C) + BN + ReLU6, then pointwise 1x1 + BN."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False)
        self.dw_bn = nn.BatchNorm2d(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.pw_bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.pw_bn(self.pw(F.relu6(self.dw_bn(self.dw(x)))))


class FashionCNN(nn.Module):
    """Returns logits; ``WithSoftmax`` adds the Softmax for export."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.down1 = DSConv(16, 32, stride=2)
        self.block1 = DSConv(32, 32)
        self.mix_a = nn.Sequential(nn.Conv2d(32, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6())
        self.mix_b = DSConv(32, 32)
        self.down2 = DSConv(64, 96, stride=2)
        self.block2 = DSConv(96, 96)
        self.act = nn.Hardswish()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(96, 10)

    def forward(self, x):
        x = self.stem(x)
        x = self.act(self.down1(x))
        x = self.act(self.block1(x) + x)                         # residual Add
        x = torch.cat([self.mix_a(x), self.act(self.mix_b(x))], dim=1)  # Concat
        x = self.act(self.down2(x))
        x = self.act(self.block2(x) + x)                         # residual Add
        x = torch.flatten(self.pool(x), 1)                        # GlobalAveragePool
        return self.fc(self.dropout(x))                           # Gemm


class WithSoftmax(nn.Module):
    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


def augment(x: torch.Tensor, gen: torch.Generator, pad: int) -> torch.Tensor:
    """Random horizontal flip per image; with ``pad`` > 0 also one random shift of up to
    ``pad`` pixels for the whole batch (the border filled with black)."""
    n = x.shape[0]
    flip = torch.rand(n, generator=gen) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    if pad == 0:
        return x
    bg = float(-MEAN / STD)  # a black pixel after normalisation
    padded = F.pad(x, (pad, pad, pad, pad), value=bg)
    dy, dx = torch.randint(0, 2 * pad + 1, (2,), generator=gen).tolist()
    return padded[:, :, dy:dy + 28, dx:dx + 28]


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1000) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    return correct / len(x)


def export_onnx(model: nn.Module, out: Path) -> None:
    """Legacy (TorchScript) exporter, opset 17, dynamic batch; written atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    wrapped = WithSoftmax(model).eval()
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=out.parent)
    os.close(fd)
    try:
        torch.onnx.export(
            wrapped, torch.zeros(1, 1, 28, 28), tmp, dynamo=False, opset_version=17,
            input_names=["input"], output_names=["probs"],
            dynamic_axes={"input": {0: "N"}, "probs": {0: "N"}}, do_constant_folding=True,
        )
        os.chmod(tmp, 0o644)  # mkstemp makes the file owner-only
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def onnx_accuracy(path: Path, images: np.ndarray, labels: np.ndarray) -> tuple[float, dict[str, int]]:
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    ops: dict[str, int] = {}
    for node in model.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = to_model_input(images)
    probs = np.concatenate([sess.run(["probs"], {"input": x[i:i + 1000]})[0] for i in range(0, len(x), 1000)])
    assert np.allclose(probs.sum(1), 1.0, atol=1e-4), "output is not a probability distribution"
    return float((probs.argmax(1) == labels).mean()), dict(sorted(ops.items()))


def train(model: nn.Module, xtr: torch.Tensor, ytr: torch.Tensor, xte: torch.Tensor, yte: torch.Tensor,
          args: argparse.Namespace, gen: torch.Generator) -> float:
    """AdamW with a one-cycle schedule, augmented batches in channels-last order; the seconds it took."""
    cl = torch.channels_last
    steps_per_epoch = (len(xtr) + args.batch_size - 1) // args.batch_size
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=steps_per_epoch, pct_start=0.2
    )
    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        total = 0.0
        for i in range(0, len(xtr), args.batch_size):
            idx = perm[i:i + args.batch_size]
            xb = augment(xtr[idx], gen, args.shift).contiguous(memory_format=cl)
            loss = F.cross_entropy(model(xb), ytr[idx], label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        acc = evaluate(model, xte, yte)
        print(f"epoch {epoch + 1}/{args.epochs}  loss {total / len(xtr):.4f}  "
              f"test top-1 {acc:.4f}  {time.time() - t0:.0f}s", flush=True)
    return time.time() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "models" / "fashion_mnist_cnn.onnx")
    p.add_argument("--epochs", type=int, default=7)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.008)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--shift", type=int, default=0, help="random shift augmentation, pixels (0: flips only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.use_deterministic_algorithms(True)
    # Deterministic mode also NaN-fills every new tensor: a quarter of the step time, and
    # pointless here since no kernel reads uninitialised memory.
    torch.utils.deterministic.fill_uninitialized_memory = False
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)

    train_u8, train_y = load_fashion_mnist("train")
    test_u8, test_y = load_fashion_mnist("test")
    # channels_last is ~15% faster for depthwise convs on CPU; it changes no result.
    cl = torch.channels_last
    xtr, ytr = torch.from_numpy(to_model_input(train_u8)).contiguous(memory_format=cl), torch.from_numpy(train_y)
    xte, yte = torch.from_numpy(to_model_input(test_u8)), torch.from_numpy(test_y)

    model = FashionCNN().to(memory_format=cl)
    train_seconds = train(model, xtr, ytr, xte, yte, args, gen)
    torch_acc = evaluate(model, xte, yte)

    export_onnx(model.to(memory_format=torch.contiguous_format), args.out)
    ort_acc, ops = onnx_accuracy(args.out, test_u8, test_y)
    print(f"torch fp32 test top-1 {torch_acc:.4f}; onnxruntime on {args.out.name}: {ort_acc:.4f}")
    print("ops:", ops)

    meta = {
        "model": args.out.name,
        "command": "python scripts/train_fashion_mnist.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "dataset": "Fashion-MNIST (Debian package dataset-fashion-mnist)",
        "input": {"name": "input", "shape": ["N", 1, 28, 28], "dtype": "float32",
                  "normalisation": f"(uint8 / 255 - {MEAN}) / {STD}",
                  "reader": "quantir.datasets.fashion_mnist.to_model_input"},
        "output": {"name": "probs", "shape": ["N", 10], "dtype": "float32", "meaning": "softmax probabilities"},
        "fp32_test_top1": round(ort_acc, 4),
        "fp32_test_correct": int(round(ort_acc * len(test_y))),
        "test_images": int(len(test_y)),
        "measured_by": "onnxruntime CPUExecutionProvider on the exported file",
        "torch_test_top1": round(torch_acc, 4),
        "opset": 17,
        "exporter": "torch.onnx.export(dynamo=False)",
        "ops": ops,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "torch_version": torch.__version__,
        "seed": args.seed,
        "training": {
            "epochs": args.epochs, "batch_size": args.batch_size, "optimizer": "AdamW",
            "lr_max": args.lr, "weight_decay": args.weight_decay,
            "schedule": "OneCycleLR(pct_start=0.2)", "loss": "cross-entropy, label_smoothing=0.05",
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
