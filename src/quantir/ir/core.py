"""The IR: SSA values, operations, blocks, functions and modules.

Design notes
- Modelled on MLIR but kept small: a ``Module`` holds ``Function``s; a function body is one
  ``Block`` of ``Operation``s ending in ``func.return``. Operations carry no nested regions
  (the import, quantization and lowering flows never need them).
- Every operation points to its ``OpDef`` (see ``opdef.py``): dispatch is by identity on the
  definition, never by comparing op-name strings. Ops of dialects quantir does not know keep
  an *unregistered* definition so that foreign MLIR text survives a round trip.
- Use lists are maintained eagerly so rewrites can ``replace_all_uses_with`` and passes can
  erase dead ops without rescanning the function.
- Constants are numpy arrays inside elements attributes, held by reference.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from ..errors import Location, VerifyError
from ..types import FunctionType, Type
from .attributes import Attribute

if TYPE_CHECKING:
    from .opdef import OpDef


class UseList(dict):
    """The ``(op, operand index)`` pairs that read a value, in insertion order, with O(1)
    ``append`` and ``remove``: a value read by 30,000 ops (one argument feeding every branch)
    would make erasing them one by one quadratic with a plain list. Iterates, counts and
    indexes (``uses[0]``) like the list it replaces."""

    __slots__ = ()

    def append(self, use: tuple["Operation", int]) -> None:
        self[use] = None

    def remove(self, use: tuple["Operation", int]) -> None:
        del self[use]

    def __getitem__(self, key):
        if isinstance(key, int):   # positional, as on a list (used with one or two uses)
            if key < 0:
                key += len(self)
            for i, use in enumerate(self):
                if i == key:
                    return use
            raise IndexError("use index out of range")
        return dict.__getitem__(self, key)

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, (list, UseList)) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


class Value:
    """An SSA value: the result of an operation or an argument of a block."""

    __slots__ = ("type", "name_hint", "uses")

    def __init__(self, type: Type, name_hint: str | None = None):
        self.type = type
        self.name_hint = name_hint        # e.g. the ONNX tensor name; never printed as the SSA name
        self.uses: UseList = UseList()

    @property
    def owner(self) -> "Operation | Block":
        raise NotImplementedError

    def replace_all_uses_with(self, other: "Value") -> None:
        for op, index in list(self.uses):
            op.set_operand(index, other)

    @property
    def has_uses(self) -> bool:
        return bool(self.uses)


class OpResult(Value):
    __slots__ = ("op", "index")

    def __init__(self, type: Type, op: "Operation", index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.op = op
        self.index = index

    @property
    def owner(self) -> "Operation":
        return self.op

    def __repr__(self) -> str:
        return f"<OpResult #{self.index} of {self.op.name}: {self.type}>"


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: Type, block: "Block", index: int, name_hint: str | None = None):
        super().__init__(type, name_hint)
        self.block = block
        self.index = index

    @property
    def owner(self) -> "Block":
        return self.block

    def __repr__(self) -> str:
        return f"<BlockArgument #{self.index}: {self.type}>"


class Operation:
    """One operation: ``results = opdef(operands) {attributes}``."""

    __slots__ = ("opdef", "operands", "results", "attributes", "loc", "block", "label", "__weakref__")

    def __init__(self, opdef: "OpDef", operands: Sequence[Value], result_types: Sequence[Type],
                 attributes: dict[str, Attribute] | None = None, loc: Location | None = None,
                 label: str | None = None):
        self.opdef = opdef
        self.operands: list[Value] = []
        for i, v in enumerate(operands):
            self.operands.append(v)
            v.uses.append((self, i))
        self.results = [OpResult(t, self, i) for i, t in enumerate(result_types)]
        self.attributes: dict[str, Attribute] = dict(attributes or {})
        self.loc = loc
        self.block: Block | None = None
        self.label = label  # a human name (e.g. the ONNX node name) for reports and --exclude

    @property
    def name(self) -> str:
        return self.opdef.name

    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise ValueError(f"'{self.name}' has {len(self.results)} results, not one")
        return self.results[0]

    def set_operand(self, index: int, value: Value) -> None:
        old = self.operands[index]
        old.uses.remove((self, index))
        self.operands[index] = value
        value.uses.append((self, index))

    def drop_operands(self) -> None:
        for i, v in enumerate(self.operands):
            v.uses.remove((self, i))
        self.operands = []

    def attr(self, name: str, default: Any = None) -> Any:
        """The Python value of an attribute, converted by the op definition's attribute spec."""
        return self.opdef.get_attr(self, name, default)

    def verify(self) -> None:
        self.opdef.verify_op(self)

    def error(self, message: str) -> VerifyError:
        """A diagnostic in MLIR's form: ``'dialect.op' op MESSAGE``."""
        return VerifyError(f"'{self.name}' op {message}", self.loc)

    def describe(self) -> str:
        """``'nn.pad' (node 'Pad_3')``: the op as an error message names it."""
        return f"'{self.name}'" + (f" (node '{self.label}')" if self.label else "")

    def __repr__(self) -> str:
        return f"<Operation {self.name} {self.label or ''}>"


