"""UNIDIRECTIONAL_SEQUENCE_LSTM, full-integer 8x8_16 path, against LiteRT's BUILTIN_REF (docs/numerics.md §2.27).

The one-op models are assembled here with LiteRT's own flatbuffer schema (object API): quantir's writer has
no option table for the op, and the op needs two variable input tensors (output state, cell state) and five
intermediate tensors. Every comparison covers the output sequence and both final states. Also: a second
invocation continuing from the states, LiteRT's default (reset) states, Prepare's refusals and what LiteRT
does with the parameters it does not refuse but leaves undefined, and hand-checked cell-update vectors.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .qk_oracle import assert_same, hsettings, int8_data, log_uniform, seeds, zero_points
from quantir.numerics.gemmlowp16 import logistic_16, tanh_16
from quantir.runtime import qkernels as qk
from quantir.runtime.qkernels.unidirectional_lstm import lstm_cell_scale_log2

litert = pytest.importorskip("ai_edge_litert.interpreter")
schema = pytest.importorskip("ai_edge_litert.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")

pytestmark = pytest.mark.oracle

NAME = "UNIDIRECTIONAL_SEQUENCE_LSTM"
_TYPES = {np.dtype(np.int8): schema.TensorType.INT8, np.dtype(np.int16): schema.TensorType.INT16,
          np.dtype(np.int32): schema.TensorType.INT32}
OUTPUT_STATE, CELL_STATE = 18, 19   # the op's variable inputs


def lstm_model(steps, batch, n_in, hidden, *, s_in, zp_in, s_wi, s_wr, s_os, zp_os, cell_scale, w_in, w_rec, bias,
               s_hid=None, zp_hid=None, time_major=True, cell_clip=0.0, proj_clip=0.0, n_intermediates=5,
               hidden_quantized=True) -> tuple[bytes, int, int]:
    """The one-op model: 24 inputs (absent ones -1), gate order (input, forget, cell, output); returns the
    flatbuffer and the tensor indices of the output state and the cell state."""
    s_hid = s_os if s_hid is None else s_hid
    zp_hid = zp_os if zp_hid is None else zp_hid
    m = schema.ModelT()
    m.version = 3
    m.buffers = [schema.BufferT()]
    sg = schema.SubGraphT()
    sg.tensors = []

    def tensor(shape, dtype, scale=None, zp=0, data=None, variable=False):
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = f"t{len(sg.tensors)}", list(shape), _TYPES[np.dtype(dtype)], 0
        if data is not None:
            buf = schema.BufferT()
            buf.data = np.ascontiguousarray(data, dtype=dtype).view(np.uint8).ravel().tolist()
            m.buffers.append(buf)
            t.buffer = len(m.buffers) - 1
        if scale is not None:
            q = schema.QuantizationParametersT()
            q.scale, q.zeroPoint = [float(scale)], [int(zp)]
            t.quantization = q
        t.isVariable = variable
        sg.tensors.append(t)
        return len(sg.tensors) - 1

    x_shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    ins = [tensor(x_shape, np.int8, s_in, zp_in)]
    ins += [tensor((hidden, n_in), np.int8, s_wi[g], 0, w_in[g]) for g in range(4)]
    ins += [tensor((hidden, hidden), np.int8, s_wr[g], 0, w_rec[g]) for g in range(4)]
    ins += [-1, -1, -1]                                                         # peephole
    ins += [tensor((hidden,), np.int32, float(np.float32(s_in) * np.float32(s_wi[g])), 0, bias[g]) for g in range(4)]
    ins += [-1, -1]                                                             # projection
    ins += [tensor((batch, hidden), np.int8, s_os, zp_os, variable=True),
            tensor((batch, hidden), np.int16, cell_scale, 0, variable=True)]
    ins += [-1, -1, -1, -1]                                                     # layer norm
    out = tensor((steps, batch, hidden) if time_major else (batch, steps, hidden), np.int8, s_os, zp_os)
    inter = [tensor((batch, hidden), np.int16, 2.0**-12, 0) for _ in range(4)]
    inter.append(tensor((batch, hidden), np.int8, s_hid, zp_hid) if hidden_quantized
                 else tensor((batch, hidden), np.int8))
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs, op.intermediates = 0, ins, [out], inter[:n_intermediates]
    op.builtinOptionsType = schema.BuiltinOptions.UnidirectionalSequenceLSTMOptions
    o = schema.UnidirectionalSequenceLSTMOptionsT()
    o.fusedActivationFunction = schema.ActivationFunctionType.TANH
    o.cellClip, o.projClip = float(cell_clip), float(proj_clip)
    o.timeMajor, o.asymmetricQuantizeInputs = time_major, False
    op.builtinOptions = o
    sg.operators, sg.inputs, sg.outputs = [op], [ins[0]], [out]
    oc = schema.OperatorCodeT()
    oc.builtinCode = schema.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM
    oc.deprecatedBuiltinCode, oc.version = min(oc.builtinCode, 127), 3
    m.operatorCodes, m.subgraphs = [oc], [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output()), ins[OUTPUT_STATE], ins[CELL_STATE]


def run_litert(model: bytes, h_index: int, c_index: int, inputs, h0=None, c0=None):
    """One interpreter (fresh variables: LiteRT resets an int8 state to its zero point, int16 to 0), the initial
    states set when given, then one invoke per input; returns (output, output state, cell state) per invoke."""
    interp = litert.Interpreter(model_content=model, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    if h0 is not None:
        interp.set_tensor(h_index, h0)
    if c0 is not None:
        interp.set_tensor(c_index, c0)
    x_index = interp.get_input_details()[0]["index"]
    out_index = interp.get_output_details()[0]["index"]
    results = []
    for x in inputs:
        interp.set_tensor(x_index, x)
        interp.invoke()
        results.append((interp.get_tensor(out_index).copy(), interp.get_tensor(h_index).copy(),
                        interp.get_tensor(c_index).copy()))
    return results


def assert_same_lstm(got, expected):
    for ours, theirs in zip(got, expected):
        assert_same(NAME, ours, theirs)


@st.composite
def lstm_cases(draw):
    """Scales over decades (input 1e-3..0.5, weights 1e-4..0.1 per gate, output state 2e-3..0.05), zero points
    with the ends, cell scales 2**-15..2**-9, shapes T 1..12, B 1..3, I 1..40, H 1..40, both layouts, clip or not."""
    p = dict(
        steps=draw(st.integers(1, 12)), batch=draw(st.integers(1, 3)), n_in=draw(st.integers(1, 40)),
        hidden=draw(st.integers(1, 40)), s_in=draw(log_uniform(1e-3, 0.5)), zp_in=draw(zero_points),
        s_wi=[draw(log_uniform(1e-4, 0.1)) for _ in range(4)], s_wr=[draw(log_uniform(1e-4, 0.1)) for _ in range(4)],
        s_os=draw(log_uniform(2e-3, 0.05)), zp_os=draw(zero_points), cs=draw(st.integers(-15, -9)),
        time_major=draw(st.booleans()),
        cell_clip=draw(st.one_of(st.just(0.0), st.floats(1e-4, 20.0).map(lambda v: float(np.float32(v))))),
    )
    if draw(st.integers(0, 4)) == 0:   # a hidden intermediate that differs from the output state
        p["s_hid"], p["zp_hid"] = draw(log_uniform(2e-3, 0.05)), draw(zero_points)
    return p


def _data(rng, p):
    """Weights, realistic biases (a real bias of about N(0, 1) over s_in·s_w), input and initial states."""
    steps, batch, n_in, hidden = p["steps"], p["batch"], p["n_in"], p["hidden"]
    w_in = int8_data(rng, (4, hidden, n_in), -127, 127)
    w_rec = int8_data(rng, (4, hidden, hidden), -127, 127)
    bias = np.stack([np.round(rng.normal(0.0, 1.0, hidden) / (np.float32(p["s_in"]) * np.float32(p["s_wi"][g])))
                     for g in range(4)]).astype(np.int32)
    x = int8_data(rng, (steps, batch, n_in) if p["time_major"] else (batch, steps, n_in))
    h0 = int8_data(rng, (batch, hidden))
    c0 = rng.integers(-32768, 32768, (batch, hidden)).astype(np.int16)
    return w_in, w_rec, bias, x, h0, c0


def _prepare(p):
    return qk.prepare_unidirectional_lstm(p["s_in"], p["zp_in"], p["s_wi"], p["s_wr"], p["s_os"], p["zp_os"], p["cs"],
                                          p.get("s_hid", p["s_os"]), p.get("zp_hid", p["zp_os"]), p["cell_clip"])


def _model(p, w_in, w_rec, bias):
    return lstm_model(p["steps"], p["batch"], p["n_in"], p["hidden"], s_in=p["s_in"], zp_in=p["zp_in"],
                      s_wi=p["s_wi"], s_wr=p["s_wr"], s_os=p["s_os"], zp_os=p["zp_os"], cell_scale=2.0 ** p["cs"],
                      w_in=w_in, w_rec=w_rec, bias=bias, s_hid=p.get("s_hid"), zp_hid=p.get("zp_hid"),
                      time_major=p["time_major"], cell_clip=p["cell_clip"])


@hsettings(400)
@given(p=lstm_cases(), seed=seeds)
def test_lstm_matches_litert(p, seed):
    rng = np.random.default_rng(seed)
    w_in, w_rec, bias, x, h0, c0 = _data(rng, p)
    params = _prepare(p)
    got = qk.unidirectional_lstm(x, w_in, w_rec, bias, h0, c0, time_major=p["time_major"], **params.as_kwargs())
    (expected,) = run_litert(*_model(p, w_in, w_rec, bias), [x], h0, c0)
    assert_same_lstm(got, expected)


@hsettings(40)
@given(p=lstm_cases(), seed=seeds)
def test_second_invoke_continues_from_the_states(p, seed):
    """The states are variable tensors: a second invoke starts from the first one's final states."""
    rng = np.random.default_rng(seed)
    w_in, w_rec, bias, x, h0, c0 = _data(rng, p)
    x2 = int8_data(rng, x.shape)
    kw = dict(time_major=p["time_major"], **_prepare(p).as_kwargs())
    first = qk.unidirectional_lstm(x, w_in, w_rec, bias, h0, c0, **kw)
    second = qk.unidirectional_lstm(x2, w_in, w_rec, bias, first[1], first[2], **kw)
    expected = run_litert(*_model(p, w_in, w_rec, bias), [x, x2], h0, c0)
    assert_same_lstm(first, expected[0])
    assert_same_lstm(second, expected[1])


