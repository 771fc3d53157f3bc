"""The printer: modules, functions and operations exactly as ``mlir-opt``/``iree-opt`` print them.

Design notes

* Custom forms exist for the ops whose MLIR dialect quantir mirrors: ``func.func``,
  ``func.return``, ``arith.constant`` and ``quant.qcast``/``dcast``/``scast``
  (``OpDef.custom_syntax``). Every other op, including quantir's ``nn``/``qnn`` ops and the
  legacy quant instrumentation ops, prints in MLIR's generic form, which any MLIR tool reads
  with ``--allow-unregistered-dialect``.
* SSA names follow ``SSANameState``: per function, entry arguments are ``%argN``, results
  are numbered ``%0, %1, ...`` (a multi-result op is ``%3:2``, used as ``%3#1``), and
  ``arith.constant`` asks for ``%cst``/``%c42_i32``/``%true``, uniqued with one counter per
  function (``%cst``, ``%cst_0``, ``%c1_i64_1``...). In generic form names are unique across
  the module and functions are numbered last-to-first, as MLIR's region worklist does.
* An op whose custom form would not be well-formed (a qcast with two operands built through
  the API) falls back to the generic form, as MLIR's printer does for unverified ops.
"""
from __future__ import annotations

from ..ir.attributes import ArrayAttr, Attribute, BoolAttr, DictAttr, IntegerAttr, StringAttr, TypeAttr
from ..ir.core import Block, Function, Module, Operation, Value
from ..ir.dialects import arith, arith_ops, func, linalg, quant, shape, tensor
from ..types import FunctionType, IndexType, IntegerType
from .attr_printer import AttrPrinter, escape_string, keyword_or_string
from .numbers import canonical_int

__all__ = ["print_module", "print_op", "print_function", "Namer"]

_QUANT_CASTS = (quant.QCAST, quant.DCAST, quant.SCAST)
UNKNOWN_VALUE = "<<UNKNOWN SSA VALUE>>"


def print_module(module: Module, *, large_elements: str = "resource", threshold: int = 16,
                 generic: bool = False) -> str:
    """The MLIR text of ``module``, ending with a newline.

    ``large_elements`` says what becomes of elements attributes with more than ``threshold``
    elements (splats excepted): ``"resource"`` prints them as ``dense_resource`` blobs in a
    trailing ``{-# dialect_resources #-}`` section, ``"elide"`` as
    ``dense_resource<__elided__>`` (like ``--mlir-elide-elementsattrs-if-larger``),
    ``"inline"`` as ``dense<...>`` (hex beyond 100 elements, as MLIR). ``dense_resource``
    attributes always print as blobs. ``generic=True`` is ``--mlir-print-op-generic``.

    >>> from quantir.ir import Function, Module, dialects
    >>> from quantir.types import f32
    >>> fn = Function.create("id", [f32], [f32])
    >>> _ = fn.body.append(dialects.func.RETURN.build(fn.arguments, []))
    >>> print(print_module(Module([fn])), end="")
    module {
      func.func @id(%arg0: f32) -> f32 {
        return %arg0 : f32
      }
    }
    """
    p = _Printer(AttrPrinter(large_elements, threshold), generic)
    p.whole_module = True
    text = p.generic_module(module) if generic else p.module(module)
    return text + p.attrs.resources.section()


def print_function(fn: Function, *, generic: bool = False) -> str:
    """One function without the module around it (no trailing newline; blobs not printed)."""
    p = _Printer(AttrPrinter("inline"), generic)
    if not generic:
        return "\n".join(p.function(fn, 0))
    names = Namer.for_block(fn.body, special=False) if fn.body is not None else Namer()
    return "\n".join(p._generic_function(fn, names, 0))


def print_op(op: Operation, *, generic: bool = False) -> str:
    """One operation on one line, its values named as in its function's printout.

    ``generic=True`` gives the form MLIR uses in ``see current operation:`` notes.
    """
    p = _Printer(AttrPrinter("inline"), generic)
    names = Namer.for_block(op.block, special=not generic) if op.block is not None else Namer()
    if op.block is None:
        names.number_op(op, special=not generic)
    return p.op(op, names)


