#!/usr/bin/env python3
"""Regenerate the small torch-exported test models in this folder (needs torch; the tests don't).

- ``torch_legacy_small.onnx``: TorchScript exporter, opset 13, dynamic batch. Carries the
  exporter's F.pad subgraphs (Constant/ConstantOfShape/Concat/Reshape/Slice/Transpose/Cast
  into Pad), ``x.reshape(x.size(0), -1)`` as Shape/Gather/Unsqueeze/Concat/Reshape, a
  BatchNorm after a conv, hardswish as HardSigmoid * x, Resize and strided Slices.
- ``torch_dynamo_small.onnx`` (+ ``small_dynamo.onnx.data``, external weights): the same
  network through the dynamo exporter, opset 18.

    /path/to/venv-with-torch/bin/python tests/frontends/data/make_torch_models.py
"""
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, groups=8)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        x = F.pad(x, (1, 2, 1, 2))
        x = F.relu(self.bn(self.c1(x)))
        x = F.max_pool2d(x, 2)
        x = F.hardswish(self.c2(F.pad(x, (1, 1, 1, 1))))
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")[:, :, ::2, ::2]
        x = x.reshape(x.size(0), -1)
        return F.softmax(self.fc(x), dim=1)


def main():
    torch.manual_seed(0)
    m = Net().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 1, 12, 12)
    torch.onnx.export(m, x, str(HERE / "torch_legacy_small.onnx"), opset_version=13, dynamo=False,
                      input_names=["input"], output_names=["probs"],
                      dynamic_axes={"input": {0: "N"}, "probs": {0: "N"}})
    torch.onnx.export(m, (x,), str(HERE / "torch_dynamo_small.onnx"), opset_version=18, dynamo=True,
                      input_names=["input"], output_names=["probs"],
                      dynamic_shapes={"x": {0: torch.export.Dim("N", min=1, max=64)}})


if __name__ == "__main__":
    main()
