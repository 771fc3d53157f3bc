"""Channel groups (quantize.channel_split): a conv whose few small channels a depthwise conv amplifies
is split so that those channels get a scale of their own. Exact in float; the integer model's
error against fp32 falls; every export runs it (LiteRT bit-exact, ONNX Runtime QDQ and QOperator)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.ir import Module
from quantir.quantize.channel_split import small_channels
from quantir.runtime import run

RNG = np.random.default_rng(0)
X = RNG.normal(size=(48, 3, 12, 12)).astype(np.float32)
HELD_OUT = RNG.normal(size=(16, 3, 12, 12)).astype(np.float32)
SMALL = (0, 3, 5)


def _model(tmp_path, small_gain=0.004, name="m.onnx", z_out=False, relu6=True) -> str:
    """conv 3->8 -> hard-swish written out -> depthwise 3x3 [-> ReLU6] -> conv 8->4. The SMALL channels of the
    first conv are ``small_gain`` times the others, and the depthwise conv scales them back up
    (what batch-norm folding writes for channels that barely move)."""
    rng = np.random.default_rng(1)
    w0 = rng.normal(size=(8, 3, 3, 3)).astype(np.float32)
    b0 = rng.normal(size=8).astype(np.float32)
    wd = rng.normal(size=(8, 1, 3, 3)).astype(np.float32) / 3
    for c in SMALL:
        w0[c] *= small_gain
        b0[c] *= small_gain
        wd[c] /= small_gain
    w1 = rng.normal(size=(4, 8, 1, 1)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w0, "w0"), (b0, "b0"), (wd, "wd"), (w1, "w1"))]
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for v, n in ((3, "three"), (0, "zero"),
                                                                                  (6, "six"))]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["z"], name="stem", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["z", "three"], ["z3"], name="hs_add"),
             helper.make_node("Clip", ["z3", "zero", "six"], ["relu6"], name="hs_clip"),
             helper.make_node("Mul", ["z", "relu6"], ["zz"], name="hs_mul"),
             helper.make_node("Div", ["zz", "six"], ["hs"], name="hs_div"),
             helper.make_node("Conv", ["hs", "wd"], ["d"], name="dw", group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["d", "zero", "six"], ["a"], name="dw_relu6"),
             helper.make_node("Conv", ["a" if relu6 else "d", "w1"], ["y"], name="pw")]
    if not relu6:
        del nodes[-2]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, None, None])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4, None, None])]
                          + ([helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, 8, None, None])]
                             if z_out else []), inits)
    path = str(tmp_path / name)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _fp32(path, x):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _sqnr(ref, got) -> float:
    return float(10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum()))


def _names(r):
    return [op.name for op in r.module.main.ops if op.name not in ("arith.constant", "quant.scast")]


@pytest.mark.parametrize("activations, small_gain", [("int8", 0.004), ("int16", 0.0002)])
def test_split_channels_lower_the_error_and_say_so(tmp_path, activations, small_gain):
    """int16 has 256x finer steps: its small channels are 20x smaller here, as PicoDet's stem's are
    (and no ReLU6 after the depthwise conv: clamped at 6, the 5000x weights it then needs to scale
    them back would be more than the 16x8 kernel's requantization can take)."""
    path = _model(tmp_path, small_gain, relu6=activations == "int8")
    ref = _fp32(path, HELD_OUT)
    errors = {}
    for split in (False, True):
        r = qr.quantize(path, {"x": X}, qr.Config(progress=False, budget=None, activations=activations,
                                                  channel_split=split))
        errors[split] = _sqnr(ref, run(r.module, {"x": HELD_OUT})["y"])
        # the float function calibration ran on computes what the model does
        assert np.abs(run(Module([r.float_function]), {"x": HELD_OUT})["y"] - ref).max() <= 1e-4 * np.abs(
            ref).max()
    assert not qr.quantize(path, {"x": X}, qr.Config(progress=False, budget=None,
                                                     channel_split=False)).channel_groups.applied
    assert list(r.channel_groups.applied) == ["stem -> dw"]
    assert r.channel_groups.applied["stem -> dw"].startswith("3 of 8 channels")
    assert "channel groups: 1" in r.summary() and "stem -> dw: 3 of 8 channels" in r.summary()
    names = _names(r)
    # two stems, two depthwise convs, the pointwise conv; one CONCATENATION and GATHER put the channels back
    assert names.count("qnn.conv") == 5
    assert [n for n in names if n in ("quant.qcast", "qnn.concat", "nn.gather", "quant.dcast")] == [
        "quant.qcast", "qnn.concat", "nn.gather", "quant.dcast"]
    if activations == "int8":
        assert names.count("qnn.hard_swish") == 2
        # the groups are joined after the depthwise convs' ReLU6, which stays fused into them
        fused = [op.attr("activation") for op in r.module.main.ops if op.name == "qnn.conv"]
        assert fused.count("RELU6") == 2 and "qnn.relu6" not in names and "qnn.clip" not in names, (fused, names)
    assert names.count("quant.qcast") == 1 and names.count("quant.dcast") == 1
    assert r.spec_report().ok
    # the small channels were rounded to steps the big ones set: 8 bits leave them almost nothing
    print(errors)
    assert errors[True] >= errors[False] + (15 if activations == "int8" else 6), errors


def test_split_model_runs_bit_exact_in_litert_and_in_onnx_runtime(tmp_path):
    path = _model(tmp_path)
    r = qr.quantize(path, {"x": X}, qr.Config(progress=False, budget=None))
    assert r.channel_groups.applied
    want = run(r.module, {"x": HELD_OUT})["y"]
    r.save(tmp_path / "q.onnx", format="qdq")
    qdq = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": HELD_OUT})[0]
    step = next(op for op in r.module.main.ops if op.name == "quant.dcast").operands[0].type.element_type.scale
    assert np.abs(qdq - want).max() <= 3 * step
    r.save(tmp_path / "q.qop.onnx", format="qoperator")
    qop = onnx.load(str(tmp_path / "q.qop.onnx"))
    assert [n.op_type for n in qop.graph.node].count("QuantizeLinear") == 1
    got = ort.InferenceSession(str(tmp_path / "q.qop.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": HELD_OUT})[0]
    assert np.abs(got - want).max() <= 3 * step
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    r.save(tmp_path / "m.tflite")
    report = verify_tflite(tmp_path / "m.tflite", {"x": HELD_OUT[:8]})
    assert report.ok, report.text()


def test_alike_channels_and_excluded_sites_stay_as_they_are(tmp_path):
    alike = _model(tmp_path, small_gain=1.0, name="alike.onnx")
    r = qr.quantize(alike, {"x": X}, qr.Config(progress=False, budget=None))
    assert not r.channel_groups.applied and "qnn.gather" not in _names(r)
    r = qr.quantize(_model(tmp_path), {"x": X}, qr.Config(progress=False, budget=None, exclude=("dw",)))
    assert not r.channel_groups.applied
    # the conv's output is also read elsewhere (a model output): the site is not a closed chain
    r = qr.quantize(_model(tmp_path, z_out=True, name="z.onnx"), {"x": X}, qr.Config(progress=False, budget=None))
    assert not r.channel_groups.applied


def test_the_input_file_is_not_touched(tmp_path):
    path = _model(tmp_path)
    before = open(path, "rb").read()
    model = onnx.load(path)
    qr.quantize(model, {"x": X}, qr.Config(progress=False, budget=None))
    assert open(path, "rb").read() == before
    assert [n.name for n in model.graph.node] == ["stem", "hs_add", "hs_clip", "hs_mul", "hs_div", "dw", "dw_relu6",
                                                  "pw"]


def test_small_channels_rule():
    wide = np.array([1.0, 40.0, 0.1, 30.0])
    assert small_channels([wide]).tolist() == [True, False, True, False]
    # small in Z but not in X: no group of its own
    assert small_channels([wide, np.array([1.0, 40.0, 30.0, 30.0])]).tolist() == [True, False, False, False]
    assert small_channels([np.array([1.0, 2.0, 3.0])]) is None             # alike
    assert small_channels([np.array([0.0, 0.0, 5.0])]) is None             # only dead channels
    # a dead channel is exact zero at any scale: it stays with the wide ones
    assert small_channels([np.array([0.0, 0.2, 5.0])]).tolist() == [False, True, False]
    assert small_channels([np.array([0.1, 0.2, 5.0]), np.array([0.0, 0.2, 5.0])]).tolist() == [False, True, False]
    assert small_channels([np.array([0.1, np.nan, 5.0])]) is None           # not finite: left alone
    assert small_channels([np.array([0.1, 2.0, 5.0])], ratio=4).tolist() == [True, False, False]


def test_int16_names_the_model_s_tensor_and_reaches_both_groups(tmp_path):
    """``Config.int16`` takes the model's tensor names: a tensor that was split is promoted in both groups."""
    r = qr.quantize(_model(tmp_path), {"x": X}, qr.Config(progress=False, budget=None, int16=("z",)))
    assert r.channel_groups.applied
    widths = {v.name_hint: p.bits for v, p in r.params.items()
              if hasattr(p, "bits") and v.name_hint and v.name_hint.startswith("z")}
    assert widths == {"z.channels_a": 16, "z.channels_b": 16}, widths


def test_cli_summary_lists_the_groups_and_the_flag_turns_them_off(tmp_path):
    import json
    from quantir.cli.main import main
    path = _model(tmp_path)
    np.savez(tmp_path / "c.npz", x=X)
    for flag, expected in (([], ["stem -> dw"]), (["--no-channel-split"], [])):
        out = tmp_path / "q.json"
        assert main(["quantize", path, "--data", str(tmp_path / "c.npz"), "-o", str(tmp_path / "q.tflite"),
                     "--summary", str(out), "--budget", "off", "-q", *flag]) == 0
        assert list(json.loads(out.read_text())["channel_groups"]["applied"]) == expected
