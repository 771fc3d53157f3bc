"""BatchNormalization after ConvTranspose folds into it — also through Paddle's separate per-channel
bias Add — and the folded graph computes what ONNX Runtime computes on the unfolded one."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.frontends.onnx import load_onnx
from quantir.passes.fold_batchnorm import FoldBatchNorm

RNG = np.random.default_rng(3)


def _bn_inits(c):
    return [numpy_helper.from_array(RNG.uniform(0.5, 2, c).astype(np.float32), "s"),
            numpy_helper.from_array(RNG.normal(size=c).astype(np.float32), "beta"),
            numpy_helper.from_array(RNG.normal(size=c).astype(np.float32), "mean"),
            numpy_helper.from_array(RNG.uniform(0.2, 3, c).astype(np.float32), "var")]


def _model(tmp_path, *, group=1, inner_bias=True, add="none", cin=4, cout_g=3, k=3, s=2):
    cout = cout_g * group
    inits = [numpy_helper.from_array(RNG.normal(size=(cin, cout_g, k, k)).astype(np.float32), "w")]
    ct_in = ["x", "w"]
    if inner_bias:
        inits.append(numpy_helper.from_array(RNG.normal(size=cout).astype(np.float32), "b"))
        ct_in.append("b")
    nodes = [helper.make_node("ConvTranspose", ct_in, ["t"], strides=[s, s], pads=[1, 0, 0, 1], group=group)]
    bn_in = "t"
    if add != "none":
        shape = {"nchw": (1, cout, 1, 1), "chw": (cout, 1, 1), "scalar": (1,)}[add]
        inits.append(numpy_helper.from_array(RNG.normal(size=shape).astype(np.float32), "c"))
        nodes.append(helper.make_node("Add", ["c", "t"] if add == "chw" else ["t", "c"], ["ta"]))
        bn_in = "ta"
    inits += _bn_inits(cout)
    nodes += [helper.make_node("BatchNormalization", [bn_in, "s", "beta", "mean", "var"], ["bn"], epsilon=1e-3),
              helper.make_node("Relu", ["bn"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, cin, None, None])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("group,inner_bias,add", [
    (1, True, "none"), (1, False, "none"), (2, True, "none"), (1, False, "nchw"), (1, True, "nchw"),
    (2, False, "chw"), (1, False, "scalar")])
def test_folds_and_matches_onnx_runtime(tmp_path, group, inner_bias, add):
    path = _model(tmp_path, group=group, inner_bias=inner_bias, add=add)
    m = qr.load(path)
    names = [op.name for op in m.main.ops if op.name != "arith.constant"]
    assert names == ["nn.conv_transpose", "nn.relu", "func.return"]
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for shape in ((1, 4, 5, 6), (2, 4, 3, 7)):   # two sizes: the fold does not depend on them
        x = RNG.normal(size=shape).astype(np.float32)
        ref = sess.run(None, {"x": x})[0]
        got = qr.run(m, {"x": x})["y"]
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_the_pass_counts_the_absorbed_add(tmp_path):
    m = load_onnx(_model(tmp_path, inner_bias=False, add="nchw"), optimize=False)
    stats = FoldBatchNorm().run(m).stats
    assert stats == {"absorb-bias-add": 1, "fold:nn.conv_transpose": 1}


def test_an_add_that_is_not_per_channel_is_left_alone(tmp_path):
    """A [1, C, H, 1]-shaped constant is not a bias: the BN is decomposed, not folded."""
    path = _model(tmp_path, inner_bias=False, add="nchw")
    model = onnx.load(path)
    c = [i for i in model.graph.initializer if i.name == "c"][0]
    c.CopyFrom(numpy_helper.from_array(RNG.normal(size=(1, 3, 10, 1)).astype(np.float32), "c"))
    onnx.save(model, path)
    m = qr.load(path)
    names = [op.name for op in m.main.ops if op.name != "arith.constant"]
    assert "nn.add" in names and "nn.batch_normalization" not in names
    x = RNG.normal(size=(1, 4, 5, 6)).astype(np.float32)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(qr.run(m, {"x": x})["y"], ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
