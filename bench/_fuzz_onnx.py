"""The ONNX half of ``fuzz_models.py``: seeds, mutations and what quantir does with a mutant.

Seeds are small real models: the Fashion-MNIST CNN, the torch-exported test models (external
data embedded), a few hand-built ones (a CNN with shape arithmetic, a QDQ model, a shape-op
mix) and ONNX's own node-test models for ops quantir supports. A mutant is byte-level
(flips, truncation, splices, deletions) or structural (decode, damage one or a few fields
the way a careless exporter or a hostile file would, re-serialize).
"""
from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
NODE_TEST_SEEDS = 60
SAMPLES = 2
MAX_SAMPLE_ELEMENTS = 1 << 16

# Markers swapped for invalid UTF-8 after serialization (protobuf only takes str).
_BAD_UTF8 = {"\x01BAD1\x01": b"\xff\xfe", "\x01BAD2\x01": b"a\xc3(", "\x01BAD3\x01": b"\xed\xa0\x80"}
_ODD_NAMES = ["x\nquantir check: 0 violations", "\x1b[2J", "", " ", "a'b\\c", "é\u200b", "x" * 300,
              *_BAD_UTF8]
_OP_TYPES = ["Relu", "Conv", "Gemm", "MatMul", "Add", "Softmax", "Flatten", "Reshape", "Concat", "Slice", "Pad",
             "Tile", "MaxPool", "AveragePool", "LRN", "QuantizeLinear", "DequantizeLinear", "QLinearConv",
             "ConvTranspose", "Constant", "ConstantOfShape", "Expand", "Range", "Resize", "Gather", "Transpose",
             "Split", "Squeeze", "Unsqueeze", "Cast", "TopK", "Loop", "If", "NoSuchOp", "BatchNormalization"]
_DIMS = [0, 1, 2, 3, 5, -1, -7, 2**31 - 1, 2**40, 2**63 - 1]
_INTS = [0, 1, -1, 2, 7, -9, 255, 2**31 - 1, -(2**31), 2**62]


# -- seeds --------------------------------------------------------------------------------------

