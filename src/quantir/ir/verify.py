"""Whole-module verification: signatures, terminators, SSA dominance, then each op's rules.

Messages follow MLIR's so that ``quantir opt`` and ``mlir-opt`` reject the same text alike.
"""
from __future__ import annotations

from ..errors import VerifyError
from .core import BlockArgument, Function, Module, OpResult
from .dialects.func import RETURN
from .opdef import Trait


def verify_function(fn: Function) -> None:
    if fn.body is None:
        if fn.visibility != "private":
            raise VerifyError("'func.func' op symbol declaration cannot have public visibility", fn.loc)
        return
    for i, (arg, t) in enumerate(zip(fn.arguments, fn.type.inputs)):
        if arg.type != t:
            raise VerifyError(
                f"'func.func' op type of entry block argument #{i}('{arg.type}') must match the type "
                f"of the corresponding argument in function signature('{t}')", fn.loc)
    if len(fn.arguments) != len(fn.type.inputs):
        raise VerifyError(f"'func.func' op entry block must have {len(fn.type.inputs)} arguments "
                          f"to match function signature", fn.loc)
    ops = fn.body.ops
    if not ops or not ops[-1].opdef.has(Trait.TERMINATOR):
        raise VerifyError("block with no terminator, has "
                          + (f"\"{ops[-1].name}\"" if ops else "no operations"), fn.loc)
    defined: set[int] = {id(a) for a in fn.arguments}
    for op in ops:
        for i, v in enumerate(op.operands):
            if id(v) not in defined:
                if isinstance(v, BlockArgument) or (isinstance(v, OpResult) and v.op.block is fn.body):
                    raise op.error(f"operand #{i} does not dominate this use")
                raise op.error(f"operand #{i} is defined outside the function")
        if op.opdef.has(Trait.TERMINATOR) and op is not ops[-1]:
            raise op.error("must be the last operation in the parent block")
        op.verify()
        defined.update(id(r) for r in op.results)
    ret = ops[-1]
    if ret.opdef is RETURN:
        results = fn.type.results
        if len(ret.operands) != len(results):
            raise ret.error(f"has {len(ret.operands)} operands, but enclosing function (@{fn.name}) "
                            f"returns {len(results)}")
        for i, (v, t) in enumerate(zip(ret.operands, results)):
            if v.type != t:
                raise ret.error(f"type of return operand {i} ('{v.type}') doesn't match function result "
                                f"type ('{t}') in function @{fn.name}")


def verify(module: Module) -> None:
    """Raise ``VerifyError`` (with the op's location when known) at the first broken rule."""
    seen: set[str] = set()
    for fn in module.functions:
        if fn.name in seen:
            raise VerifyError(f"redefinition of symbol named '{fn.name}'", fn.loc)
        seen.add(fn.name)
        verify_function(fn)
