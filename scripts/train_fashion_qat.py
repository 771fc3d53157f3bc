#!/usr/bin/env python3
"""Train a small Fashion-MNIST CNN with quantization-aware training (torch.ao eager) and export the
fake-quantized model to ONNX QDQ, the input ``quantir convert`` takes.

Makes ``models/fashion_qat_qdq.onnx`` (opset 17, input "input" float32 [N,1,28,28] with a dynamic
batch, output "logits" float32 [N,10]) and ``models/fashion_qat_qdq.json`` (settings and the
accuracies measured: fp32 in torch, fake-quant in torch, onnxruntime on the exported file).

    QuantStub -> Conv3x3(1->16)+ReLU -> MaxPool2 -> Conv3x3(16->32)+ReLU -> MaxPool2 -> Flatten
              -> Linear(1568->10) -> DeQuantStub

Training: ``--epochs`` float epochs, then ``--qat-epochs`` of QAT fine-tuning from those weights
(``fuse_modules_qat`` conv+relu, ``prepare_qat`` with the qnnpack QAT qconfig: uint8 activations
0..255, int8 per-tensor symmetric weights -128..127), observers frozen for the last half of the
QAT epoch. The qconfig is the ``version=0`` form (``FakeQuantize`` modules) because the legacy
exporter turns ``fake_quantize_per_tensor_affine`` into QuantizeLinear/DequantizeLinear pairs and
has no symbolic for the fused observer+fake-quant op of ``version=1``.

Run from the repository root with the models venv (a few minutes on 2 cores):

    .venv-models/bin/python scripts/train_fashion_qat.py
    .venv-models/bin/python scripts/train_fashion_qat.py --epochs 1 --qat-epochs 1 --out /tmp/q.onnx
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
    import torch.ao.quantization as tq
    import torch.nn.functional as F
    from torch import nn
except ImportError:
    sys.exit("train_fashion_qat.py needs PyTorch 2.13 (CPU) and onnx + onnxruntime: "
             "run it with .venv-models/bin/python")
import numpy as np  # noqa: E402

from quantir.datasets.fashion_mnist import MEAN, STD, load_fashion_mnist, to_model_input  # noqa: E402


class SmallCNN(nn.Module):
    """conv-relu-pool twice, then one Linear; Quant/DeQuantStub mark where the integer model begins and ends."""

    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 7 * 7, 10)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.pool(self.relu1(self.conv1(x)))
        x = self.pool(self.relu2(self.conv2(x)))
        return self.dequant(self.fc(torch.flatten(x, 1)))


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1000) -> float:
    model.eval()
    with torch.no_grad():
        correct = sum((model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item() for i in range(0, len(x), batch))
    return correct / len(x)


def run_epochs(model, opt, xtr, ytr, epochs: int, batch: int, gen, label: str, on_half=None) -> None:
    steps = (len(xtr) + batch - 1) // batch
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        total, t0 = 0.0, time.time()
        for k, i in enumerate(range(0, len(xtr), batch)):
            if on_half is not None and epoch == epochs - 1 and k == steps // 2:
                on_half(model)
            idx = perm[i:i + batch]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        print(f"{label} epoch {epoch + 1}/{epochs}  loss {total / len(xtr):.4f}  {time.time() - t0:.0f}s", flush=True)


def freeze(model: nn.Module) -> None:
    """Stop the observers: the scales and zero points stay as they are while the weights settle."""
    model.apply(tq.disable_observer)


def export_onnx(model: nn.Module, out: Path) -> None:
    """Legacy (TorchScript) exporter: each fake-quant becomes QuantizeLinear -> DequantizeLinear."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=out.parent)
    os.close(fd)
    try:
        torch.onnx.export(
            model.eval(), torch.zeros(1, 1, 28, 28), tmp, dynamo=False, opset_version=17,
            input_names=["input"], output_names=["logits"],
            dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, do_constant_folding=True,
        )
        os.chmod(tmp, 0o644)
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
    logits = np.concatenate([sess.run(["logits"], {"input": x[i:i + 1000]})[0] for i in range(0, len(x), 1000)])
    return float((logits.argmax(1) == labels).mean()), dict(sorted(ops.items()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "models" / "fashion_qat_qdq.onnx")
    p.add_argument("--epochs", type=int, default=2, help="float epochs before QAT")
    p.add_argument("--qat-epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--qat-lr", type=float, default=2e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)

    train_u8, train_y = load_fashion_mnist("train")
    test_u8, test_y = load_fashion_mnist("test")
    xtr, ytr = torch.from_numpy(to_model_input(train_u8)), torch.from_numpy(train_y).long()
    xte, yte = torch.from_numpy(to_model_input(test_u8)), torch.from_numpy(test_y).long()

    t0 = time.time()
    model = SmallCNN()
    run_epochs(model, torch.optim.Adam(model.parameters(), lr=args.lr), xtr, ytr, args.epochs, args.batch_size,
               gen, "fp32")
    fp32_acc = evaluate(model, xte, yte)
    print(f"fp32 test top-1 {fp32_acc:.4f}", flush=True)

    model.train()
    model.qconfig = tq.get_default_qat_qconfig("qnnpack", version=0)
    tq.fuse_modules_qat(model, [["conv1", "relu1"], ["conv2", "relu2"]], inplace=True)
    tq.prepare_qat(model, inplace=True)
    run_epochs(model, torch.optim.Adam(model.parameters(), lr=args.qat_lr), xtr, ytr, args.qat_epochs,
               args.batch_size, gen, "qat", on_half=freeze)
    freeze(model)
    qat_acc = evaluate(model, xte, yte)
    seconds = time.time() - t0
    print(f"QAT (fake-quant) test top-1 {qat_acc:.4f}", flush=True)

    export_onnx(model, args.out)
    ort_acc, ops = onnx_accuracy(args.out, test_u8, test_y)
    print(f"onnxruntime on {args.out.name}: {ort_acc:.4f}; ops {ops}")

    meta = {
        "model": args.out.name,
        "command": " ".join([".venv-models/bin/python scripts/train_fashion_qat.py",
                             *(sys.argv[1:] if argv is None else argv)]),
        "dataset": "Fashion-MNIST (Debian package dataset-fashion-mnist)",
        "input": {"name": "input", "shape": ["N", 1, 28, 28], "dtype": "float32",
                  "normalisation": f"(uint8 / 255 - {MEAN}) / {STD}",
                  "reader": "quantir.datasets.fashion_mnist.to_model_input"},
        "output": {"name": "logits", "shape": ["N", 10], "dtype": "float32", "meaning": "dequantized logits"},
        "quantization": "torch.ao eager QAT: fuse_modules_qat(conv+relu), prepare_qat, "
                        "get_default_qat_qconfig('qnnpack', version=0): activations uint8 0..255 per tensor "
                        "(MovingAverageMinMaxObserver), weights int8 -128..127 per-tensor symmetric",
        "fp32_torch_test_top1": round(fp32_acc, 4),
        "qat_torch_test_top1": round(qat_acc, 4),
        "qdq_onnxruntime_test_top1": round(ort_acc, 4),
        "qdq_onnxruntime_test_correct": int(round(ort_acc * len(test_y))),
        "test_images": int(len(test_y)),
        "opset": 17,
        "exporter": "torch.onnx.export(dynamo=False)",
        "ops": ops,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "torch_version": torch.__version__,
        "seed": args.seed,
        "training": {
            "fp32_epochs": args.epochs, "qat_epochs": args.qat_epochs, "batch_size": args.batch_size,
            "optimizer": "Adam", "lr": args.lr, "qat_lr": args.qat_lr, "loss": "cross-entropy",
            "observers": "frozen after half of the last QAT epoch", "threads": args.threads,
            "deterministic": True, "seconds": round(seconds, 1),
        },
    }
    meta_path = args.out.with_suffix(".json")
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) and {meta_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