class Block:
    """A list of operations with typed arguments."""

    def __init__(self, arg_types: Iterable[Type] = ()):
        self.arguments: list[BlockArgument] = []
        self.ops: list[Operation] = []
        for t in arg_types:
            self.add_argument(t)

    def add_argument(self, type: Type, name_hint: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.arguments), name_hint)
        self.arguments.append(arg)
        return arg

    def append(self, op: Operation) -> Operation:
        op.block = self
        self.ops.append(op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        op.block = self
        # the last op is the common anchor (an importer folding the op it just appended): O(1)
        self.ops.insert(len(self.ops) - 1 if self.ops and self.ops[-1] is anchor else self.ops.index(anchor), op)
        return op

    def erase(self, op: Operation) -> None:
        """Remove an op whose results are unused."""
        self.detach(op)
        if self.ops and self.ops[-1] is op:
            self.ops.pop()
        else:
            self.ops.remove(op)

    def detach(self, op: Operation) -> None:
        """``erase`` without removing ``op`` from ``self.ops``: its operands are dropped and
        ``op.block`` is None. A pass that erases many ops detaches them and compacts the body once
        (``ops[:] = [o for o in ops if o.block is self]``): ``list.remove`` per op is quadratic."""
        for r in op.results:
            if r.uses:
                raise ValueError(f"cannot erase '{op.name}': result #{r.index} still has uses")
        op.drop_operands()
        op.block = None

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.ops)

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None


class Function:
    """``func.func @name(args) -> results { body }``; ``body is None`` for a declaration."""

    def __init__(self, name: str, type: FunctionType, *, body: Block | None = None,
                 visibility: str | None = None, arg_attrs: list[dict[str, Attribute]] | None = None,
                 res_attrs: list[dict[str, Attribute]] | None = None,
                 attributes: dict[str, Attribute] | None = None, loc: Location | None = None):
        self.name = name
        self.type = type
        self.body = body
        self.visibility = visibility
        self.arg_attrs = arg_attrs or [{} for _ in type.inputs]
        self.res_attrs = res_attrs or [{} for _ in type.results]
        self.attributes = dict(attributes or {})
        self.loc = loc

    @classmethod
    def create(cls, name: str, input_types: Sequence[Type], result_types: Sequence[Type], **kw) -> "Function":
        """A function with an empty body whose block arguments match ``input_types``."""
        return cls(name, FunctionType(tuple(input_types), tuple(result_types)), body=Block(input_types), **kw)

    @property
    def is_declaration(self) -> bool:
        return self.body is None

    @property
    def arguments(self) -> list[BlockArgument]:
        return self.body.arguments if self.body else []

    @property
    def ops(self) -> list[Operation]:
        return self.body.ops if self.body else []

    def return_op(self) -> Operation | None:
        return self.body.terminator if self.body else None

    @property
    def outputs(self) -> list[Value]:
        ret = self.return_op()
        return list(ret.operands) if ret is not None else []

    def update_type(self) -> None:
        """Recompute the signature from the block arguments and the return operands."""
        ins = tuple(a.type for a in self.arguments)
        outs = tuple(v.type for v in self.outputs)
        self.type = FunctionType(ins, outs)


class Module:
    """A list of functions plus the blobs behind ``dense_resource`` attributes."""

    def __init__(self, functions: Iterable[Function] = (), attributes: dict[str, Attribute] | None = None,
                 name: str | None = None):
        self.functions: list[Function] = list(functions)
        self.attributes = dict(attributes or {})
        self.name = name

    def add(self, fn: Function) -> Function:
        if any(f.name == fn.name for f in self.functions):
            raise VerifyError(f"redefinition of symbol named '{fn.name}'", fn.loc)
        self.functions.append(fn)
        return fn

    def lookup(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name), None)

    @property
    def main(self) -> Function:
        """The function a model runs: ``@main`` if present, else the only defined function."""
        defined = [f for f in self.functions if not f.is_declaration]
        fn = self.lookup("main") or (defined[0] if len(defined) == 1 else None)
        if fn is None:
            raise VerifyError(f"module has {len(defined)} defined functions and none is named 'main'")
        return fn
