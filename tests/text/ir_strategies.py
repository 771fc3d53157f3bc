"""Hypothesis strategies: random small but valid modules built through the IR API.

Everything drawn here is valid for MLIR too (signless constants, private declarations, quant
casts whose types agree), so the same modules serve the round-trip property and the iree-opt
oracle.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from quantir.ir import (ArrayAttr, BoolAttr, DenseArrayAttr, DenseElementsAttr, DictAttr, FloatAttr,
                        Function, IntegerAttr, Module, StringAttr, SymbolRefAttr, TypeAttr, UnitAttr,
                        dialects, unregistered)
from quantir.text.numbers import canonical_int, element_dtype, round_float
from quantir.types import (FloatType, FunctionType, IndexType, IntegerType, TensorType,
                           UniformQuantizedType, bf16, f16, f32, f64, i1, i8, i16, i32, i64, index)

FLOATS = [f16, bf16, f32, f64]
SIGNLESS = [i1, i8, i16, i32, i64, IntegerType(4)]
INTS = SIGNLESS + [IntegerType(8, "unsigned"), IntegerType(16, "signed")]
SCALARS = FLOATS + INTS + [index]

names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
special_floats = st.sampled_from([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, 5e-324,
                                  1.0e38, 0.1, 65504.0, 12345678.0, 0.123456789])
doubles = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), special_floats)


def _int_range(t):
    if isinstance(t, IndexType):
        return -(1 << 63), (1 << 63) - 1
    if t.width == 1:
        return 0, 1
    if t.signedness == "unsigned":
        return 0, (1 << t.width) - 1
    return -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1


@st.composite
def int_attrs(draw, types=INTS + [index]):
    t = draw(st.sampled_from(types))
    lo, hi = _int_range(t)
    return IntegerAttr(draw(st.integers(lo, hi)), t)


@st.composite
def float_attrs(draw, types=FLOATS):
    t = draw(st.sampled_from(types))
    return FloatAttr(round_float(draw(doubles), t), t)


@st.composite
def arrays(draw, element_type, shape):
    dtype = element_dtype(element_type)
    n = int(np.prod(shape)) if shape else 1
    if dtype == np.bool_:
        flat = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    elif dtype.kind == "f":
        raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
        flat = np.frombuffer(raw, dtype=dtype).copy()
    else:
        if isinstance(element_type, (IntegerType, IndexType)):
            lo, hi = _int_range(element_type)
        else:
            lo, hi = 0, (1 << (8 * dtype.itemsize)) - 1
        lo, hi = max(lo, np.iinfo(dtype).min), min(hi, np.iinfo(dtype).max)
        flat = np.array(draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)), dtype=dtype)
    if n > 1 and draw(st.booleans()):
        flat[:] = flat[0]  # splats are common in real models
    return flat.reshape(shape)


static_shapes = st.lists(st.integers(0, 3), max_size=3).map(tuple)


@st.composite
def elements_attrs(draw, element_types=SIGNLESS + FLOATS + [index], shapes=static_shapes):
    et = draw(st.sampled_from(element_types))
    shape = draw(shapes)
    return DenseElementsAttr(draw(arrays(et, shape)), TensorType(shape, et))


@st.composite
def dense_array_attrs(draw):
    t = draw(st.sampled_from([i1, i8, i16, i32, i64, f16, bf16, f32, f64]))
    n = draw(st.integers(0, 4))
    if isinstance(t, FloatType):
        values = [round_float(v, t) for v in draw(st.lists(doubles, min_size=n, max_size=n))]
    else:
        lo, hi = _int_range(t)
        values = draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
        if t.width == 1:
            values = [bool(v) for v in values]
    return DenseArrayAttr(t, tuple(values))


@st.composite
def quant_types(draw, expressed=None):
    expressed = expressed or draw(st.sampled_from([f32, f16]))
    storage = draw(st.sampled_from(["i8", "u8", "i16"]))
    st_type = IntegerType(int(storage[1:]))
    signed = storage[0] == "i"
    scale = draw(st.floats(min_value=1e-3, max_value=100.0, allow_nan=False))
    zp = draw(st.integers(-128, 127))
    return UniformQuantizedType(storage_type=st_type, expressed_type=expressed, is_signed=signed,
                                scale=scale, zero_point=zp)


@st.composite
def types(draw):
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.sampled_from(SCALARS))
    if kind == 1:
        return TensorType(draw(st.lists(st.one_of(st.integers(0, 4), st.none()), max_size=3).map(tuple)),
                          draw(st.sampled_from(SCALARS)))
    if kind == 2:
        return TensorType(draw(static_shapes), draw(quant_types()))
    return TensorType(None, draw(st.sampled_from(FLOATS)))


leaf_attrs = st.one_of(
    st.just(UnitAttr()), st.booleans().map(BoolAttr), int_attrs(), float_attrs(),
    st.text(st.characters(codec="utf-8"), max_size=6).map(StringAttr), types().map(TypeAttr),
    names.map(SymbolRefAttr), dense_array_attrs(), elements_attrs())


def _dict(entries):
    return DictAttr(tuple(sorted(entries.items(), key=lambda kv: kv[0].encode())))


attributes = st.recursive(
    leaf_attrs,
    lambda inner: st.one_of(st.lists(inner, max_size=2).map(lambda v: ArrayAttr(tuple(v))),
                            st.dictionaries(names, inner, max_size=2).map(_dict)),
    max_leaves=12)
attr_dicts = st.dictionaries(names, attributes, max_size=2)
dialect_names = st.tuples(names, names).map(".".join)  # argument, result, module attributes
dialect_attr_dicts = st.dictionaries(dialect_names, attributes, max_size=2)


@st.composite
def constants(draw):
    """``arith.constant``: signless scalars, floats, index, or elements (some large)."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        value = draw(int_attrs(SIGNLESS + [index]))
        if value.type == i1:
            value = BoolAttr(bool(canonical_int(value.value, i1)))
            return dialects.arith.CONSTANT.build([], [i1], value=value)
        return dialects.arith.CONSTANT.build([], [value.type], value=value)
    if kind == 1:
        value = draw(float_attrs())
        return dialects.arith.CONSTANT.build([], [value.type], value=value)
    shapes = static_shapes if kind == 2 else st.sampled_from([(20,), (4, 6), (2, 3, 4)])
    value = draw(elements_attrs(shapes=shapes))
    return dialects.arith.CONSTANT.build([], [value.type], value=value)