@pytest.mark.parametrize("steps, batch, n_in, hidden", [
    (64, 4, 96, 256),   # the input part spans 65,536 values per gate: the compiled requantization
    (3, 2, 1100, 8),    # I·128·127 >= 2**24: the products are exact in float64, not float32
])
def test_large_shapes(steps, batch, n_in, hidden):
    p = dict(steps=steps, batch=batch, n_in=n_in, hidden=hidden, s_in=0.02, zp_in=-9,
             s_wi=[0.002, 0.003, 0.0025, 0.004], s_wr=[0.01, 0.008, 0.012, 0.009], s_os=1 / 128, zp_os=2, cs=-12,
             time_major=True, cell_clip=0.0)
    rng = np.random.default_rng(steps)
    w_in, w_rec, bias, x, h0, c0 = _data(rng, p)
    got = qk.unidirectional_lstm(x, w_in, w_rec, bias, h0, c0, **_prepare(p).as_kwargs())
    (expected,) = run_litert(*_model(p, w_in, w_rec, bias), [x], h0, c0)
    assert_same_lstm(got, expected)


def test_default_states_are_the_zero_points():
    """Without set states, LiteRT starts from its reset values: the output state's zero point and cell 0."""
    p = dict(steps=5, batch=2, n_in=7, hidden=6, s_in=0.03, zp_in=-128, s_wi=[0.004, 0.01, 0.006, 0.02],
             s_wr=[0.01, 0.003, 0.02, 0.008], s_os=1 / 128, zp_os=17, cs=-11, time_major=False, cell_clip=0.0)
    w_in, w_rec, bias, x, _, _ = _data(np.random.default_rng(3), p)
    h0 = np.full((2, 6), 17, np.int8)
    c0 = np.zeros((2, 6), np.int16)
    got = qk.unidirectional_lstm(x, w_in, w_rec, bias, h0, c0, time_major=False, **_prepare(p).as_kwargs())
    (expected,) = run_litert(*_model(p, w_in, w_rec, bias), [x])
    assert_same_lstm(got, expected)


