"""qnn.unidirectional_lstm <-> LiteRT UNIDIRECTIONAL_SEQUENCE_LSTM (full integer, 8x8_16).

(a) The exported model under LiteRT's BUILTIN_REF against quantir's interpreter, bit for bit,
forward and reverse (REVERSE_V2 on both sides), T 1..8, B 1..3, a dynamic T run at two lengths;
(b) the .tflite read back is the same op (types, constants, attributes) and computes the same
integers; (c) what the importer and the exporter refuse, each with the feature named.
"""
import dataclasses

import numpy as np
import pytest

from quantir.backends.tflite.export import export_tflite
from quantir.backends.tflite.model import Operator, Quantization
from quantir.backends.tflite.schema import BuiltinOperator as OP
from quantir.backends.tflite.schema import TensorType as TFLType
from quantir.backends.tflite.writer import ModelBuilder, write_model
from quantir.errors import UnsupportedOpError
from quantir.frontends.tflite import import_tflite
from quantir.ir.dialects import qnn, quant
from quantir.numerics import bias_qparams

from .qir import I32, QFunction, feeds_for, per_axis, qt

# ---------------------------------------------------------------------------------------------------
# the IR under test


def lstm_case(seed: int, t_len, batch, n_in: int, hidden: int, *, reverse=False, cell_scale_log2=-11,
              cell_clip=0.0):
    """float x -> qcast -> qnn.unidirectional_lstm -> dcast; weights quantized per gate from uniform
    floats, biases at input_scale x weight_scale, random input and output parameters."""
    rng = np.random.default_rng(seed)
    s_in, z_in = float(np.float32(rng.uniform(0.01, 0.03))), int(rng.integers(-20, 21))
    s_y, z_y = float(np.float32(rng.uniform(0.005, 0.01))), int(rng.integers(-10, 11))
    f = QFunction((t_len, batch, n_in), s_in, z_in)

    def gate_weights(shape, name):
        real = rng.uniform(-0.6, 0.6, shape) * rng.uniform(0.3, 1.0, (4, 1, 1))
        scales = (np.abs(real).reshape(4, -1).max(axis=1) / 127).astype(np.float32)
        ints = np.clip(np.round(real / scales[:, None, None]), -127, 127)
        return f.const(ints, per_axis(shape, scales), name), scales

    w, s_w = gate_weights((4, hidden, n_in), "w")
    r, _ = gate_weights((4, hidden, hidden), "r")
    s_b = np.asarray(bias_qparams(s_in, s_w)[0], np.float32)
    b = f.const(np.round(rng.uniform(-0.5, 0.5, (4, hidden)) / s_b[:, None]), per_axis((4, hidden), s_b, I32), "b")
    y = f.op(qnn.UNIDIRECTIONAL_LSTM, [f.q, w, r, b], qt((t_len, batch, hidden), s_y, z_y), "y",
             cell_scale_log2=cell_scale_log2, reverse=reverse, cell_clip=cell_clip)
    return f.finish(y), (s_in, z_in)


def lstm_op(module):
    (op,) = [op for op in module.main.ops if op.opdef is qnn.UNIDIRECTIONAL_LSTM]
    return op


def model_of(module):
    return export_tflite(module).model


def lstm_index(model) -> int:
    sg = model.subgraphs[0]
    (k,) = [k for k, op in enumerate(sg.operators) if model.operator_name(op) == "UNIDIRECTIONAL_SEQUENCE_LSTM"]
    return k


# ---------------------------------------------------------------------------------------------------
# the file written