@st.composite
def functions(draw, name: str):
    if draw(st.integers(0, 4)) == 0:  # a declaration
        ins = draw(st.lists(types(), max_size=3))
        outs = draw(st.lists(types(), max_size=2))
        return Function(name, FunctionType(tuple(ins), tuple(outs)), visibility="private",
                        arg_attrs=[draw(dialect_attr_dicts) for _ in ins],
                        res_attrs=[draw(dialect_attr_dicts) for _ in outs])
    ins = draw(st.lists(types(), max_size=3))
    fn = Function.create(name, ins, [], arg_attrs=[draw(dialect_attr_dicts) for _ in ins],
                         attributes=draw(attr_dicts))
    pool = list(fn.arguments)
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            op = fn.body.append(draw(constants()))
        elif kind == 1:  # qcast (+ scast / dcast) of a float tensor
            shape = draw(static_shapes)
            q = draw(quant_types())
            src = fn.body.append(unregistered("test.source").build([], [TensorType(shape, q.expressed_type)])).result
            op = fn.body.append(dialects.quant.QCAST.build([src], [TensorType(shape, q)]))
            follow = draw(st.integers(0, 2))
            if follow == 1:
                op = fn.body.append(dialects.quant.DCAST.build([op.result], [TensorType(shape, q.expressed_type)]))
            elif follow == 2:
                op = fn.body.append(dialects.quant.SCAST.build([op.result], [TensorType(shape, q.storage_type)]))
        else:
            operands = draw(st.lists(st.sampled_from(pool), max_size=3)) if pool else []
            opname = draw(st.sampled_from(["test.op", "test.other", "foo.bar"]))
            op = fn.body.append(unregistered(opname).build(operands, draw(st.lists(types(), max_size=3))))
            op.attributes.update(draw(attr_dicts))
        pool.extend(op.results)
    outs = draw(st.lists(st.sampled_from(pool), max_size=3)) if pool else []
    fn.body.append(dialects.func.RETURN.build(outs, []))
    fn.res_attrs = [draw(dialect_attr_dicts) for _ in outs]
    fn.update_type()
    return fn


@st.composite
def modules(draw):
    n = draw(st.integers(1, 2))
    fns = [draw(functions(f"f{i}")) for i in range(n)]
    if draw(st.booleans()):  # a function without any attribute is the common case
        for fn in fns:
            fn.attributes.clear()
    name = draw(st.one_of(st.none(), names))
    return Module(fns, attributes=draw(dialect_attr_dicts), name=name)
