"""The IR: values, operations, functions, modules, and op definitions as data.

Example:
    >>> from quantir.ir import Function, Module, dialects, verify
    >>> from quantir.types import TensorType, f32, parse_type
    >>> t = TensorType((4,), f32)
    >>> q = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.5:-3>"))
    >>> fn = Function.create("main", [t], [t])
    >>> x = fn.arguments[0]
    >>> qx = fn.body.append(dialects.quant.QCAST.build([x], [q])).result
    >>> y = fn.body.append(dialects.quant.DCAST.build([qx], [t])).result
    >>> _ = fn.body.append(dialects.func.RETURN.build([y], []))
    >>> verify(Module([fn]))
"""
from . import dialects
from .attributes import (ArrayAttr, Attribute, BoolAttr, DenseArrayAttr, DenseElementsAttr,
                         DenseResourceAttr, DictAttr, FloatAttr, IntegerAttr, StringAttr, SymbolRefAttr,
                         TypeAttr, UnitAttr)
from .core import Block, BlockArgument, Function, Module, Operation, OpResult, Value
from .opdef import (AttrKind, AttrSpec, OpDef, Operand, Result, Trait, TypeConstraint, elements_attr,
                    lookup, register, registered_ops, unregistered)
from .verify import verify, verify_function
from .mapping import IRMapping
from .builder import OpBuilder, clone_function, clone_module, function_like

__all__ = [
    "dialects", "Attribute", "ArrayAttr", "BoolAttr", "DenseArrayAttr", "DenseElementsAttr",
    "DenseResourceAttr", "DictAttr", "FloatAttr", "IntegerAttr", "StringAttr", "SymbolRefAttr",
    "TypeAttr", "UnitAttr", "Block", "BlockArgument", "Function", "Module", "Operation", "OpResult",
    "Value", "AttrKind", "AttrSpec", "OpDef", "Operand", "Result", "Trait", "TypeConstraint",
    "elements_attr", "lookup", "register", "registered_ops", "unregistered", "verify", "verify_function",
    "IRMapping", "OpBuilder", "function_like", "clone_function", "clone_module",
]
