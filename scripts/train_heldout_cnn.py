#!/usr/bin/env python3
"""Train issue 13's held-out Fashion-MNIST CNN (a different architecture) and export it to ONNX.

Makes ``models/heldout_cnn.onnx`` and ``models/heldout_cnn.json`` with the same contract as
``train_fashion_gate_cnn.py`` (input "input" float32 [N,1,28,28] with a dynamic batch, output
"probs" [N,10], opset 17; the JSON holds fp32 top-1 by onnxruntime on all 10,000 test images
and on the first 1,000).

This model is for the issue's final check only: quantization choices are to be made on the
other models and then measured once on this one, so nothing should be tuned against it.
Its layout differs from the development CNN on purpose: 5x5 and dilated kernels, average
and max pooling, a *spatial* Sigmoid gate (one map multiplied into every channel), a
HardSigmoid channel gate fed by GlobalAveragePool, ReLU6 (Clip), LeakyRelu with slope 0.2,
and a two-layer Gemm head.

    stem   Conv5x5(1->16) BN LeakyRelu(0.2) -> AveragePool2x2                14x14  conv 1
    dil    Conv3x3 dilation 2 (16->16) BN Relu -> PW1x1 BN, + stem (Add), LeakyRelu  conv 2-3
    sgate  x * Sigmoid(Conv1x1(16->1) x)                                             conv 4
    down   Conv3x3/2 (16->32) BN ReLU6                                         7x7    conv 5
    mix    Concat[ DW5x5 BN LeakyRelu -> PW1x1(32->24) BN ,
                   MaxPool3x3/1 -> PW1x1(32->24) BN ]                    48 ch        conv 6-8
    cgate  x * HardSigmoid(Conv1x1(12->48)(Relu(Conv1x1(48->12)(GlobalAveragePool x))))  conv 9-10
    fuse   PW1x1(48->48) BN, + cgate (Add), LeakyRelu                                conv 11
    head   GlobalAveragePool -> Flatten -> Linear(48->32) Relu -> Linear(32->10) -> Softmax

Deterministic on CPU, same training loop, subset rule and JSON as ``train_fashion_gate_cnn.py``:

    python scripts/train_heldout_cnn.py                  # writes models/heldout_cnn.{onnx,json}
"""
from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

from train_fashion_gate_cnn import REPO, conv_bn, parse_args, run  # noqa: E402 (also checks torch)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

REQUIRED_OPS = {"Conv": 11, "LeakyRelu": 1, "AveragePool": 1, "MaxPool": 1, "Sigmoid": 1, "HardSigmoid": 1,
                "Mul": 2, "Concat": 1, "Add": 2, "Clip": 1, "GlobalAveragePool": 2, "Gemm": 2, "Softmax": 1}


class HeldoutCNN(nn.Module):
    """Returns logits; ``train_fashion_mnist.WithSoftmax`` adds the Softmax for export."""

    def __init__(self, slope: float = 0.2):
        super().__init__()
        self.slope = slope
        self.stem = conv_bn(1, 16, 5)
        self.dil = nn.Sequential(nn.Conv2d(16, 16, 3, padding=2, dilation=2, bias=False), nn.BatchNorm2d(16))
        self.dil_pw = conv_bn(16, 16)
        self.spatial = nn.Conv2d(16, 1, 1)
        self.down = conv_bn(16, 32, 3, stride=2)
        self.mix_dw = conv_bn(32, 32, 5, groups=32)
        self.mix_a = conv_bn(32, 24)
        self.mix_b = conv_bn(32, 24)
        self.se_reduce = nn.Conv2d(48, 12, 1)
        self.se_expand = nn.Conv2d(12, 48, 1)
        self.fuse = conv_bn(48, 48)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Linear(48, 32)
        self.dropout = nn.Dropout(0.1)
        self.fc2 = nn.Linear(32, 10)

    def lrelu(self, x):
        return F.leaky_relu(x, self.slope)

    def forward(self, x):
        x = F.avg_pool2d(self.lrelu(self.stem(x)), 2)                       # AveragePool
        x = self.lrelu(self.dil_pw(F.relu(self.dil(x))) + x)               # residual Add
        x = x * torch.sigmoid(self.spatial(x))                              # spatial gate
        x = F.relu6(self.down(x))                                          # Clip
        a = self.mix_a(self.lrelu(self.mix_dw(x)))
        b = self.mix_b(F.max_pool2d(x, 3, stride=1, padding=1))            # MaxPool
        x = torch.cat([a, b], dim=1)                                        # Concat
        x = x * F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(self.pool(x)))))  # channel gate
        x = self.lrelu(self.fuse(x) + x)                                   # residual Add
        x = torch.flatten(self.pool(x), 1)
        return self.fc2(self.dropout(F.relu(self.fc1(x))))                  # two Gemms


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, REPO / "models" / "heldout_cnn.onnx", epochs=6, train_images=30000, lr=0.01)
    return run(HeldoutCNN, "train_heldout_cnn.py",
               "issue 13 held-out CNN (final check only): 11 convs (5x5, dilated, depthwise 5x5), AveragePool, "
               "MaxPool, spatial Sigmoid gate, HardSigmoid channel gate, LeakyRelu(0.2), ReLU6, Concat, "
               "residual Adds, GlobalAveragePool, two Gemms, Softmax",
               REQUIRED_OPS, argv, args)


if __name__ == "__main__":
    raise SystemExit(main())