class Namer:
    """SSA names of one naming scope (``SSANameState``)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}        # id(value) -> name without '%'
        self.groups: dict[int, str] = {}       # id(op) -> '3' for a multi-result op
        self._used: set[str] = set()
        self._conflict = 0
        self.next_value = 0
        self.next_arg = 0

    @classmethod
    def for_block(cls, block: Block, special: bool = True) -> "Namer":
        n = cls()
        n.number_block(block, special)
        return n

    def unique(self, name: str) -> str:
        name = _sanitize(name)
        if name in self._used:
            while f"{name}_{self._conflict}" in self._used:
                self._conflict += 1
            name = f"{name}_{self._conflict}"
            self._conflict += 1
        self._used.add(name)
        return name

    def number_block(self, block: Block, special: bool = True, arg_hints: tuple[str, ...] = ()) -> None:
        for i, arg in enumerate(block.arguments):
            if i < len(arg_hints):   # a region's arguments (linalg.generic's %in, %out)
                self.names[id(arg)] = self.unique(arg_hints[i])
                continue
            self.names[id(arg)] = self.unique(f"arg{self.next_arg}")
            self.next_arg += 1
        for op in block.ops:
            self.number_op(op, special)
        # as SSANameState: a region's values are numbered after all of its parent block's, and
        # its names are scoped -- sibling regions start from the same counters and names
        for op in block.ops:
            body = getattr(op, "body", None)
            if body is not None:
                saved = (self.next_value, self._conflict, set(self._used))
                self.number_block(body, special, op.arg_hints)
                self.next_value, self._conflict, self._used = saved

    def number_op(self, op: Operation, special: bool = True) -> None:
        if not op.results:
            return
        hints = shape.RESULT_NAMES.get(op.opdef) if special else None
        if hints is not None and len(hints) == len(op.results):   # one name per result
            for r, h in zip(op.results, hints):
                self.names[id(r)] = self.unique(h)
            return
        hint = _asm_result_name(op) if special else None
        if hint is not None and len(op.results) == 1:
            self.names[id(op.results[0])] = self.unique(hint)
            return
        number = str(self.next_value)
        self.next_value += 1
        if len(op.results) == 1:
            self.names[id(op.results[0])] = number
        else:
            self.groups[id(op)] = number
            for r in op.results:
                self.names[id(r)] = f"{number}#{r.index}"

    def use(self, v: Value) -> str:
        name = self.names.get(id(v))
        return UNKNOWN_VALUE if name is None else "%" + name

    def definition(self, op: Operation) -> str:
        """``%0 = ``, ``%0:2 = `` or '' for an op without results."""
        if not op.results:
            return ""
        group = self.groups.get(id(op))
        if group is not None:
            return f"%{group}:{len(op.results)} = "
        return ", ".join(self.use(r) for r in op.results) + " = "


def _sanitize(name: str) -> str:
    """``sanitizeIdentifier``: keep ``[A-Za-z0-9$._-]``, spaces become ``_``, others hex."""
    def ok(c: str) -> bool:
        return c.isascii() and (c.isalnum() or c in "$._-")
    if all(ok(c) for c in name) and not name[:1].isdigit():
        return name
    out = ["_"] if name[:1].isdigit() else []
    for c in name:
        out.append(c if ok(c) else "_" if c == " " else "".join("%X" % b for b in c.encode("utf-8", "surrogateescape")))
    return "".join(out)


def _asm_result_name(op: Operation) -> str | None:
    """``arith.constant``'s ``getAsmResultNames``: ``true``/``false``, ``c42_i32``, ``cst``."""
    if op.opdef in tensor.ASM_NAMES:
        return tensor.ASM_NAMES[op.opdef]
    if op.opdef is not arith.CONSTANT:
        return None
    value = op.attributes.get("value")
    t = op.results[0].type
    if isinstance(value, BoolAttr):
        value = IntegerAttr(int(value.value), IntegerType(1))
    if isinstance(value, IntegerAttr):
        if isinstance(t, IntegerType) and t.width == 1:
            return "true" if canonical_int(value.value, value.type) else "false"
        if isinstance(t, IntegerType):  # APInt prints signed whatever the signedness
            return f"c{canonical_int(value.value, IntegerType(t.width))}_{t}"
        return f"c{canonical_int(value.value, t) if isinstance(t, IndexType) else value.value}"
    return "cst"


