"""Issue 11, item 2: the interpreter checks every allocation whose size a file's numbers
control before making it, and refuses it with a one-line ``ResourceError`` that names the
tensor, the shape and bytes, and the limit (``max_tensor_bytes``, 4 GiB by default).

The ONNX reproducers (ConstantOfShape / Tile / Pad / Range feeding an Add, a conv with
dilation 2**31-1 and pads 2**31) run through ``quantir run`` in a child process whose peak
RSS is read back."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantir.errors import ResourceError, ShapeError
from quantir.ir import Function, Module
from quantir.ir.dialects import func, nn
from quantir.passes.fold_constants import make_constant
from quantir.runtime import interpreter
from quantir.runtime.kernels.limits import DEFAULT_MAX_TENSOR_BYTES, check_allocation, format_bytes
from quantir.types import TensorType, f32
from tests.passes.test_budgets import HOSTILE, MB, RSS_LIMIT, _save, constant_of_shape_model, run_cli


def _one_op(opdef, arg_types, consts, result_types, **attrs) -> Module:
    fn = Function.create("main", arg_types, [])
    values = list(fn.arguments) + [fn.body.append(make_constant(c)).results[0] for c in consts]
    op = fn.body.append(opdef.build(values, result_types, label="big", **attrs))
    op.results[0].name_hint = "y"
    fn.body.append(func.RETURN.build(op.results, []))
    fn.update_type()
    return Module([fn])


def test_the_limit_is_checked_from_the_static_type_before_the_kernel_runs():
    x = TensorType((2, 3), f32)
    module = _one_op(nn.TILE, [x], [], [TensorType((2**16, 3 * 2**15), f32)], repeats=[2**15, 2**15])
    feeds = {"arg0": np.zeros((2, 3), np.float32)}
    with pytest.raises(ResourceError) as e:
        interpreter.run(module, feeds)
    assert str(e.value) == ("tensor 'y' of 'nn.tile' (node 'big') would need shape [65536, 98304] of float32 = "
                            "24 GiB, over the limit of 4 GiB per tensor; the model's sizes are likely corrupt "
                            "(or raise max_tensor_bytes)")
    with pytest.raises(ResourceError, match=r"= 12 KiB, over the limit of 1 KiB per tensor"):
        interpreter.run(_one_op(nn.TILE, [x], [], [TensorType((2**5, 3 * 2**5), f32)], repeats=[2**4, 2**5]),
                        feeds, max_tensor_bytes=1024)
    out = interpreter.run(_one_op(nn.TILE, [x], [], [TensorType((4, 3), f32)], repeats=[2, 1]), feeds,
                          max_tensor_bytes=48)
    assert out["y"].shape == (4, 3)


def test_a_kernel_checks_a_size_that_depends_on_values():
    scalars = [np.array(v, np.float32) for v in (0, 2**33, 1)]
    module = _one_op(nn.RANGE, [], scalars, [TensorType((None,), f32)])
    with pytest.raises(ResourceError) as e:
        interpreter.run(module, {})
    assert str(e.value) == ("tensor 'y' of 'nn.range' (node 'big') would need shape [8589934592] of float32 = "
                            "32 GiB, over the limit of 4 GiB per tensor; the model's sizes are likely corrupt "
                            "(or raise max_tensor_bytes)")
    zero = _one_op(nn.RANGE, [], [np.array(v, np.float32) for v in (0, 5, 0)], [TensorType((None,), f32)])
    with pytest.raises(ShapeError, match=r"^range delta is 0 \(start 0.0, limit 5.0\): the range would be infinite$"):
        interpreter.run(zero, {})
    from quantir.runtime.kernels.range_ import range_length
    assert range_length(np.int64(10), np.int64(0), np.int64(-3)) == 4 == len(range(10, 0, -3))
    assert range_length(np.int64(0), np.int64(2**62), np.int64(1)) == 2**62       # no float rounding


def test_conv_with_huge_dilation_and_pads_is_refused_not_allocated():
    x = TensorType((1, 1, 8, 8), f32)
    w = np.ones((1, 1, 3, 3), np.float32)
    module = _one_op(nn.CONV, [x], [w], [TensorType((1, 1, 10, 10), f32)],
                     dilations=[2**31 - 1] * 2, pads=[2**31] * 4)
    with pytest.raises(ResourceError) as e:
        interpreter.run(module, {"arg0": np.ones((1, 1, 8, 8), np.float32)})
    assert str(e.value).startswith("'nn.conv' (node 'big'): the padded input of a window op would need shape "
                                   "[1, 1, 4294967304, 4294967304] of float32 = ")
    assert str(e.value).endswith("over the limit of 4 GiB per tensor; the model's sizes are likely corrupt "
                                 "(or raise max_tensor_bytes)")


def test_conv_transpose_with_huge_dilation_is_refused():
    x = TensorType((1, 1, 2, 2), f32)
    w = np.ones((1, 1, 3, 3), np.float32)
    d = 2**31 - 1
    full = 1 + 2 * d + 1        # (in - 1) * stride + (k - 1) * d + 1
    module = _one_op(nn.CONV_TRANSPOSE, [x], [w], [TensorType((1, 1, full, full), f32)], dilations=[d, d])
    with pytest.raises(ResourceError, match=r"^tensor 'y' of 'nn.conv_transpose' \(node 'big'\) would need shape "):
        interpreter.run(module, {"arg0": np.ones((1, 1, 2, 2), np.float32)})


def test_check_allocation_is_exact_for_huge_dims():
    with pytest.raises(ResourceError, match=r"^t would need shape \[2147483648, 2147483648, 2147483648\] of "
                                            r"float32 = 3\.96e\+28 bytes, over the limit of 4 GiB per tensor"):
        check_allocation("t", (2**31, 2**31, 2**31), np.float32, limit=DEFAULT_MAX_TENSOR_BYTES)
    check_allocation("t", (2**20, 2**20, 0), np.float32, limit=1)      # empty: nothing to allocate
    # ... unless numpy cannot index the other dims ('array is too big' even for an empty array)
    with pytest.raises(ResourceError, match=r"^t would need shape \[2147483648, 2147483648, 0\] of float32: empty, "
                                            r"but its other dims exceed what an array can index"):
        check_allocation("t", (2**31, 2**31, 0), np.float32, limit=1)
    assert format_bytes(3 * 2**30) == "3 GiB" and format_bytes(100) == "100 bytes"


# -- the CLI reproducers ----------------------------------------------------------------------

@pytest.fixture
def empty_npz(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path)
    return str(path)


def test_run_a_64_gib_constant_of_shape(tmp_path, empty_npz):
    model = constant_of_shape_model(tmp_path / "cos.onnx", [16, 2**15, 2**15])
    rc, out, err, peak = run_cli("run", model, "--inputs", empty_npz, "--outputs", str(tmp_path / "o.npz"))
    assert rc == 1 and out == ""
    assert err == ("quantir run: tensor 'y' of 'arith.constant' would need shape [16, 32768, 32768] of float32 = "
                   "64 GiB, over the limit of 4 GiB per tensor; the model's sizes are likely corrupt "
                   "(or raise max_tensor_bytes)")
    assert peak < RSS_LIMIT, f"peak RSS {peak / MB:.0f} MB"
    assert not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize("name, shape", [("tile", "[32768, 98304]"), ("pad", "[131074, 131075]"),
                                         ("range", "[8589934592]")])
def test_run_the_hostile_models(tmp_path, empty_npz, name, shape):
    nodes, inits, op = HOSTILE[name]
    model = _save(tmp_path / f"{name}.onnx", nodes, inits)
    rc, out, err, peak = run_cli("run", model, "--inputs", empty_npz, "--outputs", str(tmp_path / "o.npz"))
    assert rc == 1
    assert err.startswith(f"quantir run: tensor 'e' of '{op}' would need shape {shape} of float32 = ")
    assert err.endswith("over the limit of 4 GiB per tensor; the model's sizes are likely corrupt "
                        "(or raise max_tensor_bytes)") and "\n" not in err
    assert peak < RSS_LIMIT, f"peak RSS {peak / MB:.0f} MB"


def test_run_a_conv_with_dilation_2_31(tmp_path):
    xin = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
    conv = helper.make_node("Conv", ["x", "w"], ["y"], dilations=[2**31 - 1] * 2, pads=[2**31] * 4)
    graph = helper.make_graph([conv], "g", [xin], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")])
    model = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    feeds = tmp_path / "in.npz"
    np.savez(feeds, x=np.ones((1, 1, 8, 8), np.float32))
    rc, out, err, peak = run_cli("run", str(model), "--inputs", str(feeds), "--outputs", str(tmp_path / "o.npz"))
    assert rc == 1
    assert err.startswith("quantir run: 'nn.conv': the padded input of a window op would need shape "
                          "[1, 1, 4294967304, 4294967304] of float32 = ")
    assert peak < RSS_LIMIT, f"peak RSS {peak / MB:.0f} MB"


def test_lrn_with_a_huge_window_is_refused():
    x = TensorType((1, 4, 2, 2), f32)
    module = _one_op(nn.LRN, [x], [], [x], size=2**40)
    with pytest.raises(ResourceError) as e:
        interpreter.run(module, {"arg0": np.ones((1, 4, 2, 2), np.float32)})
    assert str(e.value) == ("'nn.lrn' (node 'big'): lrn's padded channel sums would need shape "
                            "[1, 1099511627780, 2, 2] of float64 = 32 TiB, over the limit of 4 GiB per tensor; "
                            "the model's sizes are likely corrupt (or raise max_tensor_bytes)")


def test_a_quantized_conv_with_huge_pads_is_refused_before_the_qkernel_pads():
    from quantir.text import parse_module
    q_in, q_out = "!quant.uniform<i8:f32, 2.000000e-02:-5>", "!quant.uniform<i8:f32, 5.000000e-02:3>"
    q_w = "!quant.uniform<i8<-127:127>:f32:0, {3.000000e-03,4.000000e-03}>"
    p, d = 2**31, 2**31 - 1
    text = (f"func.func @main(%x: tensor<1x3x5x5x{q_in}>, %w: tensor<2x3x3x3x{q_w}>) -> tensor<1x2x7x7x{q_out}> {{\n"
            f'  %0 = "qnn.conv"(%x, %w) {{dilations = array<i64: {d}, {d}>, pads = array<i64: {p}, {p}, {p}, {p}>, '
            f"strides = array<i64: 1, 1>}} : (tensor<1x3x5x5x{q_in}>, tensor<2x3x3x3x{q_w}>) "
            f"-> tensor<1x2x7x7x{q_out}>\n"
            f"  return %0 : tensor<1x2x7x7x{q_out}>\n}}\n")
    module = parse_module(text, "conv.mlir")
    feeds = {"arg0": np.zeros((1, 3, 5, 5), np.int8), "arg1": np.ones((2, 3, 3, 3), np.int8)}
    with pytest.raises(ResourceError) as e:
        interpreter.run(module, feeds)
    assert str(e.value).startswith("the padded input of 'qnn.conv' would need shape "
                                   "[1, 3, 4294967301, 4294967301] of int8 = ")


def test_max_pool_with_huge_dilation_and_same_padding_is_refused():
    x = TensorType((1, 1, 8, 8), f32)
    module = _one_op(nn.MAX_POOL, [x], [], [x], kernel_shape=[3, 3], dilations=[2**31 - 1] * 2,
                     auto_pad="SAME_UPPER")
    with pytest.raises(ResourceError, match=r"^'nn.max_pool' \(node 'big'\): the padded input of a window op would "
                                            r"need shape \[1, 1, 4294967302, 4294967302\] of float32 = "):
        interpreter.run(module, {"arg0": np.ones((1, 1, 8, 8), np.float32)})


def test_a_dynamic_result_is_checked_from_the_actual_operand_shapes():
    x = TensorType((None, 1, 4, 4), f32)
    module = _one_op(nn.RESIZE, [x], [], [TensorType((None, 1, 2**18, 2**18), f32)],
                     scales=[1.0, 1.0, 2.0**16, 2.0**16], mode="nearest")
    with pytest.raises(ResourceError) as e:
        interpreter.run(module, {"arg0": np.ones((2, 1, 4, 4), np.float32)})
    assert str(e.value).startswith("tensor 'y' of 'nn.resize' (node 'big') would need shape [2, 1, 262144, 262144] "
                                   "of float32 = 512 GiB, over the limit of 4 GiB per tensor")


def test_run_all_keeps_the_limit_on_every_thread():
    """``run_all``'s threads start with a fresh context: each must set the run's limit again, or a
    value-dependent size would be checked against the default instead."""
    scalar = TensorType((), f32)
    module = _one_op(nn.RANGE, [scalar] * 3, [], [TensorType((None,), f32)])
    feeds = [{f"arg{i}": np.array(v, np.float32) for i, v in enumerate(vs)} for vs in ((0, 10, 1), (0, 1000, 1))]
    runner = interpreter.Interpreter(module, max_tensor_bytes=1024)
    with pytest.raises(ResourceError, match=r"shape \[1000\] of float32 = 3.91 KiB, over the limit of 1 KiB"):
        runner.run_all(feeds, workers=2)
    assert [len(o["y"]) for o in runner.run_all(feeds[:1] * 3, workers=2)] == [10, 10, 10]