# ---------------------------------------------------------------------------
# Refusals, and what LiteRT does not refuse

REFUSAL_CASE = dict(steps=2, batch=1, n_in=3, hidden=2, s_in=0.05, zp_in=3, s_wi=[0.01] * 4, s_wr=[0.02] * 4,
                    s_os=1 / 128, zp_os=0, cs=-11, time_major=True, cell_clip=0.0)


def _refusal_model(**changes):
    p = dict(REFUSAL_CASE)
    w_in, w_rec, bias, x, h0, c0 = _data(np.random.default_rng(0), p)
    model_kw = dict(s_in=p["s_in"], zp_in=p["zp_in"], s_wi=p["s_wi"], s_wr=p["s_wr"], s_os=p["s_os"], zp_os=p["zp_os"],
                    cell_scale=2.0 ** p["cs"], w_in=w_in, w_rec=w_rec, bias=bias)
    model_kw.update(changes)
    return lstm_model(p["steps"], p["batch"], p["n_in"], p["hidden"], **model_kw), x


def test_negative_cell_clip_is_refused_by_both():
    with pytest.raises(qk.QKernelError, match="cell_clip"):
        qk.prepare_unidirectional_lstm(0.05, 3, [0.01] * 4, [0.02] * 4, 1 / 128, 0, -11, 1 / 128, 0, cell_clip=-1.0)
    model, x = _refusal_model(cell_clip=-1.0)
    with pytest.raises(RuntimeError, match="cell_clip >= 0"):
        run_litert(*model, [x])


