"""Operation definitions as data.

One ``OpDef`` holds everything the IR needs to know about an op: operand and result
signatures with type constraints, attributes (kind, default), traits, a verifier, a
type/shape rule and a fold. The generic verifier, the builders and the text printer and
parser all read the same definition, so an op is declared once. Kernels live in the runtime
layer and are registered there against these definitions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import Location, VerifyError
from ..types import FloatType, IntegerType, TensorType, Type
from .attributes import (ArrayAttr, Attribute, BoolAttr, DenseArrayAttr, DenseElementsAttr,
                         DenseResourceAttr, FloatAttr, IntegerAttr, StringAttr, TypeAttr, UnitAttr)
from .core import Operation, Value


class Trait(Enum):
    PURE = auto()                 # no side effects: erased when unused
    TERMINATOR = auto()
    CONSTANT_LIKE = auto()        # result is the ``value`` attribute
    SAME_OPERANDS_AND_RESULT_TYPE = auto()
    SAME_OPERANDS_AND_RESULT_SHAPE = auto()   # MLIR's quant-cast shape rule (see ``_shape_rule``)
    COMMUTATIVE = auto()
    SAME_SCALE = auto()           # data movement: quantized in and out share scale and zero point


@dataclass(frozen=True)
class TypeConstraint:
    """A predicate on types with the description MLIR prints in ``must be ...`` errors."""

    description: str
    check: Callable[[Type], bool]


ANY_TYPE = TypeConstraint("any type", lambda t: True)


@dataclass(frozen=True)
class Operand:
    name: str
    constraint: TypeConstraint = ANY_TYPE
    variadic: bool = False   # zero or more
    optional: bool = False   # zero or one, only as trailing operands


@dataclass(frozen=True)
class Result:
    name: str
    constraint: TypeConstraint = ANY_TYPE
    variadic: bool = False


class AttrKind(Enum):
    INT = auto()          # IntegerAttr i64 <-> int
    FLOAT = auto()        # FloatAttr f32 <-> float
    BOOL = auto()         # BoolAttr <-> bool
    STRING = auto()       # StringAttr <-> str
    INTS = auto()         # array<i64: ...> <-> tuple[int, ...]
    FLOATS = auto()       # array<f32: ...> <-> tuple[float, ...]
    FLOAT_LIST = auto()   # [1.0 : f32, ...] (ArrayAttr of f32) <-> tuple[float, ...]
    STRINGS = auto()      # ["a", "b"] <-> tuple[str, ...]
    ELEMENTS = auto()     # dense<...> / dense_resource<...> <-> np.ndarray
    TYPE = auto()         # TypeAttr <-> Type
    UNIT = auto()         # present or absent <-> bool
    ANY = auto()          # kept as the Attribute itself


@dataclass(frozen=True)
class AttrSpec:
    kind: AttrKind
    required: bool = False
    default: Any = None
    doc: str = ""


# -- conversions between Python values and attributes, by kind ---------------------------------

_F32 = FloatType("f32")
_I64 = IntegerType(64)


def to_attr(kind: AttrKind, value: Any) -> Attribute:
    if isinstance(value, Attribute):
        return value
    if kind is AttrKind.INT:
        return IntegerAttr(int(value), _I64)
    if kind is AttrKind.FLOAT:
        return FloatAttr(float(np.float32(value)), _F32)
    if kind is AttrKind.BOOL:
        return BoolAttr(bool(value))
    if kind is AttrKind.STRING:
        return StringAttr(str(value))
    if kind is AttrKind.INTS:
        return DenseArrayAttr(_I64, tuple(int(v) for v in value))
    if kind is AttrKind.FLOATS:
        return DenseArrayAttr(_F32, tuple(float(np.float32(v)) for v in value))
    if kind is AttrKind.FLOAT_LIST:
        return ArrayAttr(tuple(FloatAttr(float(np.float32(v)), _F32) for v in value))
    if kind is AttrKind.STRINGS:
        return ArrayAttr(tuple(StringAttr(str(v)) for v in value))
    if kind is AttrKind.ELEMENTS:
        return elements_attr(np.asarray(value))
    if kind is AttrKind.TYPE:
        return TypeAttr(value)
    if kind is AttrKind.UNIT:
        return UnitAttr()
    raise TypeError(f"cannot convert {value!r} to an attribute of kind {kind.name}")


def from_attr(kind: AttrKind, attr: Attribute) -> Any:
    if kind is AttrKind.ANY:
        return attr
    if kind in (AttrKind.INT, AttrKind.FLOAT, AttrKind.BOOL, AttrKind.STRING, AttrKind.TYPE):
        return attr.value  # type: ignore[attr-defined]
    if kind in (AttrKind.INTS, AttrKind.FLOATS):
        return attr.value  # type: ignore[attr-defined]
    if kind in (AttrKind.FLOAT_LIST, AttrKind.STRINGS):
        return tuple(a.value for a in attr.value)  # type: ignore[attr-defined]
    if kind is AttrKind.ELEMENTS:
        return attr.array  # type: ignore[attr-defined]
    if kind is AttrKind.UNIT:
        return True
    raise TypeError(kind)


def _attr_matches(kind: AttrKind, attr: Attribute) -> bool:
    return {
        AttrKind.INT: lambda a: isinstance(a, IntegerAttr),
        AttrKind.FLOAT: lambda a: isinstance(a, FloatAttr),
        AttrKind.BOOL: lambda a: isinstance(a, BoolAttr),
        AttrKind.STRING: lambda a: isinstance(a, StringAttr),
        AttrKind.INTS: lambda a: isinstance(a, DenseArrayAttr) and isinstance(a.element_type, IntegerType),
        AttrKind.FLOATS: lambda a: isinstance(a, DenseArrayAttr) and isinstance(a.element_type, FloatType),
        AttrKind.FLOAT_LIST: lambda a: isinstance(a, ArrayAttr) and all(isinstance(e, FloatAttr) for e in a.value),
        AttrKind.STRINGS: lambda a: isinstance(a, ArrayAttr) and all(isinstance(e, StringAttr) for e in a.value),
        AttrKind.ELEMENTS: lambda a: isinstance(a, (DenseElementsAttr, DenseResourceAttr)),
        AttrKind.TYPE: lambda a: isinstance(a, TypeAttr),
        AttrKind.UNIT: lambda a: isinstance(a, UnitAttr),
        AttrKind.ANY: lambda a: True,
    }[kind](attr)


_KIND_DESCRIPTION = {
    AttrKind.INT: "64-bit signless integer attribute", AttrKind.FLOAT: "32-bit float attribute",
    AttrKind.BOOL: "bool attribute", AttrKind.STRING: "string attribute",
    AttrKind.INTS: "i64 dense array attribute", AttrKind.FLOATS: "f32 dense array attribute",
    AttrKind.FLOAT_LIST: "32-bit float array attribute", AttrKind.STRINGS: "string array attribute",
    AttrKind.ELEMENTS: "constant vector/tensor attribute", AttrKind.TYPE: "any type attribute",
    AttrKind.UNIT: "unit attribute", AttrKind.ANY: "any attribute",
}


def numpy_to_element_type(dtype: np.dtype) -> Type:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return IntegerType(1)
    if dtype.kind == "f":
        return FloatType({2: "f16", 4: "f32", 8: "f64"}[dtype.itemsize])
    if dtype.kind in "iu":
        return IntegerType(dtype.itemsize * 8, "signless" if dtype.kind == "i" else "unsigned")
    raise TypeError(f"no element type for numpy dtype {dtype}")


def elements_attr(array: np.ndarray, element_type: Type | None = None) -> DenseElementsAttr:
    """Wrap an array (by reference) as ``dense<...> : tensor<shape x elt>``."""
    et = element_type or numpy_to_element_type(array.dtype)
    return DenseElementsAttr(array, TensorType(tuple(array.shape), et))


# -- the definition ---------------------------------------------------------------------------

Verifier = Callable[[Operation], "str | None"]
TypeRule = Callable[[Sequence[Type], Mapping[str, Any]], list[Type]]
Folder = Callable[[Operation], "list[Value] | None"]


@dataclass(frozen=True, eq=False)
class OpDef:
    """Everything about one operation kind. Compared by identity."""

    name: str
    operands: tuple[Operand, ...] = ()
    results: tuple[Result, ...] = (Result("result"),)
    attributes: Mapping[str, AttrSpec] = field(default_factory=dict)
    traits: frozenset[Trait] = frozenset()
    verifier: Verifier | None = None     # extra rule; returns MLIR's message or None
    infer: TypeRule | None = None        # result types from operand types and attribute values
    fold: Folder | None = None           # replacement values, or None when it does not fold
    summary: str = ""
    registered: bool = True
    custom_syntax: bool = False          # printed/parsed by a custom assembly format in quantir.text

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    def has(self, trait: Trait) -> bool:
        return trait in self.traits

    # -- attributes -------------------------------------------------------------------------
    def get_attr(self, op: Operation, name: str, default: Any = None) -> Any:
        attr = op.attributes.get(name)
        spec = self.attributes.get(name)
        if attr is None:
            if spec is not None and spec.kind is AttrKind.UNIT:
                return False
            return spec.default if spec is not None and default is None else default
        return from_attr(spec.kind if spec else AttrKind.ANY, attr)

    def make_attrs(self, values: Mapping[str, Any]) -> dict[str, Attribute]:
        out: dict[str, Attribute] = {}
        for key, value in values.items():
            if value is None:
                continue
            spec = self.attributes.get(key)
            if spec is not None and spec.kind is AttrKind.UNIT and value is False:
                continue
            out[key] = to_attr(spec.kind if spec else AttrKind.ANY, value)
        return out

    def attr_values(self, op: Operation) -> dict[str, Any]:
        """All declared attributes as Python values, defaults filled in."""
        return {k: self.get_attr(op, k) for k in self.attributes}

    # -- building ---------------------------------------------------------------------------
    def build(self, operands: Sequence[Value], result_types: Sequence[Type] | None = None,
              loc: Location | None = None, label: str | None = None, **attrs: Any) -> Operation:
        """Create an op; result types come from the type rule unless given."""
        attributes = self.make_attrs(attrs)
        if result_types is None:
            if self.infer is None:
                raise VerifyError(f"'{self.name}' has no type rule: pass result_types", loc)
            values = {k: (from_attr(s.kind, attributes[k]) if k in attributes else s.default)
                      for k, s in self.attributes.items()}
            result_types = self.infer([v.type for v in operands], values)
        return Operation(self, operands, result_types, attributes, loc, label)

    # -- verification -----------------------------------------------------------------------
    def verify_op(self, op: Operation) -> None:
        message = self._verify_invariants(op)
        if message is None and self.verifier is not None:
            message = self.verifier(op)
        if message is not None:
            raise op.error(message)

    def _verify_invariants(self, op: Operation) -> str | None:
        if not self.registered:
            return None
        for name, spec in self.attributes.items():
            attr = op.attributes.get(name)
            if attr is None:
                if spec.required:
                    return f"requires attribute '{name}'"
            elif not _attr_matches(spec.kind, attr):
                return (f"attribute '{name}' failed to satisfy constraint: "
                        f"{_KIND_DESCRIPTION[spec.kind]}")
        message = _check_values("operand", self.operands, [v.type for v in op.operands])
        if message is None:
            message = _check_values("result", self.results, [v.type for v in op.results])
        if message is None and Trait.SAME_OPERANDS_AND_RESULT_TYPE in self.traits:
            types = {v.type for v in op.operands} | {v.type for v in op.results}
            if len(types) > 1:
                return "requires the same type for all operands and results"
        return message


def _check_values(kind: str, specs: Sequence[Operand | Result], types: Sequence[Type]) -> str | None:
    """Arity and type constraints, with MLIR's wording."""
    fixed = [s for s in specs if not (s.variadic or getattr(s, "optional", False))]
    flexible = len(fixed) != len(specs)
    if (len(types) < len(fixed)) or (not flexible and len(types) != len(fixed)):
        expected = f"{len(fixed)}" if not flexible else f"at least {len(fixed)}"
        return f"expected {expected} {kind}s, but found {len(types)}"
    optional = [s for s in specs if getattr(s, "optional", False)]
    if not any(s.variadic for s in specs) and len(types) > len(fixed) + len(optional):
        return f"expected at most {len(fixed) + len(optional)} {kind}s, but found {len(types)}"
    index = 0
    for spec in specs:
        if spec.variadic:
            remaining = len(types) - index - sum(1 for s in specs[specs.index(spec) + 1:] if not s.variadic)
            group = types[index:index + remaining]
        elif getattr(spec, "optional", False):
            group = types[index:index + 1]
        else:
            group = types[index:index + 1]
        for t in group:
            if not spec.constraint.check(t):
                return f"{kind} #{index} must be {spec.constraint.description}, but got '{t}'"
            index += 1
    return None