class _Printer:
    def __init__(self, attrs: AttrPrinter, generic: bool):
        self.attrs = attrs
        self.generic = generic
        self.map_aliases: dict[str, str] = {}   # affine map text -> '#map1'
        self.whole_module = False                # print_module: a region op must print in full

    # -- custom form ----------------------------------------------------------------------------
    def module(self, m: Module) -> str:
        head = "module"
        if m.name is not None:
            head += " @" + keyword_or_string(m.name)
        if m.attributes:
            head += " attributes" + self.attrs.attr_dict(m.attributes)
        aliases = [f"{alias} = {text}" for text, alias in self._map_aliases(m).items()]
        lines = [head + " {"]
        for fn in m.functions:
            lines.extend(self.function(fn, 2))
        lines.append("}")
        return "\n".join(aliases + lines) + "\n"

    def _map_aliases(self, m: Module) -> dict[str, str]:
        """``#map``, ``#map1``... for the affine maps of ``linalg.generic`` ops, by first use."""
        for fn in m.functions:
            for op in fn.ops:
                for amap in getattr(op, "maps", ()):
                    text = str(amap)
                    if text not in self.map_aliases:
                        n = len(self.map_aliases)
                        self.map_aliases[text] = "#map" + (str(n) if n else "")
        return self.map_aliases

    def function(self, fn: Function, indent: int) -> list[str]:
        a = self.attrs
        pad = " " * indent
        head = "func.func "
        if fn.visibility is not None:
            head += fn.visibility + " "
        head += "@" + keyword_or_string(fn.name)
        names = Namer.for_block(fn.body) if fn.body is not None else None
        args = []
        for i, t in enumerate(fn.type.inputs):
            attrs = a.attr_dict(fn.arg_attrs[i]) if i < len(fn.arg_attrs) else ""
            if names is not None and i < len(fn.body.arguments):
                args.append(f"{names.use(fn.body.arguments[i])}: {t}{attrs}")
            else:
                args.append(f"{t}{attrs}")
        head += "(" + ", ".join(args) + ")"
        results = fn.type.results
        if results:
            rattrs = [a.attr_dict(fn.res_attrs[i]) if i < len(fn.res_attrs) else "" for i in range(len(results))]
            parts = [f"{t}{r}" for t, r in zip(results, rattrs)]
            parens = len(results) > 1 or isinstance(results[0], FunctionType) or bool(rattrs[0])
            head += " -> " + (f"({', '.join(parts)})" if parens else parts[0])
        if fn.attributes:
            head += " attributes" + a.attr_dict(fn.attributes)
        if fn.body is None:
            return [pad + head]
        lines = [pad + head + " {"]
        for op in fn.body.ops:
            lines.extend(pad + "  " + line for line in self.op(op, names).split("\n"))  # regions span lines
        lines.append(pad + "}")
        return lines

    def op(self, op: Operation, names: Namer) -> str:
        custom = None if self.generic else self._custom(op, names)
        return names.definition(op) + (custom if custom is not None else self._generic_op(op, names))

    def _custom(self, op: Operation, names: Namer) -> str | None:
        d = op.opdef
        a = self.attrs
        if d in _QUANT_CASTS and len(op.operands) == 1 and len(op.results) == 1:
            return (f"{d.name} {names.use(op.operands[0])}{a.attr_dict(op.attributes)} : "
                    f"{op.operands[0].type} to {op.results[0].type}")
        if d is func.RETURN and not op.results:
            text = "return" + a.attr_dict(op.attributes)
            if op.operands:
                text += (" " + ", ".join(names.use(v) for v in op.operands) + " : "
                         + ", ".join(str(v.type) for v in op.operands))
            return text
        if d is linalg.GENERIC and getattr(op, "body", None) is not None:
            return self._generic_loop(op, names)
        if d.custom_syntax and (d in arith_ops.SYNTAX or d.dialect in ("tensor", "shape", "linalg")):
            return _lowering_op(op, names, a)
        if d is arith.CONSTANT and not op.operands and len(op.results) == 1 and "value" in op.attributes:
            value = op.attributes["value"]
            if _typed_value_matches(value, op.results[0].type):
                return f"arith.constant{a.attr_dict(op.attributes, ('value',))} {a.attr(value)}"
        return None

    def _generic_loop(self, op, names: Namer) -> str:
        """``linalg.generic {indexing_maps = [...], iterator_types = [...]} ins(...) outs(...) {
        ^bb0(...): ...} -> T``, one line per body op (the function printer indents them)."""
        use = names.use
        ins, outs = op.operands[:op.num_inputs], op.operands[op.num_inputs:]
        maps = ", ".join(self.map_aliases.get(str(m), str(m)) for m in op.maps)
        loops = ", ".join(['"parallel"'] * (op.maps[0].dims if op.maps else 0))
        head = f"{op.name} {{indexing_maps = [{maps}], iterator_types = [{loops}]}}"
        for word, vals in (("ins", ins), ("outs", outs)):
            if vals:
                head += (f" {word}({', '.join(use(v) for v in vals)} : "
                         f"{', '.join(str(v.type) for v in vals)})")
        args = ", ".join(f"{use(v)}: {v.type}" for v in op.body.arguments)
        lines = [head + " {", f"^bb0({args}):"]
        lines += ["  " + line for inner in op.body.ops for line in self.op(inner, names).split("\n")]
        results = ", ".join(str(r.type) for r in op.results)
        lines.append("} -> " + results)
        return "\n".join(lines)

    # -- generic form ---------------------------------------------------------------------------
    def _generic_op(self, op: Operation, names: Namer, properties: dict[str, Attribute] | None = None) -> str:
        if getattr(op, "body", None) is not None and self.whole_module:   # (a note may show the head)
            from ..errors import UnsupportedOpError
            raise UnsupportedOpError(f"'{op.name}': quantir prints an op with a region in its custom form only; "
                                     f"print without --mlir-print-op-generic", op.loc)
        a = self.attrs
        attrs = dict(op.attributes)
        if properties is None and op.opdef is arith.CONSTANT and "value" in attrs:
            properties = {"value": attrs.pop("value")}
        text = f'"{escape_string(op.name)}"(' + ", ".join(names.use(v) for v in op.operands) + ")"
        if properties:
            text += " <{" + a.dict_body(properties.items()) + "}>"
        text += a.attr_dict(attrs)
        fn_type = FunctionType(tuple(v.type for v in op.operands), tuple(r.type for r in op.results))
        return text + f" : {fn_type}"

    def generic_module(self, m: Module) -> str:
        # Names are unique over the module; regions are numbered last function first.
        names = Namer()
        for fn in reversed(m.functions):
            if fn.body is not None:
                names.number_block(fn.body, special=False)
        props = {"sym_name": StringAttr(m.name)} if m.name is not None else {}
        head = '"builtin.module"()' + (" <{" + self.attrs.dict_body(props.items()) + "}>" if props else "")
        lines = [head + " ({"]
        if not m.functions:
            lines.append("^bb0:")  # MLIR shows the module's (empty) body block
        for fn in m.functions:
            lines.extend(self._generic_function(fn, names, 2))
        lines.append("})" + self.attrs.attr_dict(m.attributes) + " : () -> ()")
        return "\n".join(lines) + "\n"

    def _generic_function(self, fn: Function, names: Namer, indent: int) -> list[str]:
        a = self.attrs
        pad = " " * indent
        props: dict[str, Attribute] = {"function_type": TypeAttr(fn.type), "sym_name": StringAttr(fn.name)}
        if any(fn.arg_attrs):
            props["arg_attrs"] = ArrayAttr(tuple(DictAttr(tuple(sorted(d.items()))) for d in fn.arg_attrs))
        if any(fn.res_attrs):
            props["res_attrs"] = ArrayAttr(tuple(DictAttr(tuple(sorted(d.items()))) for d in fn.res_attrs))
        if fn.visibility is not None:
            props["sym_visibility"] = StringAttr(fn.visibility)
        lines = [pad + '"func.func"() <{' + a.dict_body(props.items()) + "}> ({"]
        if fn.body is not None:
            if fn.body.arguments:
                lines.append(pad + "^bb0(" + ", ".join(f"{names.use(v)}: {v.type}" for v in fn.body.arguments) + "):")
            for op in fn.body.ops:
                lines.append(pad + "  " + self.op(op, names))
        lines.append(pad + "})" + a.attr_dict(fn.attributes) + " : () -> ()")
        return lines


