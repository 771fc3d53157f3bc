"""nn.lstm against ONNX's own LSTM node test cases and ONNX Runtime (directions, sequence_lens,
initial states, peepholes, clip, activations, input_forget, the three outputs)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.errors import QuantirError

RNG = np.random.default_rng(0)


def _node_cases():
    """The (node, inputs, outputs, name) that onnx.backend.test.case.node.lstm exports."""
    from onnx.backend.test.case.node import lstm as cases
    found = []
    real = cases.expect
    cases.expect = lambda node, inputs, outputs, name, **kw: found.append((node, inputs, outputs, name))
    try:
        for attr in dir(cases.LSTM):
            if attr.startswith("export"):
                getattr(cases.LSTM, attr)()
    finally:
        cases.expect = real
    return found


NODE_CASES = _node_cases()


def _save(tmp_path, node, inputs, initializers=()) -> str:
    names = [n for n in node.input if n]
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for n, a in zip(names, inputs)]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in node.output if n]
    g = helper.make_graph([node], "g", graph_inputs, outs, list(initializers))
    path = str(tmp_path / "lstm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path


def test_the_node_cases_are_there():
    assert {"test_lstm_defaults", "test_lstm_with_initial_bias", "test_lstm_with_peepholes",
            "test_lstm_batchwise"} <= {name for *_, name in NODE_CASES}


@pytest.mark.parametrize("case", NODE_CASES, ids=[c[3] for c in NODE_CASES])
def test_onnx_node_cases(tmp_path, case):
    node, inputs, outputs, _ = case
    path = _save(tmp_path, node, inputs)
    got = qr.run(qr.load(path), dict(zip([n for n in node.input if n], inputs)))
    expected = dict(zip([n for n in node.output if n], outputs))
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6)


def _graph(tmp_path, *, direction="forward", hidden=6, inp=4, bias=True, seq_lens=None, h0=False, c0=False,
           peep=False, **attrs):
    nd = 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array(RNG.normal(size=(nd, 4 * hidden, inp)).astype(np.float32) * 0.5, "W"),
             numpy_helper.from_array(RNG.normal(size=(nd, 4 * hidden, hidden)).astype(np.float32) * 0.5, "R")]
    ins = ["X", "W", "R"]
    feeds = {}
    for present, name, value in (
            (bias, "B", lambda: RNG.normal(size=(nd, 8 * hidden)).astype(np.float32)),
            (seq_lens is not None, "L", lambda: np.asarray(seq_lens, np.int32)),
            (h0, "H0", None), (c0, "C0", None),
            (peep, "P", lambda: RNG.normal(size=(nd, 3 * hidden)).astype(np.float32))):
        if not present:
            ins.append("")
        elif value is None:   # initial states are graph inputs: their batch follows X's
            ins.append(name)
            feeds[name] = nd
        else:
            inits.append(numpy_helper.from_array(value(), name))
            ins.append(name)
    while ins[-1] == "":
        ins.pop()
    node = helper.make_node("LSTM", ins, ["Y", "Y_h", "Y_c"], direction=direction, hidden_size=hidden, **attrs)
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", inp])]
    graph_inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [nd, "N", hidden]) for n in feeds]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")]
    g = helper.make_graph([node], "g", graph_inputs, outs, inits)
    path = str(tmp_path / "lstm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path, list(feeds), nd, hidden, inp


CASES = {
    "forward": {}, "reverse": dict(direction="reverse"), "bidirectional": dict(direction="bidirectional"),
    "no_bias": dict(bias=False),
    "seq_lens": dict(seq_lens=[5, 0, 3]), "reverse_seq_lens": dict(direction="reverse", seq_lens=[2, 5, 4]),
    "bidirectional_everything": dict(direction="bidirectional", seq_lens=[4, 1, 5], h0=True, c0=True, peep=True),
    "initial_h_only": dict(h0=True), "clip": dict(clip=0.4),
    "activations": dict(direction="bidirectional", activations=["HardSigmoid", "Tanh", "Relu", "Sigmoid",
                                                                 "ScaledTanh", "Softsign"],
                        activation_alpha=[0.3, 0.8], activation_beta=[0.4, 1.2]),
    "input_forget": dict(input_forget=1, peep=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_onnx_runtime(tmp_path, name):
    kw = CASES[name]
    path, states, nd, hidden, inp = _graph(tmp_path, **kw)
    m = qr.load(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sizes = [(5, 3)] if "seq_lens" in kw else [(5, 3), (2, 1)]   # dynamic T and N: two sizes
    for t, n in sizes:
        feeds = {"X": RNG.normal(size=(t, n, inp)).astype(np.float32)}
        feeds.update({s: RNG.normal(size=(nd, n, hidden)).astype(np.float32) for s in states})
        ref = sess.run(None, feeds)
        got = qr.run(m, feeds)
        for k, want in zip(("Y", "Y_h", "Y_c"), ref):
            assert got[k].shape == want.shape
            np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-5)


def test_bad_sequence_lens_is_an_error_not_a_crash(tmp_path):
    path, *_ = _graph(tmp_path, seq_lens=[9, 1, 1])
    with pytest.raises(QuantirError, match="sequence_lens"):
        qr.run(qr.load(path), {"X": RNG.normal(size=(5, 3, 4)).astype(np.float32)})
