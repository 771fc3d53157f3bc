"""Whole-module verification: signatures, terminators, SSA dominance, then each op's rules.

Messages follow MLIR's so that ``quantir opt`` and ``mlir-opt`` reject the same text alike.
"""
from __future__ import annotations

from ..errors import VerifyError
from .core import BlockArgument, Function, Module, OpResult
from .dialects.func import RETURN
from .opdef import Trait, is_closed_dialect


def verify_module_op(module: Module) -> None:
    """``builtin.module``'s own rule: its attributes have dialect-prefixed names."""
    for name in module.attributes:
        if "." not in name and name not in ("sym_name", "sym_visibility"):
            raise VerifyError(f"'builtin.module' op can only contain attributes with dialect-prefixed names, "
                              f"found: '{name}'", getattr(module, "loc", None))


def verify_function(fn: Function) -> None:
    for what, dicts in (("arguments", fn.arg_attrs), ("results", fn.res_attrs)):
        for d in dicts:
            if any("." not in name for name in d):
                raise VerifyError(f"'func.func' op {what} may only have dialect attributes", fn.loc)
    if fn.body is None:
        if fn.visibility in (None, "public"):
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
    if not ops:
        raise VerifyError("empty block: expect at least a terminator", fn.loc)
    # As MLIR's OperationVerifier: each op's own rules in order, then the terminator, then
    # dominance (verified after the ops, so an op's rule violation is reported first).
    for op in ops:
        if not op.opdef.registered and is_closed_dialect(op.opdef.dialect):
            raise VerifyError(f"unregistered operation '{op.name}' found in dialect ('{op.opdef.dialect}') "
                              "that does not allow unknown operations", op.loc)
        if op.opdef.has(Trait.TERMINATOR) and op is not ops[-1]:
            raise op.error("must be the last operation in the parent block")
        op.verify()
        if op.opdef is RETURN:
            _verify_return(fn, op)
    if not ops[-1].opdef.has(Trait.TERMINATOR):
        raise VerifyError(f"block with no terminator, has \"{ops[-1].name}\"", ops[-1].loc or fn.loc)
    defined: set[int] = {id(a) for a in fn.arguments}
    for op in ops:
        for i, v in enumerate(op.operands):
            if id(v) not in defined:
                if isinstance(v, BlockArgument) or (isinstance(v, OpResult) and v.op.block is fn.body):
                    err = VerifyError(f"operand #{i} does not dominate this use", op.loc)
                    if isinstance(v, OpResult) and v.op.loc is not None:  # MLIR's note, same wording
                        err.followups = [("note", v.op.loc, "operand defined here (op in the same block)")]
                    raise err
                raise op.error(f"operand #{i} is defined outside the function")
        defined.update(id(r) for r in op.results)


def _verify_return(fn: Function, ret) -> None:
    results = fn.type.results
    if len(ret.operands) != len(results):
        raise ret.error(f"has {len(ret.operands)} operands, but enclosing function (@{fn.name}) "
                        f"returns {len(results)}")
    for i, (v, t) in enumerate(zip(ret.operands, results)):
        if v.type != t:
            raise VerifyError(f"type of return operand {i} ('{v.type}') doesn't match function result "
                              f"type ('{t}') in function @{fn.name}", ret.loc)


def verify(module: Module) -> None:
    """Raise ``VerifyError`` (with the op's location when known) at the first broken rule."""
    verify_module_op(module)
    seen: set[str] = set()
    for fn in module.functions:
        if fn.name in seen:
            raise VerifyError(f"redefinition of symbol named '{fn.name}'", fn.loc)
        seen.add(fn.name)
        verify_function(fn)
