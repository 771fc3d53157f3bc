#!/usr/bin/env python3
"""Train the gated Fashion-MNIST CNN of issue 13 (the development model) and export it to ONNX.

Makes ``models/fashion_gate_cnn.onnx`` (opset 17, input "input" float32 [N,1,28,28] with a
dynamic batch, output "probs" float32 [N,10]) and ``models/fashion_gate_cnn.json`` (the fp32
accuracy measured by onnxruntime on all 10,000 test images and on the first 1,000, the
settings, the op histogram and the command).

Eleven convolutions (three of them depthwise) and the ops a quantizer meets in mobile CNNs
beyond Conv/ReLU: HardSwish, a squeeze-excitation gate (ReduceMean -> 1x1 convs -> Sigmoid,
multiplied into the features), LeakyRelu, Concat, residual Adds, ReduceMean, Gemm, Softmax.

    stem   Conv3x3(1->16) BN HardSwish                                   28x28   conv 1
    down1  DW3x3/2 BN LeakyRelu -> PW1x1(16->32) BN HardSwish             14x14   conv 2-3
    block  DW3x3 BN LeakyRelu -> PW1x1 BN, + down1 (residual Add), HardSwish      conv 4-5
    gate   x * Sigmoid(Conv1x1(8->32)(Relu(Conv1x1(32->8)(ReduceMean_hw x))))    conv 6-7
    down2  DW3x3/2 BN LeakyRelu                                            7x7    conv 8
    mix    Concat[ PW1x1(32->32) BN HardSwish , Conv3x3(32->32) BN LeakyRelu ]    conv 9-10
    fuse   PW1x1(64->64) BN, + mix (residual Add), HardSwish                      conv 11
    head   ReduceMean_hw -> Linear(64->10) (Gemm) -> Softmax

Deterministic on CPU (fixed seeds, deterministic algorithms, a seeded generator, a fixed
thread count); the input is normalised exactly as
``quantir.datasets.fashion_mnist.to_model_input`` does. The training helpers (augmentation,
evaluation, export, onnxruntime accuracy) are those of ``train_fashion_mnist.py``.

To keep a run within about 10 minutes on a busy 2-core machine, the default trains on a
fixed, class-balanced subset of the training set (``--train-images``, the first N of a
seeded permutation) for a few epochs. Run from anywhere with the models virtualenv:

    python scripts/train_fashion_gate_cnn.py             # writes models/fashion_gate_cnn.{onnx,json}
    python scripts/train_fashion_gate_cnn.py --epochs 1 --out /tmp/g.onnx   # quick smoke run
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))

from train_fashion_mnist import evaluate, export_onnx, onnx_accuracy, train  # noqa: E402 (also checks torch)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from quantir.datasets.fashion_mnist import MEAN, STD, load_fashion_mnist, to_model_input  # noqa: E402

SUBSET_IMAGES = 1000  # the JSON also records accuracy on the first SUBSET_IMAGES test images


def conv_bn(cin: int, cout: int, k: int = 1, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout))


class SqueezeExcite(nn.Module):
    """Channel gate: the spatial mean through a 1x1 bottleneck, a Sigmoid, multiplied back in."""

    def __init__(self, channels: int, hidden: int):
        super().__init__()
        self.reduce = nn.Conv2d(channels, hidden, 1)
        self.expand = nn.Conv2d(hidden, channels, 1)

    def forward(self, x):
        s = x.mean(dim=(2, 3), keepdim=True)                    # ReduceMean, keepdims=1
        return x * torch.sigmoid(self.expand(F.relu(self.reduce(s))))  # Sigmoid -> Mul


class GateCNN(nn.Module):
    """Returns logits; ``train_fashion_mnist.WithSoftmax`` adds the Softmax for export."""

    def __init__(self, slope: float = 0.1):
        super().__init__()
        self.slope = slope
        self.stem = conv_bn(1, 16, 3)
        self.down1_dw = conv_bn(16, 16, 3, stride=2, groups=16)
        self.down1_pw = conv_bn(16, 32)
        self.block_dw = conv_bn(32, 32, 3, groups=32)
        self.block_pw = conv_bn(32, 32)
        self.gate = SqueezeExcite(32, 8)
        self.down2_dw = conv_bn(32, 32, 3, stride=2, groups=32)
        self.mix_a = conv_bn(32, 32)
        self.mix_b = conv_bn(32, 32, 3)
        self.fuse = conv_bn(64, 64)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(64, 10)

    def lrelu(self, x):
        return F.leaky_relu(x, self.slope)

    def forward(self, x):
        hs = F.hardswish
        x = hs(self.stem(x))
        x = hs(self.down1_pw(self.lrelu(self.down1_dw(x))))
        x = hs(self.block_pw(self.lrelu(self.block_dw(x))) + x)          # residual Add
        x = self.gate(x)
        x = self.lrelu(self.down2_dw(x))
        x = torch.cat([hs(self.mix_a(x)), self.lrelu(self.mix_b(x))], dim=1)  # Concat
        x = hs(self.fuse(x) + x)                                          # residual Add
        x = x.mean(dim=(2, 3))                                            # ReduceMean, keepdims=0
        return self.fc(self.dropout(x))                                   # Gemm


# What the exported graph must contain (the op list); the script fails if one is missing.
REQUIRED_OPS = {"Conv": 11, "HardSwish": 1, "Sigmoid": 1, "Mul": 1, "LeakyRelu": 1, "Concat": 1,
                "Add": 2, "ReduceMean": 2, "Gemm": 1, "Softmax": 1}


def check_ops(ops: dict[str, int], required: dict[str, int]) -> None:
    short = {op: (ops.get(op, 0), n) for op, n in required.items() if ops.get(op, 0) < n}
    if short:
        raise SystemExit(f"exported graph lacks ops (found, wanted): {short}; full histogram {ops}")


def balanced_subset(labels: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Indices of ``n`` training images, n/10 per class, taken from a seeded permutation."""
    if n >= len(labels):
        return np.arange(len(labels))
    perm = np.random.default_rng(seed).permutation(len(labels))
    per_class = n // 10
    picked = np.concatenate([perm[labels[perm] == c][:per_class] for c in range(10)])
    return np.sort(picked)


