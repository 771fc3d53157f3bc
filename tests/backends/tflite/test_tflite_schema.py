"""quantir's hand-written TFLite schema layer against LiteRT's generated ``schema_py_generated``.

Every enum value, union index, field slot, scalar kind and default declared in
``quantir.backends.tflite.schema`` is checked by calling the generated ``<Table>Add<Field>``
functions with a recording builder (the generated code is the test oracle only).
"""
import re

import pytest

from quantir.backends.tflite import schema as S

gen = pytest.importorskip("ai_edge_litert.schema_py_generated")
pytestmark = pytest.mark.oracle


class Recorder:
    """A stand-in flatbuffers.Builder that records the one call a generated function makes."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def record(*args):
            self.calls.append((name, args))
        return record


def _generated_call(table: str, field: str):
    camel = "".join(part[:1].upper() + part[1:] for part in field.split("_"))
    fn = getattr(gen, f"{table}Add{camel}")
    rec = Recorder()
    fn(rec, 0)
    ((method, args),) = rec.calls
    return method, args


_KIND_METHOD = {"bool": "PrependBoolSlot", "int8": "PrependInt8Slot", "int32": "PrependInt32Slot",
                "float32": "PrependFloat32Slot", "[int32]": "PrependUOffsetTRelativeSlot"}


@pytest.mark.parametrize("enum, generated", [
    (S.TensorType, gen.TensorType), (S.BuiltinOperator, gen.BuiltinOperator),
    (S.ActivationFunctionType, gen.ActivationFunctionType), (S.Padding, gen.Padding),
    (S.BuiltinOptionsType, gen.BuiltinOptions), (S.FullyConnectedWeightsFormat, gen.FullyConnectedOptionsWeightsFormat),
])
def test_enum_values_match_the_generated_schema(enum, generated):
    for member in enum:
        assert getattr(generated, member.name) == member.value, member


@pytest.mark.parametrize("cls", sorted(set(S.OPTIONS_CLASSES.values()), key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_option_tables_match_the_generated_schema(cls):
    assert getattr(gen.BuiltinOptions, cls.__name__) == cls.OPTIONS_TYPE
    rec = Recorder()
    getattr(gen, f"{cls.__name__}Start")(rec)
    ((_, (num_fields,)),) = rec.calls
    assert S.option_table_slots(cls) <= num_fields
    for f in S.option_fields(cls):
        method, args = _generated_call(cls.__name__, f.name)
        assert method == _KIND_METHOD[f.kind], (cls.__name__, f.name, method)
        assert args[0] == f.slot, (cls.__name__, f.name)
        if f.kind != "[int32]":
            assert args[2] == f.schema_default, (cls.__name__, f.name, args[2], f.schema_default)


@pytest.mark.parametrize("table, slots", [
    ("Model", S.ModelField), ("SubGraph", S.SubGraphField), ("Tensor", S.TensorField),
    ("QuantizationParameters", S.QuantizationField), ("Operator", S.OperatorField),
    ("OperatorCode", S.OperatorCodeField), ("Buffer", S.BufferField),
])
def test_root_table_slots_match_the_generated_schema(table, slots):
    for member in slots:
        field = member.name.lower()
        _, args = _generated_call(table, field)
        assert args[0] == member.value, (table, field)
    rec = Recorder()
    getattr(gen, f"{table}Start")(rec)
    assert S.TABLE_SLOTS[table] <= rec.calls[0][1][0]


def test_operator_code_version_default_is_one():
    assert _generated_call("OperatorCode", "version")[1][2] == 1


def test_every_operator_with_options_names_a_declared_table():
    for op, cls in S.OPERATOR_OPTIONS.items():
        if cls is not None:
            assert cls in S.OPTIONS_CLASSES.values(), op
    # and the generated schema agrees on the names we rely on
    for op in S.BuiltinOperator:
        assert re.fullmatch(r"[A-Z0-9_]+", op.name)