@pytest.mark.parametrize("change, message", [
    (dict(n_intermediates=4), "num_intermediate_tensors == 5"),
    (dict(hidden_quantized=False), "quantization.type != kTfLiteNoQuantization"),
    (dict(proj_clip=-1.0), "proj_clip >= 0"),
])
def test_litert_refuses_malformed_models(change, message):
    """Structural checks the exporter must meet (the kernel has no such parameter): five intermediates, the
    fifth quantized, a non-negative projection clip."""
    model, x = _refusal_model(**change)
    with pytest.raises(RuntimeError, match=message):
        run_litert(*model, [x])


def test_cell_scale_not_a_power_of_two():
    """Prepare's CheckedLog2 fails, but lstm_eval ignores the status of PopulateQuantizedLstmParams8x8_16:
    LiteRT runs with every multiplier left at zero (an all-zero output). quantir refuses the scale."""
    with pytest.raises(qk.QKernelError, match="not a power of two"):
        lstm_cell_scale_log2(2.0**-11 * 1.3)
    assert lstm_cell_scale_log2(2.0**-11 * 1.0005) == -11     # within CheckedLog2's 1e-3 (in log2)
    model, x = _refusal_model(cell_scale=2.0**-11 * 1.3)
    out, h, c = run_litert(*model, [x])[0]
    assert not out.any() and not h.any() and not c.any()