def parse_args(argv: list[str] | None, out: Path, epochs: int, train_images: int, lr: float) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=out)
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--train-images", type=int, default=train_images,
                   help="class-balanced training subset size (60000: the whole training set)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--shift", type=int, default=0, help="random shift augmentation, pixels (0: flips only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1: on a loaded machine, 2 threads ran ~8x slower than 1)")
    return p.parse_args(argv)


def run(model_factory, script: str, description: str, required_ops: dict[str, int],
        argv: list[str] | None, args: argparse.Namespace) -> int:
    """Seed, train ``model_factory()`` on the chosen subset, export, measure in onnxruntime, write the JSON."""
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = False  # see train_fashion_mnist.py
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)

    train_u8, train_y = load_fashion_mnist("train")
    test_u8, test_y = load_fashion_mnist("test")
    keep = balanced_subset(train_y, args.train_images, args.seed)
    cl = torch.channels_last
    xtr = torch.from_numpy(to_model_input(train_u8[keep])).contiguous(memory_format=cl)
    ytr = torch.from_numpy(train_y[keep])
    xte, yte = torch.from_numpy(to_model_input(test_u8)), torch.from_numpy(test_y)

    model = model_factory().to(memory_format=cl)
    seconds = train(model, xtr, ytr, xte, yte, args, gen)
    torch_acc = evaluate(model, xte, yte)

    export_onnx(model.to(memory_format=torch.contiguous_format), args.out)
    ort_acc, ops = onnx_accuracy(args.out, test_u8, test_y)
    sub_acc, _ = onnx_accuracy(args.out, test_u8[:SUBSET_IMAGES], test_y[:SUBSET_IMAGES])
    print(f"torch fp32 test top-1 {torch_acc:.4f}; onnxruntime on {args.out.name}: {ort_acc:.4f} "
          f"(first {SUBSET_IMAGES}: {sub_acc:.4f})")
    print("ops:", ops)
    check_ops(ops, required_ops)

    meta = {
        "model": args.out.name,
        "description": description,
        "command": f"python scripts/{script} " + " ".join(sys.argv[1:] if argv is None else argv),
        "dataset": "Fashion-MNIST (Debian package dataset-fashion-mnist)",
        "input": {"name": "input", "shape": ["N", 1, 28, 28], "dtype": "float32",
                  "normalisation": f"(uint8 / 255 - {MEAN}) / {STD}",
                  "reader": "quantir.datasets.fashion_mnist.to_model_input"},
        "output": {"name": "probs", "shape": ["N", 10], "dtype": "float32", "meaning": "softmax probabilities"},
        "fp32_test_top1": round(ort_acc, 4),
        "fp32_test_correct": int(round(ort_acc * len(test_y))),
        "test_images": int(len(test_y)),
        "fp32_subset_top1": round(sub_acc, 4),
        "fp32_subset_correct": int(round(sub_acc * SUBSET_IMAGES)),
        "subset_images": SUBSET_IMAGES,
        "subset": f"the first {SUBSET_IMAGES} test images",
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
            "train_images": int(len(keep)),
            "train_subset": "class-balanced, the first N per class of a permutation seeded with --seed",
            "lr_max": args.lr, "weight_decay": args.weight_decay,
            "schedule": "OneCycleLR(pct_start=0.2)", "loss": "cross-entropy, label_smoothing=0.05",
            "augmentation": "random horizontal flip" + (f", random shift up to {args.shift} px" if args.shift else ""),
            "threads": args.threads, "deterministic": True, "seconds": round(seconds, 1),
        },
    }
    meta_path = args.out.with_suffix(".json")
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) and {meta_path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, REPO / "models" / "fashion_gate_cnn.onnx", epochs=6, train_images=30000, lr=0.01)
    return run(GateCNN, "train_fashion_gate_cnn.py",
               "issue 13 development CNN: 11 convs (3 depthwise), HardSwish, SE gate (ReduceMean, Sigmoid, Mul), "
               "LeakyRelu, Concat, residual Adds, ReduceMean, Gemm, Softmax",
               REQUIRED_OPS, argv, args)


if __name__ == "__main__":
    raise SystemExit(main())