def test_the_operator_is_the_converter_s_8x8_16_form():
    module, (s_in, _) = lstm_case(0, 4, 2, 3, 5, cell_scale_log2=-12, cell_clip=2.5)
    model = model_of(module)
    sg = model.subgraphs[0]
    op = sg.operators[lstm_index(model)]
    t = lambda i: sg.tensors[i]  # noqa: E731
    assert model.operator_codes[op.opcode_index].builtin_code == 44 and len(op.inputs) == 24
    assert [i for i, idx in enumerate(op.inputs) if idx < 0] == [9, 10, 11, 16, 17, 20, 21, 22, 23]
    w_type = lstm_op(module).operands[1].type.element_type
    for g in range(4):
        assert (t(op.inputs[1 + g]).shape, t(op.inputs[5 + g]).shape, t(op.inputs[12 + g]).shape) == \
            ((5, 3), (5, 5), (5,))
        assert t(op.inputs[1 + g]).quantization.scale == (w_type.scales[g],)
        assert t(op.inputs[12 + g]).type is TFLType.INT32
        assert t(op.inputs[12 + g]).quantization.scale[0] == pytest.approx(s_in * w_type.scales[g], rel=1e-6)
    out_state, cell_state = t(op.inputs[18]), t(op.inputs[19])
    y = t(op.outputs[0])
    assert out_state.is_variable and cell_state.is_variable and out_state.buffer == cell_state.buffer == 0
    assert (out_state.type, out_state.shape, out_state.quantization) == (TFLType.INT8, (2, 5), y.quantization)
    assert (cell_state.type, cell_state.shape) == (TFLType.INT16, (2, 5))
    assert cell_state.quantization == Quantization([2.0 ** -12], [0])
    assert len(op.intermediates) == 5
    assert [t(i).type for i in op.intermediates] == [TFLType.INT16] * 4 + [TFLType.INT8]
    assert all(t(i).quantization == Quantization([2.0 ** -12], [0]) for i in op.intermediates[:4])
    assert t(op.intermediates[4]).quantization == y.quantization
    o = op.options
    assert (o.fused_activation_function.name, o.cell_clip, o.proj_clip, o.time_major) == ("TANH", 2.5, 0.0, True)


def test_reverse_is_reverse_v2_on_the_time_axis_before_and_after():
    module, _ = lstm_case(1, 3, 1, 2, 2, reverse=True)
    model = model_of(module)
    names = [model.operator_name(op) for op in model.subgraphs[0].operators]
    assert names == ["QUANTIZE", "REVERSE_V2", "UNIDIRECTIONAL_SEQUENCE_LSTM", "REVERSE_V2", "DEQUANTIZE"]
    rev = model.subgraphs[0].operators[1]
    assert model.tensor_data(model.subgraphs[0].tensors[rev.inputs[1]]).tolist() == [0]


def test_a_dynamic_batch_is_refused_with_the_reason():
    module, _ = lstm_case(2, 3, None, 2, 2)
    with pytest.raises(UnsupportedOpError, match="dynamic batch.*variable tensors.*never resizes"):
        export_tflite(module)


# ---------------------------------------------------------------------------------------------------
# (a) LiteRT BUILTIN_REF against quantir's interpreter

oracle = pytest.mark.oracle
CASES = [  # seed, T, B, I, H, reverse, cell_scale_log2, cell_clip
    (10, 1, 1, 1, 1, False, -11, 0.0), (11, 2, 3, 3, 2, True, -11, 0.0), (12, 3, 2, 4, 3, False, -9, 0.0),
    (13, 4, 1, 2, 4, True, -15, 0.0), (14, 5, 3, 5, 5, False, -12, 0.5), (15, 6, 2, 3, 4, True, -13, 0.7),
    (16, 7, 1, 6, 3, False, -10, 0.0), (17, 8, 3, 4, 6, True, -11, 0.8), (18, 8, 2, 8, 8, False, -14, 0.0),
]


def assert_bit_exact(module, x: np.ndarray) -> None:
    from quantir.backends.tflite.litert import run_model_tensors
    from quantir.runtime import run
    ex = export_tflite(module)
    names = list(ex.bindings)
    _, theirs = run_model_tensors(ex.to_bytes(), [x], [ex.bindings[n][0] for n in names])
    ours = run(module, {"x": x}, intermediates=names)
    assert "y" in names
    for n in names:
        idx, perm = ex.bindings[n]
        assert perm is None
        assert ours[n].shape == theirs[idx].shape, (n, ours[n].shape, theirs[idx].shape)
        bad = np.count_nonzero(ours[n] != theirs[idx])
        assert bad == 0, f"{n}: {bad} of {ours[n].size} elements differ from LiteRT"


@oracle
@pytest.mark.parametrize("seed, t_len, batch, n_in, hidden, reverse, cs, clip", CASES)
def test_matches_litert(seed, t_len, batch, n_in, hidden, reverse, cs, clip):
    pytest.importorskip("ai_edge_litert.interpreter")
    module, (s_in, z_in) = lstm_case(seed, t_len, batch, n_in, hidden, reverse=reverse, cell_scale_log2=cs,
                                     cell_clip=clip)
    x = feeds_for(np.random.default_rng(seed + 1000), (t_len, batch, n_in), s_in, z_in)
    assert_bit_exact(module, x)


@oracle
@pytest.mark.parametrize("reverse", [False, True])
def test_a_dynamic_sequence_length_matches_litert_at_two_lengths(reverse):
    pytest.importorskip("ai_edge_litert.interpreter")
    module, (s_in, z_in) = lstm_case(20 + reverse, None, 2, 3, 4, reverse=reverse)
    x_type = model_of(module).subgraphs[0].tensors[0]
    assert x_type.shape_signature == (-1, 2, 3)
    rng = np.random.default_rng(7)
    for t_len in (3, 7):
        assert_bit_exact(module, feeds_for(rng, (t_len, 2, 3), s_in, z_in))


