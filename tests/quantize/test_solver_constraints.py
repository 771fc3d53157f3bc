"""Parameters LiteRT's kernels accept: constraints of their Prepare that the solver must honour."""
import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir as qr
from quantir.runtime import qkernels as qk
from quantir.runtime import run


def test_hard_swish_output_scale_is_widened_to_what_litert_accepts(tmp_path):
    # inputs down to -1000 where hard-swish is 0: the output range (~[-0.4, 0.7]) alone would give
    # s_out ~ 0.004 < s_in / 128 ~ 0.03, which LiteRT's HARD_SWISH refuses at Prepare
    w = np.ones((1, 1, 1, 1), np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "W"], ["c"], name="conv"),
                      h.make_node("HardSwish", ["c"], ["probs"], name="hswish")], "g",
                     [h.make_tensor_value_info("x", TP.FLOAT, ["N", 1, 4, 4])],
                     [h.make_tensor_value_info("probs", TP.FLOAT, ["N", 1, 4, 4])], [nh.from_array(w, "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "m.onnx"))
    rng = np.random.default_rng(0)
    x = rng.uniform(-1000, 0.7, size=(16, 1, 4, 4)).astype(np.float32)
    result = qr.quantize(tmp_path / "m.onnx", {"x": x}, qr.Config(progress=False))
    op = next(o for o in result.module.main.ops if o.name == "qnn.hard_swish")
    s_in = op.operands[0].type.element_type.scale
    s_out = op.results[0].type.element_type.scale
    assert s_out >= s_in / 127
    qk.prepare_hard_swish(s_in, 0, s_out, 0)   # LiteRT's Prepare check passes
    y = run(result.module, {"x": x[:2]})["probs"]
    assert np.isfinite(y).all()