def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "seed", [vi(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [vi(n, TensorProto.FLOAT, s) for n, s in outputs],
                              [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", opset)])


def _hand_made() -> list[onnx.ModelProto]:
    r = np.random.default_rng(0)
    w = r.standard_normal((4, 1, 3, 3)).astype(np.float32)
    cnn = _model([
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], name="bn"),
        helper.make_node("Relu", ["n"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p"], ["sh"]),
        helper.make_node("Gather", ["sh", "zero"], ["n0"], axis=0),
        helper.make_node("Unsqueeze", ["n0", "zero1"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["p", "shape"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], name="fc", transB=1),
        helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=-1),
    ], [("x", [1, 1, 8, 8])], [("y", [1, 3])], [
        ("w", w), ("b", np.zeros(4, np.float32)), ("s", np.ones(4, np.float32)), ("bb", np.zeros(4, np.float32)),
        ("m", np.zeros(4, np.float32)), ("v", np.ones(4, np.float32)), ("zero", np.array(0, np.int64)),
        ("zero1", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64)),
        ("fw", r.standard_normal((3, 64)).astype(np.float32)), ("fb", np.zeros(3, np.float32))])
    qdq = _model([
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
        helper.make_node("Conv", ["xd", "wd"], ["c"], name="qconv"),
        helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"]),
    ], [("x", [1, 1, 6, 6])], [("y", [1, 4, 4, 4])], [
        ("xs", np.array(0.02, np.float32)), ("xz", np.array(0, np.int8)),
        ("wq", r.integers(-127, 127, (4, 1, 3, 3)).astype(np.int8)), ("ws", np.full(4, 0.01, np.float32)),
        ("wz", np.zeros(4, np.int8)), ("ys", np.array(0.05, np.float32)), ("yz", np.array(0, np.int8))])
    shapes = _model([
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="reflect"),
        helper.make_node("Slice", ["p", "st", "en"], ["s"]),
        helper.make_node("Tile", ["s", "rep"], ["t"]),
        helper.make_node("Transpose", ["t"], ["tr"], perm=[0, 1, 3, 2]),
        helper.make_node("LRN", ["tr"], ["l"], size=3),
        helper.make_node("Resize", ["l", "", "scales"], ["y"], mode="nearest"),
    ], [("x", [1, 2, 4, 4])], [("y", None)], [
        ("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)), ("st", np.array([1, 1], np.int64)),
        ("en", np.array([5, 5], np.int64)), ("rep", np.array([1, 1, 2, 1], np.int64)),
        ("scales", np.array([1, 1, 2, 2], np.float32))])
    return [cnn, qdq, shapes]


def _node_tests() -> list[onnx.ModelProto]:
    try:
        from quantir.frontends.onnx.conformance import supported_cases
        cases = supported_cases(ROOT / ".cache")
    except Exception:  # noqa: BLE001 - the node tests are a bonus
        return []
    picked = random.Random(0).sample(cases, min(NODE_TEST_SEEDS, len(cases)))
    return [c.model for c in picked]


@lru_cache(maxsize=1)
def _seeds() -> tuple[bytes, ...]:
    out = [(ROOT / "models" / "fashion_mnist_cnn.onnx").read_bytes(),
           (ROOT / "tests" / "frontends" / "data" / "torch_legacy_small.onnx").read_bytes()]
    dynamo = onnx.load(str(ROOT / "tests" / "frontends" / "data" / "torch_dynamo_small.onnx"))  # data embedded
    out.append(dynamo.SerializeToString())
    out += [m.SerializeToString() for m in _hand_made()]
    # the whole models weigh as much as the one-node tests together: they reach calibration
    return tuple(out * 10 + [m.SerializeToString() for m in _node_tests()])


def seeds() -> list[bytes]:
    return list(_seeds())


# -- mutations ----------------------------------------------------------------------------------

def mutate(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.35:
        return _bytes_mutation(data, rng)
    try:
        model = onnx.ModelProto.FromString(data)
    except Exception:  # noqa: BLE001 - an earlier mutant that no longer decodes
        return _bytes_mutation(data, rng)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        try:
            rng.choice(_STRUCTURAL)(model, rng)
        except (ValueError, TypeError, IndexError):
            pass    # protobuf refused the value (a closed enum, a range): keep the mutant as it is
    out = model.SerializeToString()
    for marker, bad in _BAD_UTF8.items():
        out = out.replace(marker.encode(), bad)   # same length: no length prefix changes
    return out


def _bytes_mutation(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:
        del b[rng.randrange(len(b)):]
    elif kind == 2:
        other = rng.choice(_seeds())
        i, j = rng.randrange(len(other)), rng.randrange(len(b))
        b[j:j] = other[i:i + rng.randint(1, 256)]
    elif kind == 3:
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 64)]
    else:
        i = rng.randrange(len(b))
        b[i:i + 1] = bytes([rng.choice((0x7F, 0x80, 0xFF))]) * rng.randint(1, 10)
    return bytes(b)


def _pick(seq, rng):
    return seq[rng.randrange(len(seq))] if len(seq) else None


def _tensors(model):
    out = list(model.graph.initializer)
    for n in model.graph.node:
        out += [a.t for a in n.attribute if a.type == AttributeProto.TENSOR]
    return out


def _m_dims(model, rng):
    t = _pick(_tensors(model), rng)
    if t is not None and len(t.dims):
        t.dims[rng.randrange(len(t.dims))] = rng.choice(_DIMS + [t.dims[0] + 1, max(t.dims[0] - 1, 0)])
    elif t is not None:
        t.dims.append(rng.choice(_DIMS))


def _m_data(model, rng):
    t = _pick(_tensors(model), rng)
    if t is None:
        return
    if t.HasField("raw_data"):
        cut = rng.randrange(len(t.raw_data) + 1) if t.raw_data else 0
        t.raw_data = t.raw_data[:cut] if rng.random() < 0.5 else t.raw_data + bytes(rng.randint(1, 9))
    else:
        t.raw_data = bytes(rng.randint(0, 64))
    if rng.random() < 0.2:
        t.raw_data = np.array([rng.choice([np.nan, np.inf, 1e38, 0.0, -0.0, 1e-45])] * (len(t.raw_data) // 4),
                              np.float32).tobytes()


def _m_data_type(model, rng):
    t = _pick(_tensors(model), rng)
    if t is not None:
        t.data_type = rng.choice(list(TensorProto.DataType.values()) + [0, 99])


def _m_input(model, rng):
    n = _pick(model.graph.node, rng)
    if n is None:
        return
    if len(n.input) and rng.random() < 0.6:
        i = rng.randrange(len(n.input))
        if rng.random() < 0.5:
            del n.input[i]
        else:
            n.input[i] = rng.choice(["", "nowhere", *[v.name for v in model.graph.input]])
    else:
        n.input.append(rng.choice([*[v.name for v in model.graph.input], "", "nowhere"]))


def _m_attribute(model, rng):
    n = _pick([n for n in model.graph.node if len(n.attribute)], rng)
    if n is None:
        return
    i = rng.randrange(len(n.attribute))
    a = n.attribute[i]
    kind = rng.randrange(5)
    if kind == 0:
        del n.attribute[i]
    elif kind == 1:           # the right name, the wrong kind: strides=2, group="SAME", pads=1.5
        value = rng.choice([2, "SAME", 1.5, [1, 2], [0.5], ["a"]])
        n.attribute[i].CopyFrom(helper.make_attribute(a.name, value))
    elif kind == 2:           # the kind field says one thing, the value is another
        a.type = rng.choice(list(AttributeProto.AttributeType.values()))
    elif kind == 3:
        if a.type == AttributeProto.INTS and len(a.ints):
            a.ints[rng.randrange(len(a.ints))] = rng.choice(_INTS)
        elif a.type == AttributeProto.INT:
            a.i = rng.choice(_INTS)
        elif a.type == AttributeProto.FLOAT:
            a.f = rng.choice([float("nan"), float("inf"), 0.0, -1.0, 1e38])
        elif a.type == AttributeProto.STRING:
            a.s = rng.choice(list(_BAD_UTF8)).encode() if rng.random() < 0.5 else b"NOTAMODE"
    else:
        n.attribute.append(helper.make_attribute(rng.choice(["axis", "perm", "mode", "bogus", "value_string"]),
                                                 rng.choice([1, [3, 2], "edge", "s"])))


def _m_names(model, rng):
    g = model.graph
    name = rng.choice(_ODD_NAMES)
    kind = rng.randrange(5)
    if kind == 0 and len(g.node):
        _pick(g.node, rng).name = name
    elif kind == 1 and len(g.input):
        old = _pick(g.input, rng)
        _rename(g, old.name, name)
    elif kind == 2 and len(g.initializer):
        _rename(g, _pick(g.initializer, rng).name, name)
    elif kind == 3 and len(g.node):
        _pick(g.node, rng).op_type = name
    else:
        g.name = name


def _rename(g, old: str, new: str) -> None:
    for coll in (g.input, g.output, g.initializer, g.value_info):
        for v in coll:
            if v.name == old:
                v.name = new
    for n in g.node:
        for i, x in enumerate(n.input):
            if x == old:
                n.input[i] = new
        for i, x in enumerate(n.output):
            if x == old:
                n.output[i] = new


def _m_op_type(model, rng):
    n = _pick(model.graph.node, rng)
    if n is not None:
        n.op_type = rng.choice(_OP_TYPES)


def _m_opset(model, rng):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = rng.choice([0, -1, 1, 6, 7, 9, 11, 12, 13, 17, 21, 22, 99, 2**40])
            return


def _m_graph_shape(model, rng):
    v = _pick(list(model.graph.input) + list(model.graph.output), rng)
    if v is None:
        return
    tt = v.type.tensor_type
    if rng.random() < 0.3:
        tt.elem_type = rng.choice([0, TensorProto.STRING, TensorProto.INT8, TensorProto.BFLOAT16, TensorProto.DOUBLE])
    elif len(tt.shape.dim):
        d = tt.shape.dim[rng.randrange(len(tt.shape.dim))]
        if rng.random() < 0.3:
            d.dim_param = rng.choice(["N", *_BAD_UTF8])
        else:
            d.dim_value = rng.choice(_DIMS)
    else:
        v.type.ClearField("tensor_type")


def _m_nodes(model, rng):
    nodes = model.graph.node
    if not len(nodes):
        return
    kind = rng.randrange(3)
    i = rng.randrange(len(nodes))
    if kind == 0:
        del nodes[i]
    elif kind == 1:
        nodes.add().CopyFrom(nodes[i])
    else:
        j = rng.randrange(len(nodes))
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(nodes[i])
        b.CopyFrom(nodes[j])
        nodes[i].CopyFrom(b)
        nodes[j].CopyFrom(a)


def _m_constant(model, rng):
    n = model.graph.node.add()
    out = rng.choice([*[x for node in model.graph.node for x in node.input], "c_out"] or ["c_out"])
    value = rng.choice([{"value_string": "hi"}, {"value_strings": ["a", "b"]}, {"value_float": 1.0},
                        {"value_ints": [1, -1]}, {"value": numpy_helper.from_array(np.zeros((2, 2), np.float32))},
                        {"sparse_value": helper.make_sparse_tensor(
                            numpy_helper.from_array(np.ones(1, np.float32)),
                            numpy_helper.from_array(np.zeros(1, np.int64)), [2])}, {}])
    n.CopyFrom(helper.make_node("Constant", [], [out], name="const", **value))
    nodes = list(model.graph.node)
    model.graph.ClearField("node")
    model.graph.node.extend([nodes[-1]] + nodes[:-1])


_STRUCTURAL = [_m_dims, _m_data, _m_data_type, _m_input, _m_attribute, _m_attribute, _m_names, _m_op_type,
               _m_opset, _m_graph_shape, _m_nodes, _m_constant]


# -- what quantir does with it --------------------------------------------------------------------

def warm_up() -> None:
    import quantir.api  # noqa: F401 - import once per worker, not per input
    import quantir.frontends.onnx  # noqa: F401
    import quantir.quantize.check_qdq  # noqa: F401
    import quantir.text.printer  # noqa: F401


def exercise(path: str, workdir: str) -> None:
    """``quantir show``, ``check`` and ``quantize`` (2 random samples, numpy interpreter) on ``path``."""
    import quantir as qr
    from quantir.frontends.onnx import load_onnx
    from quantir.ir.dialects.nn_base import element_dtype
    from quantir.quantize.calibrate import input_specs
    from quantir.quantize.check_qdq import check_qdq
    from quantir.text.printer import print_module

    module = qr.load(path)
    print_module(module, large_elements="elide", threshold=16)
    check_qdq(load_onnx(path, optimize=False, keep_qdq=True))
    rng = np.random.default_rng(0)
    feeds = [{} for _ in range(SAMPLES)]
    for spec in input_specs(module.main):
        shape = tuple(1 if d is None else d for d in (spec.type.shape or ()))
        if np.prod(shape, dtype=np.float64) > MAX_SAMPLE_ELEMENTS:
            return          # too big to calibrate cheaply; load, show and check ran
        dtype = element_dtype(spec.type)
        for feed in feeds:
            feed[spec.name] = rng.standard_normal(shape).astype(dtype)
    result = qr.quantize(path, feeds, qr.Config(engine="interpreter"))
    result.summary()