@pytest.mark.parametrize("cs", [-16, -8])
def test_cell_scale_outside_apply_tanh_is_refused(cs):
    """ApplyTanh(15 + cs) handles 0..6 integer bits; outside, LiteRT leaves its buffer unwritten (it then reads
    the input gate's values as tanh(c)): quantir refuses."""
    with pytest.raises(qk.QKernelError, match="ApplyTanh"):
        qk.prepare_unidirectional_lstm(0.05, 3, [0.01] * 4, [0.02] * 4, 1 / 128, 0, cs, 1 / 128, 0)
    model, x = _refusal_model(cell_scale=2.0**cs)
    run_litert(*model, [x])   # not refused by LiteRT


# ---------------------------------------------------------------------------
# Hand-checked vectors: zero weights and biases make every gate 0, so i = f = o = sigmoid(0) = 16384 (1/2 in
# Q0.15) and g = tanh(0) = 0; the cell update is then c' = RDBPOT(16384·c, 15) = c/2 rounded half away from
# zero, clipped to the quantized clip.

def _zero_lstm(c0, cell_clip=0.0, cs=-11):
    batch, hidden = c0.shape
    p = dict(steps=1, batch=batch, n_in=1, hidden=hidden, s_in=0.05, zp_in=0, s_wi=[0.01] * 4, s_wr=[0.02] * 4,
             s_os=1 / 128, zp_os=0, cs=cs, time_major=True, cell_clip=cell_clip)
    w_in = np.zeros((4, hidden, 1), np.int8)
    w_rec = np.zeros((4, hidden, hidden), np.int8)
    bias = np.zeros((4, hidden), np.int32)
    x = np.full((1, batch, 1), 99, np.int8)
    h0 = np.full((batch, hidden), -7, np.int8)
    params = _prepare(p)
    got = qk.unidirectional_lstm(x, w_in, w_rec, bias, h0, c0, **params.as_kwargs())
    (expected,) = run_litert(*_model(p, w_in, w_rec, bias), [x], h0, c0)
    assert_same_lstm(got, expected)
    return params, got


def test_gates_at_zero():
    assert int(logistic_16(0, 3)) == 16384 and int(tanh_16(0, 3)) == 0


def test_cell_update_rounds_half_away_from_zero():
    c0 = np.array([[-3, 3, -1, 1, 5, -32768, 32767]], np.int16)
    _, (_, h, c) = _zero_lstm(c0)
    assert c.tolist() == [[-2, 2, -1, 1, 3, -16384, 16384]]
    # h = rha(16384·tanh(c)·2**-30 / 2**-7): 0 for the small cells; tanh(±8) ≈ ±1 gives ±64
    assert h.tolist() == [[0, 0, 0, 0, 0, -64, 64]]


def test_cell_clip_is_truncated_then_applied():
    # 0.004 / 2**-11 = 8.192 -> 8 (float32 quotient, truncated); 100/2 = 50 -> 8, -100/2 -> -8, 15/2 = 7.5 -> 8
    params, (_, _, c) = _zero_lstm(np.array([[100, -100, 15, 3]], np.int16), cell_clip=0.004)
    assert params.quantized_cell_clip == 8
    assert c.tolist() == [[8, -8, 8, 2]]


def test_prepare_multipliers():
    """Gate multipliers f32(s_w·s) / 2**-12 and the hidden one f32(2**-30 / s_hidden), through QuantizeMultiplier."""
    p = qk.prepare_unidirectional_lstm(0.5, 0, [2.0**-13] * 4, [2.0**-10] * 4, 2.0**-7, 0, -11, 2.0**-7, 0)
    assert p.input_multiplier.tolist() == [1 << 30] * 4 and p.input_shift.tolist() == [-1] * 4     # 0.25
    assert p.recurrent_multiplier.tolist() == [1 << 30] * 4 and p.recurrent_shift.tolist() == [-4] * 4  # 2**-5
    assert (p.hidden_multiplier, p.hidden_shift) == (1 << 30, -22)                                     # 2**-23