# ---------------------------------------------------------------------------------------------------
# (b) export -> import


def _same_op(a, b) -> None:
    assert a.attributes == b.attributes
    assert a.results[0].type == b.results[0].type
    assert a.operands[0].type == b.operands[0].type
    for va, vb in zip(a.operands[1:], b.operands[1:]):
        assert va.type.shape == vb.type.shape
        assert qnn.scales_of(va.type).tolist() == qnn.scales_of(vb.type).tolist()
        assert qnn.zero_points_of(va.type).tolist() == qnn.zero_points_of(vb.type).tolist()
        assert np.array_equal(quant.stored_constant(va), quant.stored_constant(vb))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("t_len", [5, None])
def test_export_import_gives_back_the_op(reverse, t_len):
    module, _ = lstm_case(30, t_len, 2, 3, 4, reverse=reverse, cell_scale_log2=-13, cell_clip=1.25)
    imported = import_tflite(export_tflite(module).to_bytes()).module
    _same_op(lstm_op(module), lstm_op(imported))
    kinds = [op.name for op in imported.main.ops if op.opdef.name.startswith(("qnn.", "nn."))]
    assert kinds == ["qnn.unidirectional_lstm"]   # the REVERSE_V2 pair is the op's reverse=True


@pytest.mark.parametrize("reverse", [False, True])
def test_the_imported_op_computes_the_same_integers(reverse):
    from quantir.runtime import run
    module, (s_in, z_in) = lstm_case(31, 6, 3, 4, 3, reverse=reverse, cell_scale_log2=-12)
    imported = import_tflite(export_tflite(module).to_bytes()).module
    x = feeds_for(np.random.default_rng(3), (6, 3, 4), s_in, z_in)
    assert np.array_equal(run(module, {"x": x})["out0"], run(imported, {"x": x})["out0"])


# ---------------------------------------------------------------------------------------------------
# (c) what the importer refuses


def _edit(model, *, inputs: dict | None = None, options: dict | None = None, tensors: dict | None = None,
          constants: dict | None = None, graph_outputs=None):
    """``model`` with the LSTM's ``inputs`` (slot -> tensor index) and ``options`` replaced, tensors
    replaced by field, and new ``constants`` (slot -> array, quantization) put at LSTM input slots."""
    sg = model.subgraphs[0]
    k = lstm_index(model)
    op = sg.operators[k]
    tens, buffers, new_inputs = list(sg.tensors), list(model.buffers), list(op.inputs)
    for slot, (array, q) in (constants or {}).items():
        buffers.append(np.ascontiguousarray(array).tobytes())
        tens.append(type(tens[0])(f"extra{slot}", array.shape, {np.dtype(np.int8): TFLType.INT8,
                                                               np.dtype(np.int16): TFLType.INT16,
                                                               np.dtype(np.int32): TFLType.INT32}[array.dtype],
                                  len(buffers) - 1, q))
        new_inputs[slot] = len(tens) - 1
    for slot, idx in (inputs or {}).items():
        new_inputs[slot] = idx
    for slot, fields in (tensors or {}).items():
        tens[new_inputs[slot]] = dataclasses.replace(tens[new_inputs[slot]], **fields)
    new_op = dataclasses.replace(op, inputs=tuple(new_inputs),
                                 options=dataclasses.replace(op.options, **(options or {})))
    operators = list(sg.operators)
    operators[k] = new_op
    sg = dataclasses.replace(sg, tensors=tuple(tens), operators=tuple(operators),
                             outputs=sg.outputs if graph_outputs is None else tuple(graph_outputs))
    return write_model(dataclasses.replace(model, subgraphs=(sg,), buffers=tuple(buffers)))


@pytest.fixture(scope="module")
def base():
    return model_of(lstm_case(40, 3, 2, 3, 4)[0])


H4 = 4