def _lowering_op(op: Operation, names: Namer, a: AttrPrinter) -> str | None:
    """Custom forms of the ``arith``/``tensor``/``shape``/``linalg`` ops of ``--lower-quant-ops``; None (generic form)
    when the op's arity does not fit its form."""
    d, use, attrs = op.opdef, names.use, a.attr_dict(op.attributes)
    kind = arith_ops.SYNTAX.get(d)
    if d is linalg.YIELD and not op.results:
        values = ", ".join(use(v) for v in op.operands)
        return f"{d.name} {values}{attrs} : {', '.join(str(v.type) for v in op.operands)}"
    if len(op.results) != 1:
        return None
    if kind == "binary" and len(op.operands) == 2:
        return f"{d.name} {use(op.operands[0])}, {use(op.operands[1])}{attrs} : {op.results[0].type}"
    if kind == "unary" and len(op.operands) == 1:
        return f"{d.name} {use(op.operands[0])}{attrs} : {op.results[0].type}"
    if kind == "cast" and len(op.operands) == 1:
        return f"{d.name} {use(op.operands[0])}{attrs} : {op.operands[0].type} to {op.results[0].type}"
    if d is tensor.SPLAT and op.operands:
        sizes = op.operands[1:]
        dyn = "[" + ", ".join(use(v) for v in sizes) + "]" if sizes else ""
        return f"{d.name} {use(op.operands[0])}{dyn}{attrs} : {op.results[0].type}"
    if d in shape.SYNTAX and len(op.operands) == 1:
        return f"{d.name} {use(op.operands[0])}{attrs} : {op.operands[0].type} -> {op.results[0].type}"
    if d is tensor.FROM_ELEMENTS:
        return f"{d.name} {', '.join(use(v) for v in op.operands)}{attrs} : {op.results[0].type}"
    if d is tensor.RESHAPE and len(op.operands) == 2:
        src, shp = op.operands
        return (f"{d.name} {use(src)}({use(shp)}){attrs} : ({src.type}, {shp.type}) -> {op.results[0].type}")
    if d is tensor.EMPTY:
        return f"{d.name}({', '.join(use(v) for v in op.operands)}){attrs} : {op.results[0].type}"
    if d is tensor.DIM and len(op.operands) == 2:
        return f"{d.name}{attrs} {use(op.operands[0])}, {use(op.operands[1])} : {op.operands[0].type}"
    return None


def _typed_value_matches(value: Attribute, result_type) -> bool:
    """The custom form of arith.constant infers the result type from the value."""
    if isinstance(value, BoolAttr):
        return result_type == IntegerType(1)
    return getattr(value, "type", None) == result_type
