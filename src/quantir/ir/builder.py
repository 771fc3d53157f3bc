"""Building one function from another: ``OpBuilder``, ``function_like``, ``clone_function``.

Design notes
- The rewriting passes (the integer lowering, the QDQ/QOperator export, the uint8
  re-encoding) all have the same shape: make an empty function with the source's signature,
  walk the source in order, and for each op emit either a copy on the new versions of its
  operands or something else, recording each source value's version in an ``IRMapping``.
  This module is that shape once, in the spirit of MLIR's ``OpBuilder``: the passes keep only
  what differs between them (which version of a value an op reads, which ops they replace).
- The insertion point is always the end of one block: every pass here builds straight-line
  code in program order, so nothing needs to insert in the middle.
- Provenance travels with the op: ``insert(op, like=src)`` gives the new op the source op's
  location and label when it has none, and a clone carries the source results' name hints,
  so reports, ``--exclude`` and the exported tensor names still point at the user's model.
- A clone shares the attribute objects (constants' arrays included) with its source:
  attributes are values that no pass mutates in place; the op's attribute *dict*, operand
  and result lists and use lists are the clone's own.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..types import Type
from .attributes import Attribute
from .core import Block, Function, Module, Operation, Value
from .dialects import arith
from .mapping import IRMapping
from .opdef import elements_attr

__all__ = ["OpBuilder", "function_like", "clone_function", "clone_module"]


class OpBuilder:
    """Appends operations at the end of ``block``."""

    __slots__ = ("block",)

    def __init__(self, block: Block):
        self.block = block

    @classmethod
    def at_end(cls, fn: Function) -> "OpBuilder":
        """A builder appending to the body of ``fn`` (a definition)."""
        if fn.body is None:
            raise ValueError(f"function '{fn.name}' is a declaration: it has no body to build in")
        return cls(fn.body)

    def insert(self, op: Operation, like: Operation | None = None) -> Operation:
        """Append ``op``; with ``like``, ``op`` takes ``like``'s location and label where it has none."""
        if like is not None:
            op.loc = op.loc or like.loc
            op.label = op.label or like.label
        return self.block.append(op)

    def clone(self, op: Operation, mapping: IRMapping[Value], *, operands: Sequence[Value] | None = None,
              result_types: Sequence[Type] | None = None, attributes: dict[str, Attribute] | None = None,
              label: str | None = None) -> Operation:
        """A copy of ``op`` appended here: its operands' versions (``mapping.lookup``, unless
        ``operands`` are given), its result types and attributes unless given, its location, its
        label (``label`` when it has none). Each source result is mapped to the copy's, which
        takes the source result's name hint."""
        new_operands = [mapping.lookup(v) for v in op.operands] if operands is None else list(operands)
        types = [r.type for r in op.results] if result_types is None else list(result_types)
        attrs = op.attributes if attributes is None else attributes   # (Operation copies the dict)
        new = self.block.append(Operation(op.opdef, new_operands, types, attrs, op.loc, op.label or label))
        for old, r in zip(op.results, new.results):
            r.name_hint = old.name_hint
            mapping.map(old, r)
        return new

    def constant(self, value: np.ndarray | Attribute, element_type: Type | None = None, *,
                 name: str | None = None) -> Value:
        """An ``arith.constant`` of an array (held by reference; ``element_type`` overrides the one
        its dtype gives, e.g. i8 storage) or of a ready elements attribute, named ``name``."""
        if isinstance(value, Attribute):
            if element_type is not None:
                raise ValueError("element_type applies to an array, not to a ready attribute")
            attr = value
        else:
            attr = elements_attr(value, element_type)
        out = self.block.append(arith.CONSTANT.build([], [attr.type], value=attr)).result
        out.name_hint = name
        return out


def function_like(src: Function, *, name: str | None = None) -> Function:
    """An empty function with ``src``'s signature, argument and result attributes, attributes,
    visibility and location (named ``name`` if given); its block arguments carry the name hints
    of ``src``'s. The body is empty: the caller maps the arguments and emits the ops."""
    fn = Function(src.name if name is None else name, src.type, body=Block([a.type for a in src.arguments]),
                  visibility=src.visibility, arg_attrs=[dict(a) for a in src.arg_attrs],
                  res_attrs=[dict(r) for r in src.res_attrs], attributes=dict(src.attributes), loc=src.loc)
    for old, new in zip(src.arguments, fn.arguments):
        new.name_hint = old.name_hint
    return fn


def clone_function(src: Function, *, name: str | None = None) -> Function:
    """A deep copy of ``src``: new ops, values and use lists (attribute values shared, see the
    design notes), so rewriting the copy leaves ``src`` as it was. A declaration stays one."""
    if src.is_declaration:
        return Function(src.name if name is None else name, src.type, visibility=src.visibility,
                        arg_attrs=[dict(a) for a in src.arg_attrs], res_attrs=[dict(r) for r in src.res_attrs],
                        attributes=dict(src.attributes), loc=src.loc)
    fn = function_like(src, name=name)
    mapping: IRMapping[Value] = IRMapping()
    mapping.map_all(src.arguments, fn.arguments)
    b = OpBuilder.at_end(fn)
    for op in src.ops:
        b.clone(op, mapping)
    return fn


def clone_module(module: Module) -> Module:
    """A deep copy of every function of ``module`` (see ``clone_function``), with its attributes and name."""
    return Module([clone_function(f) for f in module.functions], attributes=dict(module.attributes),
                  name=module.name)