@pytest.mark.parametrize("edit, reason", [
    (dict(inputs={1: -1, 5: -1, 12: -1}), "CIFG"),
    (dict(constants={s: (np.ones(H4, np.int16), Quantization([0.01], [0])) for s in (9, 10, 11)}), "peephole"),
    (dict(constants={16: (np.ones((H4, H4), np.int8), Quantization([0.01], [0]))}), "projection"),
    (dict(constants={s: (np.ones(H4, np.int16), Quantization([0.01], [0])) for s in (20, 21, 22, 23)}),
     "layer normalization"),
    (dict(options={"time_major": False}), "batch-major"),
    (dict(options={"diagonal_recurrent_tensors": True}), "diagonal"),
    (dict(tensors={2: {"quantization": Quantization([0.01] * H4, [0] * H4, 0)}}), "per channel"),
    (dict(tensors={3: {"quantization": Quantization([0.01], [5])}}), "zero point 5"),
    (dict(tensors={19: {"quantization": Quantization([3e-4], [0])}}), "power of two"),
    (dict(tensors={18: {"quantization": Quantization([0.5], [0])}}), "output_state.*output's parameters"),
    (dict(tensors={18: {"is_variable": False}}), "variable tensor"),
])
def test_the_importer_names_what_it_refuses(base, edit, reason):
    with pytest.raises(UnsupportedOpError, match=reason):
        import_tflite(_edit(base, **edit))


def test_a_16x8_lstm_is_refused(base):
    sg = base.subgraphs[0]
    x_idx = sg.operators[lstm_index(base)].inputs[0]   # QUANTIZE's output: make it int16
    q16 = Quantization([1e-4], [0])
    tens = list(sg.tensors)
    tens[x_idx] = dataclasses.replace(tens[x_idx], type=TFLType.INT16, quantization=q16)
    model = dataclasses.replace(base, subgraphs=(dataclasses.replace(sg, tensors=tuple(tens)),))
    with pytest.raises(UnsupportedOpError, match="16x8"):
        import_tflite(write_model(model))


def _float_lstm(hybrid: bool) -> bytes:
    """A float32 LSTM (hybrid: its weights int8, per tensor) written from scratch."""
    t_len, batch, n_in, hidden = 2, 1, 3, 2
    b = ModelBuilder()
    x = b.add_tensor("x", (t_len, batch, n_in), np.float32)
    q = Quantization([0.01], [0])

    def weight(shape, name):
        return b.add_constant(name, np.ones(shape, np.int8), q) if hybrid else \
            b.add_constant(name, np.full(shape, 0.1, np.float32))

    inputs = [x] + [weight((hidden, n_in), f"wx{g}") for g in range(4)] + \
        [weight((hidden, hidden), f"wh{g}") for g in range(4)] + [-1] * 3 + \
        [b.add_constant(f"b{g}", np.zeros(hidden, np.float32)) for g in range(4)] + [-1, -1] + \
        [b.add_tensor(n, (batch, hidden), np.float32, is_variable=True) for n in ("h", "c")] + [-1] * 4
    y = b.add_tensor("y", (t_len, batch, hidden), np.float32)
    from quantir.backends.tflite.schema import ActivationFunctionType, UnidirectionalSequenceLSTMOptions
    options = UnidirectionalSequenceLSTMOptions(fused_activation_function=ActivationFunctionType.TANH,
                                                time_major=True)
    b.operators.append(Operator(b.opcode_index(OP.UNIDIRECTIONAL_SEQUENCE_LSTM), tuple(inputs), (y,), options))
    b.set_io([x], [y])
    return b.finish()


def test_a_float_lstm_is_refused():
    with pytest.raises(UnsupportedOpError, match="float UNIDIRECTIONAL_SEQUENCE_LSTM"):
        import_tflite(_float_lstm(hybrid=False))


def test_a_hybrid_lstm_is_refused():
    with pytest.raises(UnsupportedOpError, match="dynamic-range \\(hybrid\\) LSTM"):
        import_tflite(_float_lstm(hybrid=True))


def test_reverse_v2_alone_is_refused():
    b = ModelBuilder()
    q = Quantization([0.1], [0])
    x = b.add_tensor("x", (3, 2), np.int8, q)
    y = b.add_tensor("y", (3, 2), np.int8, q)
    b.add_operator(OP.REVERSE_V2, [x, b.add_constant("axis", np.asarray([0], np.int32))], [y])
    b.set_io([x], [y])
    with pytest.raises(UnsupportedOpError, match="REVERSE_V2 is read only as the time-axis pair"):
        import_tflite(b.finish())


def test_a_reversed_input_read_elsewhere_is_not_fused():
    module, _ = lstm_case(41, 3, 1, 2, 2, reverse=True)
    model = model_of(module)
    sg = model.subgraphs[0]
    reversed_input = sg.operators[lstm_index(model)].inputs[0]
    with pytest.raises(UnsupportedOpError, match="REVERSE_V2 is read only"):
        import_tflite(_edit(model, graph_outputs=[*sg.outputs, reversed_input]))
