"""Shape inference: recompute every result type from the ops' own type rules.

Run it after changing argument types (``input_shapes`` does that: e.g. fix a dynamic batch
dim to 1) or after a rewrite that left stale types. Ops are visited in order, so new
shapes flow forward; ops without a rule (``arith.constant``, opaque ``nn.onnx_op``) keep
their types. The function signature is updated to match. A rule that rejects the new
shapes raises ``ShapeError`` naming the op.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import ShapeError, UnsupportedOpError
from ..ir import Module, StringAttr
from ..ir.dialects import func
from ..types import TensorType
from . import PassResult


@dataclass(frozen=True)
class ShapeInferenceOptions:
    """``input_shapes``: new shapes for arguments, by input name (``quantir.name``)."""

    input_shapes: Mapping[str, Sequence[int | None]] = field(default_factory=dict)


class ShapeInference:
    """Stats: ``update:<op>`` per result whose type changed, ``update:argument`` per argument."""

    name = "shape-inference"

    def __init__(self, options: ShapeInferenceOptions | None = None):
        self.options = options or ShapeInferenceOptions()

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        modified = False
        input_shapes = self.options.input_shapes
        for fn in module.functions:
            if fn.body is None:
                continue
            names = [(fn.arg_attrs[i].get("quantir.name") if i < len(fn.arg_attrs) else None)
                     for i in range(len(fn.arguments))]
            for arg, name in zip(fn.arguments, names):
                key = name.value if isinstance(name, StringAttr) else None
                if key in input_shapes:
                    new = TensorType(_dims(key, input_shapes[key]), arg.type.element_type)
                    if new != arg.type:
                        arg.type = new
                        stats["update:argument"] = stats.get("update:argument", 0) + 1
                        modified = True
            for op in fn.body.ops:
                if op.opdef.infer is None or op.opdef is func.RETURN:
                    continue
                values = op.opdef.attr_values(op)
                try:
                    types = op.opdef.infer([v.type for v in op.operands], values)
                except (ShapeError, UnsupportedOpError) as e:
                    raise type(e)(f"{op.describe()}: {e.message}") from None
                for r, t in zip(op.results, types):
                    if r.type != t:
                        r.type = t
                        stats["update:" + op.name] = stats.get("update:" + op.name, 0) + 1
                        modified = True
            fn.update_type()
        return PassResult(modified, stats)


def _dims(name: str, dims: Sequence[int | None]) -> tuple[int | None, ...]:
    """Python ints (a numpy int64 product of huge dims would wrap around), each None or >= 0."""
    out = tuple(None if d is None else int(d) for d in dims)
    if any(d is not None and d < 0 for d in out):
        raise ShapeError(f"input_shapes['{name}'] = {list(out)}: a dim must be >= 0, or None for a dynamic one")
    return out
