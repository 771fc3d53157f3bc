"""Small real ONNX models built with onnx.helper for quantizer tests (seeded)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh


def cnn(path, seed: int = 0, zero_channel: bool = False) -> np.random.Generator:
    """conv+bias+relu, depthwise+relu6, residual add, pointwise, maxpool, GAP, flatten, gemm, softmax."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(size=(8, 1, 3, 3)).astype(np.float32) * 0.3
    if zero_channel:
        w1[3] = 0.0
    arrays = {"W1": w1, "B1": rng.normal(size=8).astype(np.float32) * 0.1,
              "W2": rng.normal(size=(8, 1, 3, 3)).astype(np.float32) * 0.3,
              "W3": rng.normal(size=(16, 8, 1, 1)).astype(np.float32) * 0.3,
              "WF": rng.normal(size=(10, 16)).astype(np.float32) * 0.3, "BF": np.zeros(10, np.float32),
              "lo": np.float32(0), "hi": np.float32(6)}
    nodes = [
        h.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        h.make_node("Conv", ["r1", "W2"], ["c2"], pads=[1, 1, 1, 1], group=8, name="dw"),
        h.make_node("Clip", ["c2", "lo", "hi"], ["r2"], name="relu6"),
        h.make_node("Add", ["r2", "r1"], ["a"], name="res"),
        h.make_node("Conv", ["a", "W3"], ["c3"], name="pw"),
        h.make_node("MaxPool", ["c3"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        h.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        h.make_node("Flatten", ["g"], ["f"], name="flat"),
        h.make_node("Gemm", ["f", "WF", "BF"], ["logits"], transB=1, name="fc"),
        h.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax"),
    ]
    save_model(path, nodes, arrays, [1, 8, 8], [10])
    return rng


def unquantizable(path) -> None:
    nodes = [h.make_node("Erf", ["x"], ["e"], name="erf"), h.make_node("Exp", ["e"], ["probs"], name="exp")]
    save_model(path, nodes, {}, [1, 8, 8], [1, 8, 8])


def constant_branch(path) -> None:
    """A tensor whose range is zero on every sample: x*0 feeds an Add."""
    arrays = {"zero": np.zeros((1,), np.float32), "W": np.ones((4, 1, 1, 1), np.float32)}
    nodes = [h.make_node("Mul", ["x", "zero"], ["z"], name="times_zero"),
             h.make_node("Conv", ["z", "W"], ["c"], name="conv_on_zero"),
             h.make_node("Conv", ["x", "W"], ["d"], name="conv"),
             h.make_node("Add", ["c", "d"], ["probs"], name="add")]
    save_model(path, nodes, arrays, [1, 8, 8], [4, 8, 8])


def sum_residuals(path, seed: int = 0, logit_gain: float = 1.0) -> np.random.Generator:
    """ONNX-zoo ResNet style: residuals as Sum of two operands, a three-operand Sum, and a
    MaxPool with pads 1; ``logit_gain`` scales the classifier (large logits: softmax input
    scales of 16 and more)."""
    rng = np.random.default_rng(seed)
    arrays = {"W1": rng.normal(size=(4, 1, 3, 3)).astype(np.float32) * 0.5,
              "W2": rng.normal(size=(4, 4, 3, 3)).astype(np.float32) * 0.2,
              "WF": rng.normal(size=(5, 4)).astype(np.float32) * logit_gain, "BF": np.zeros(5, np.float32)}
    nodes = [h.make_node("Conv", ["x", "W1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         name="pool"),
             h.make_node("Conv", ["p", "W2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             h.make_node("Sum", ["c2", "p"], ["s"], name="residual"),
             h.make_node("Relu", ["s"], ["r2"], name="relu2"),
             h.make_node("Sum", ["r2", "p", "r2"], ["s3"], name="sum3"),
             h.make_node("GlobalAveragePool", ["s3"], ["g"], name="gap"),
             h.make_node("Flatten", ["g"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "WF", "BF"], ["logits"], transB=1, name="fc"),
             h.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax")]
    save_model(path, nodes, arrays, [1, 8, 8], [5])
    return rng


def save_model(path, nodes, arrays, in_shape, out_shape, output: str = "probs"):
    """``x`` [N, *in_shape] -> ``output`` [N, *out_shape], saved at ``path`` (returned)."""
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["N", *in_shape])],
                     [h.make_tensor_value_info(output, TP.FLOAT, ["N", *out_shape])],
                     [nh.from_array(np.asarray(a), n) for n, a in arrays.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path