# -- the registry -----------------------------------------------------------------------------

_REGISTRY: dict[str, OpDef] = {}
_UNREGISTERED: dict[str, OpDef] = {}
# Dialects whose op set is closed: an unknown op name in them is an error, as in MLIR.
_CLOSED_DIALECTS: set[str] = set()


def register(opdef: OpDef) -> OpDef:
    if opdef.name in _REGISTRY:
        raise ValueError(f"op '{opdef.name}' registered twice")
    _REGISTRY[opdef.name] = opdef
    return opdef


def close_dialect(name: str) -> None:
    _CLOSED_DIALECTS.add(name)


def lookup(name: str) -> OpDef | None:
    """The registered definition, or None."""
    return _REGISTRY.get(name)


def is_closed_dialect(name: str) -> bool:
    return name in _CLOSED_DIALECTS


def unregistered(name: str) -> OpDef:
    """A definition for an op of a foreign dialect, kept opaque (like ``--allow-unregistered-dialect``)."""
    if name not in _UNREGISTERED:
        _UNREGISTERED[name] = OpDef(name, operands=(Operand("operands", variadic=True),),
                                    results=(Result("results", variadic=True),), registered=False)
    return _UNREGISTERED[name]


def registered_ops() -> list[OpDef]:
    return list(_REGISTRY.values())
