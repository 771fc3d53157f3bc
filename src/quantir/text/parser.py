"""The parser: MLIR text to a :class:`~quantir.ir.Module`, with MLIR's diagnostics.

It follows ``mlir/lib/AsmParser/Parser.cpp`` (``OperationParser``/``TopLevelOperationParser``):

* top level: ops, ``#alias = attr``/``!alias = type`` definitions and the trailing
  ``{-# dialect_resources #-}`` section. The ops are either one ``module`` (custom or generic
  ``"builtin.module"``) or ``func.func`` ops, which get an implicit module;
* SSA names are scoped per function (``func.func`` is isolated from above). A use before the
  definition creates a placeholder that the definition replaces (MLIR allows this; the
  verifier then reports the dominance error); placeholders still open at the end of the file
  are ``use of undeclared SSA value name``, reported there as MLIR's ``finalize`` does;
* custom forms: ``func.func``, ``return``/``func.return``, ``arith.constant``,
  ``quant.qcast``/``dcast``/``scast``, ``module``; any op in the generic form. Ops of
  dialects quantir does not know stay opaque (``quantir.ir.unregistered``); unknown ops of a
  closed dialect (``quant``, ``func``) are caught by the verifier with MLIR's message;
* trailing ``loc(...)`` are checked against MLIR's location grammar and dropped; every op gets
  the location of its name token (where MLIR points its diagnostics: ``q.mlir:2:8`` for
  ``  %0 = quant.qcast ...``), columns counted in bytes as MLIR does.

Errors raise :class:`~quantir.errors.ParseError` at MLIR's position. Further diagnostics MLIR
prints after the first one (notes such as ``previously defined here``) are kept as
``err.followups``: a list of ``(severity, Location, message)``.

Valid MLIR that quantir cannot hold is parsed through (so that a syntax error further down is
reported first, as mlir-opt would) and then refused with a ParseError saying so: top-level ops
other than ``func.func``/``module``, nested functions and modules, properties on unregistered
ops, typed strings. Refused on the spot: multi-block function bodies, regions and successors
on other ops, dialect attributes, nested symbol references, complex and string elements.
"""
from __future__ import annotations

import re

from ..errors import Location, ParseError
from ..ir import opdef as _opdef
from ..ir.attributes import (ArrayAttr, Attribute, BoolAttr, DenseArrayAttr, DictAttr,
                             StringAttr, SymbolRefAttr, TypeAttr, UnitAttr)
from ..ir.core import Block, Function, Module, Operation, Value
from ..ir.dialects import arith, arith_ops, func, linalg, quant, shape, tensor
from ..types import FunctionType, IndexType, IntegerType, NoneType, TensorType, Type
from ..types.lexer import MAX_INT_DIGITS, Source, Tok, Token
from ..types.parser import add_followup
from .lexing import FastLexer, FastSource
from .resources import ResourceSectionParser

__all__ = ["parse_module", "parse_source"]

_QUANT_CASTS = {"quant.qcast": quant.QCAST, "quant.dcast": quant.DCAST, "quant.scast": quant.SCAST}
_KNOWN_DIALECTS = {"builtin", "func", "arith", "quant", "tensor", "shape", "linalg"}  # dialects with custom syntax here
# Files are decoded with surrogateescape (text.files): U+DC80..U+DCFF stand for bytes that are not
# UTF-8 and are kept; any other surrogate cannot be encoded back and is refused up front.
_LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
_INT_TYPE = re.compile(r"(?:i|si|ui)[0-9]+\Z")  # MLIR lexes these as type tokens, not names
_DEFAULT_DIALECT_OPS = {"func.return", "func.func", "builtin.module"}
_FUNC_PROPS = ("sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs")


def parse_module(text: str, filename: str = "<input>", *, verify: bool = True) -> Module:
    """Parse MLIR text into a module; verify it unless ``verify=False``.

    Raises :class:`~quantir.errors.ParseError` (malformed text) or
    :class:`~quantir.errors.VerifyError` (a broken rule), located ``FILE:LINE:COL``.

    >>> m = parse_module('''
    ... func.func @f(%x: tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.5>> {
    ...   %q = quant.qcast %x : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.5>>
    ...   return %q : tensor<4x!quant.uniform<i8:f32, 0.5>>
    ... }''')
    >>> [op.name for op in m.main.ops]
    ['quant.qcast', 'func.return']
    """
    return parse_source(FastSource(text, filename), verify=verify)


def parse_source(source: Source, *, verify: bool = True, start: int = 0, end: int | None = None) -> Module:
    """Like :func:`parse_module` for the text of ``source`` between offsets ``start`` and
    ``end`` (a ``--split-input-file`` chunk, located in the whole file)."""
    parser = _ModuleParser(source, start, end)
    bad = _LONE_SURROGATE.search(source.text, start, len(source.text) if end is None else end)
    if bad:
        raise parser.error_at(bad.start(), f"unexpected character U+{ord(bad.group()):04X}: a lone surrogate is "
                                           f"not text (bytes that are not UTF-8 read with surrogateescape are "
                                           f"U+DC80..U+DCFF)")
    try:
        module = parser.parse_top_level()
    except RecursionError:  # a safety net: nesting limits normally stop well before
        raise parser.error_at(parser.lex.pos, "input nested too deeply for quantir's parser") from None
    if verify:
        from .diagnostics import verify_module
        errors = verify_module(module)
        if errors:
            first = errors[0]
            for e in errors[1:]:
                add_followup(first, "error", e.loc, e.message)  # type: ignore[arg-type]
            raise first
    return module


def _located(module: Module, loc: Location) -> Module:
    module.loc = loc  # type: ignore[attr-defined]  # where `module` was written, for diagnostics
    return module


class _ForwardRef(Value):
    """A placeholder for a value used before its definition."""

    __slots__ = ()


class _Scope:
    """The SSA names of one function body: name -> [(value, location offset)] per result #."""

    def __init__(self) -> None:
        self.entries: dict[str, list[tuple[Value, int] | None]] = {}


class _ModuleParser(ResourceSectionParser):
    def __init__(self, source: Source, start: int = 0, end: int | None = None):
        super().__init__(FastLexer(source, start, end))
        self.forward_refs: dict[int, tuple[_ForwardRef, int]] = {}
        self.unsupported: ParseError | None = None

    def loc(self, pos: int) -> Location:
        return self.source.location(pos)

    # -- top level ------------------------------------------------------------------------------
    def parse_top_level(self) -> Module:
        scope, sink = _Scope(), Block()  # ops quantir cannot hold at the top level land in `sink`
        items: list[tuple[Module | Function, int]] = []
        while True:
            t = self.tok
            if t.kind is Tok.EOF:
                break
            if t.kind is Tok.FILE_METADATA_BEGIN:
                self.parse_file_metadata()
                continue
            if t.kind in (Tok.HASH_ID, Tok.BANG_ID):
                self.parse_alias_definition()
                continue
            item = self._operation(scope, sink, "builtin")
            if item is not None:
                items.append((item, t.pos))
        self._finalize()
        if self.unsupported is not None:
            raise self.unsupported
        modules = [pos for item, pos in items if isinstance(item, Module)]
        if modules and len(items) > 1:
            raise self.error_at(items[1][1], "quantir supports one 'module' per input, without functions "
                                             "beside it")
        if modules:
            return items[0][0]  # type: ignore[return-value]
        return Module([item for item, _ in items])  # type: ignore[misc]

    def _finalize(self) -> None:
        for name, pos in self.location_alias_uses:
            if name not in self.attr_aliases:
                raise self.error_at(pos, "operation location alias was never defined")
        if self.forward_refs:
            uses = sorted(pos for _, pos in self.forward_refs.values())
            err = self.error_at(uses[0], "use of undeclared SSA value name")
            for pos in uses[1:]:
                add_followup(err, "error", self.loc(pos), "use of undeclared SSA value name")
            raise err
        self.fill_resources()

    # -- module ---------------------------------------------------------------------------------
    def _consume_name(self, start: Token) -> None:
        if self.tok.pos == start.pos:  # not yet consumed by the caller
            self.consume()

    def _module(self, start: Token) -> Module:
        self._consume_name(start)
        if start.kind is Tok.STRING:
            return self._generic_module(start)
        name = self.symbol_name(self.consume()) if self.tok.kind is Tok.AT_ID else None
        attrs: dict[str, Attribute] = {}
        if self.tok.kind is Tok.BARE_ID and self.tok.text == "attributes":
            self.consume()
            attrs = self.parse_attr_dict()
        functions = self._module_body()
        self.skip_trailing_location()
        return _located(Module(functions, attrs, name), self.loc(start.pos))

    def _module_body(self) -> list[Function]:
        self.parse_token(Tok.LBRACE, "expected '{' to begin a region")
        functions: list[Function] = []
        if self.tok.kind is Tok.CARET_ID:  # the generic printer's ``^bb0:`` of an empty module
            self.consume()
            self.parse_token(Tok.COLON, "expected ':' after block name")
        scope, sink = _Scope(), Block()
        while not self.consume_if(Tok.RBRACE):
            if self.tok.kind is Tok.CARET_ID:
                raise self.error_here("quantir supports modules with one block")
            item = self._operation(scope, sink, "module")
            if item is not None:
                functions.append(item)  # type: ignore[arg-type]
        return functions

    def _generic_module(self, start: Token) -> Module:
        props = self._generic_header_without_operands()
        self.parse_token(Tok.LPAREN, "expected '(' to start region list")
        functions = self._module_body()
        self.parse_token(Tok.RPAREN, "expected ')' to end region list")
        attrs = self.parse_optional_attr_dict()
        self._unit_function_type()
        for k in ("sym_name", "sym_visibility"):  # the legacy form keeps them in the dictionary
            if k in attrs and k not in props:
                props[k] = attrs.pop(k)
        name = props.pop("sym_name", None)
        props.pop("sym_visibility", None)
        if props:
            raise self.error_at(start.pos, f"'builtin.module' op has unknown properties: {', '.join(sorted(props))}")
        if name is not None and not isinstance(name, StringAttr):
            raise self.error_at(start.pos, "'builtin.module' op attribute 'sym_name' failed to satisfy "
                                           "constraint: string attribute")
        self.skip_trailing_location()
        return _located(Module(functions, attrs, name.value if name is not None else None), self.loc(start.pos))

    def _generic_header_without_operands(self) -> dict[str, Attribute]:
        self.parse_token(Tok.LPAREN, "expected '(' to start operand list")
        if self.tok.kind is not Tok.RPAREN:
            raise self.error_here("expected ')' to end operand list")
        self.consume()
        if self.consume_if(Tok.LESS):
            props = self.parse_attribute()
            self.parse_token(Tok.GREATER, "expected '>' to close properties")
            if not isinstance(props, DictAttr):
                raise self.error_here("expected a dictionary of properties")
            return dict(props.value)
        return {}

    def _unit_function_type(self) -> None:
        self.parse_token(Tok.COLON, "expected ':' followed by operation type")
        pos = self.tok.pos
        t = self.parse_type()
        if t != FunctionType((), ()):
            raise self.error_at(pos, f"expected '() -> ()', got '{t}'")

    # -- functions ------------------------------------------------------------------------------
    def _function(self, start: Token, outer: _Scope | None = None) -> Function:
        self._consume_name(start)
        if start.kind is Tok.STRING:
            return self._generic_function(start)
        loc = self.loc(start.pos)
        visibility = None
        if self.tok.kind is Tok.BARE_ID and self.tok.text in ("private", "public", "nested"):
            visibility = self.consume().text
        if self.tok.kind is not Tok.AT_ID:
            # located at getCurrentLocation(), as in MLIR's parser
            raise self.error_at(self.tok.pos, "custom op 'func.func' expected valid '@'-identifier for symbol name")
        name = self.symbol_name(self.consume())
        args = self._function_arguments()
        results, res_attrs = self._function_results() if self.consume_if(Tok.ARROW) else ((), [])
        attrs: dict[str, Attribute] = {}
        if self.tok.kind is Tok.BARE_ID and self.tok.text == "attributes":
            attr_pos = self.consume().pos
            attrs = self.parse_attr_dict()
            for inferred in ("sym_visibility", "sym_name", "function_type"):
                if inferred in attrs:
                    raise self.error_at(attr_pos, f"custom op 'func.func' '{inferred}' is an inferred attribute "
                                                  "and should not be specified in the explicit attribute dictionary")
        fn_type = FunctionType(tuple(t for _, t, _, _ in args), tuple(results))
        arg_attrs = [a for _, _, a, _ in args]
        fn = Function(name, fn_type, visibility=visibility, arg_attrs=arg_attrs,
                      res_attrs=list(res_attrs) or None, attributes=attrs, loc=loc)
        if self.tok.kind is Tok.LBRACE:
            body_pos = self.tok.pos
            named = [(n, npos, t) for n, t, _, npos in args if n is not None]
            fn.body = self._region(named if named else None, fn, outer)
            if fn.body is None:
                raise self.error_at(body_pos, "custom op 'func.func' expected non-empty function body")
        self.skip_trailing_location()
        return fn

    def _function_arguments(self) -> list[tuple[str | None, Type, dict[str, Attribute], int]]:
        """``(%a: T {attrs} loc(..), ...)`` or ``(T {attrs}, ...)``."""
        args: list[tuple[str | None, Type, dict[str, Attribute], int]] = []
        self.parse_token(Tok.LPAREN, "expected '('")
        if self.consume_if(Tok.RPAREN):
            return args

        def argument():
            t = self.tok
            if t.kind is Tok.PERCENT_ID:
                if args and args[-1][0] is None:
                    raise self.error_at(t.pos, "custom op 'func.func' expected type instead of SSA identifier")
                self.consume()
                if self.tok.kind is Tok.HASH_ID:
                    raise self.error_here("result number not allowed in argument list")
                self.parse_token(Tok.COLON, "expected ':'")
                ty = self.parse_type()
                attrs = self.parse_optional_attr_dict()
                self.skip_trailing_location()
                args.append((t.text, ty, attrs, t.pos))
                return
            if args and args[-1][0] is not None:
                raise self.error_at(t.pos, "custom op 'func.func' expected SSA identifier")
            ty = self.parse_type()
            attrs = self.parse_optional_attr_dict()
            self.skip_trailing_location()
            args.append((None, ty, attrs, t.pos))

        argument()
        while self.consume_if(Tok.COMMA):
            argument()
        self.parse_token(Tok.RPAREN, "expected ')'")
        return args

    def _function_results(self) -> tuple[list[Type], list[dict[str, Attribute]]]:
        if not self.consume_if(Tok.LPAREN):
            return [self.parse_non_function_type()], [{}]
        types: list[Type] = []
        attrs: list[dict[str, Attribute]] = []
        if self.consume_if(Tok.RPAREN):
            return types, attrs

        def result():
            types.append(self.parse_type())
            attrs.append(self.parse_optional_attr_dict())
            self.skip_trailing_location()

        result()
        while self.consume_if(Tok.COMMA):
            result()
        self.parse_token(Tok.RPAREN, "expected ')'")
        return types, attrs

    def _generic_function(self, start: Token) -> Function:
        props = self._generic_header_without_operands()
        self.parse_token(Tok.LPAREN, "expected '(' to start region list")
        fn = Function("", FunctionType((), ()), loc=self.loc(start.pos))
        fn.body = self._region(None, fn, default_dialect="builtin")  # generic ops set no default
        self.parse_token(Tok.RPAREN, "expected ')' to end region list")
        attrs = self.parse_optional_attr_dict()
        self._unit_function_type()
        for k in _FUNC_PROPS:  # the legacy form keeps inherent attributes in the dictionary
            if k in attrs and k not in props:
                props[k] = attrs.pop(k)
        name, ftype = props.pop("sym_name", None), props.pop("function_type", None)
        if not isinstance(name, StringAttr):
            raise self.error_at(start.pos, "'func.func' op requires attribute 'sym_name'")
        if not (isinstance(ftype, TypeAttr) and isinstance(ftype.value, FunctionType)):
            raise self.error_at(start.pos, "'func.func' op requires attribute 'function_type'")
        vis = props.pop("sym_visibility", None)
        arg_attrs = self._attr_dict_list(props.pop("arg_attrs", None), len(ftype.value.inputs), start, "arg_attrs")
        res_attrs = self._attr_dict_list(props.pop("res_attrs", None), len(ftype.value.results), start, "res_attrs")
        if props:
            raise self.error_at(start.pos, f"'func.func' op has unknown properties: {', '.join(sorted(props))}")
        fn.name, fn.type = name.value, ftype.value
        fn.visibility = vis.value if isinstance(vis, StringAttr) else None
        fn.arg_attrs, fn.res_attrs, fn.attributes = arg_attrs, res_attrs, attrs
        self.skip_trailing_location()
        return fn

    def _attr_dict_list(self, attr: Attribute | None, n: int, start: Token, what: str) -> list[dict]:
        if attr is None:
            return [{} for _ in range(n)]
        if not (isinstance(attr, ArrayAttr) and len(attr.value) == n
                and all(isinstance(d, DictAttr) for d in attr.value)):
            raise self.error_at(start.pos, f"'func.func' op expects {what} to be an array of {n} dictionaries")
        return [dict(d.value) for d in attr.value]  # type: ignore[union-attr]

    # -- regions and blocks ---------------------------------------------------------------------
    def _region(self, named_args: list[tuple[str, int, Type]] | None, fn: Function,
                outer: _Scope | None = None, default_dialect: str = "func") -> Block | None:
        """A function body: ``{`` ops ``}`` with one block. None for an empty region."""
        self.parse_token(Tok.LBRACE, "expected '{' to begin a region")
        if named_args is None and self.consume_if(Tok.RBRACE):
            return None
        scope = _Scope()
        block = Block()
        if named_args is not None:
            if self.tok.kind is Tok.CARET_ID:
                raise self.error_here("invalid block name in region with named arguments")
            for name, pos, t in named_args:
                # no shadowing: a nested function's arguments may not reuse visible names
                entries = scope.entries.get(name) or (outer.entries.get(name) if outer is not None else None)
                if entries and entries[0] is not None:
                    err = self.error_at(pos, f"region entry argument '{name}' is already in use")
                    raise self.note(err, entries[0][1], "previously referenced here")
                self._define(scope, name, 0, pos, block.add_argument(t))
        elif self.tok.kind is Tok.CARET_ID:
            self.consume()
            if self.consume_if(Tok.LPAREN) and not self.consume_if(Tok.RPAREN):
                def block_arg():
                    t = self.tok
                    self.parse_token(Tok.PERCENT_ID, "expected SSA operand")
                    self.parse_token(Tok.COLON, "expected ':' and type for SSA operand")
                    self._define(scope, t.text, 0, t.pos, block.add_argument(self.parse_type()))
                    self.skip_trailing_location()

                block_arg()
                while self.consume_if(Tok.COMMA):
                    block_arg()
                self.parse_token(Tok.RPAREN, "expected ')'")
            self.parse_token(Tok.COLON, "expected ':' after block name")
        while True:
            t = self.tok
            if t.kind is Tok.RBRACE:
                self.consume()
                break
            if t.kind is Tok.CARET_ID:
                raise self.error_here("quantir supports function bodies of one block")
            self._operation(scope, block, "func", default_dialect)
        if named_args is not None and not block.ops and not block.arguments:
            return None
        return block

    # -- operations -----------------------------------------------------------------------------
    def _operation(self, scope: _Scope, block: Block, context: str = "func",
                   default_dialect: str | None = None) -> Module | Function | None:
        """One op. ``context`` is where it sits: ``func`` (a function body), ``module`` (a module
        body) or ``builtin`` (the top level). ``func.func`` and ``module`` are returned; other
        ops are appended to ``block``. Outside functions those can only be parsed, not kept:
        the first one becomes an error reported once the whole input has parsed."""
        start = self.tok
        results: list[tuple[str, int, int]] = []  # (name, count, pos)
        if start.kind is Tok.PERCENT_ID:
            def result():
                t = self.tok
                self.parse_token(Tok.PERCENT_ID, "expected valid ssa identifier")
                count = 1
                if self.consume_if(Tok.COLON):
                    c = self.tok
                    if c.kind is not Tok.INTEGER:
                        raise self.wrong_token_error("expected integer number of results")
                    count = int(c.text, 16) if c.text.startswith("0x") else int(c.text)
                    if count < 1:
                        raise self.error_here("expected named operation to have at least 1 result")
                    self.consume()
                results.append((t.text, count, t.pos))

            result()
            while self.consume_if(Tok.COMMA):
                result()
            self.parse_token(Tok.EQUAL, "expected '=' after SSA name")
        name_tok = self.tok
        if name_tok.kind is Tok.BARE_ID and not _INT_TYPE.match(name_tok.text):  # `i32` is no op name
            self.consume()  # MLIR consumes the name (lexing the next token) before looking it up
            name = self._custom_name(name_tok, default_dialect or ("func" if context == "func" else "builtin"))
        elif name_tok.kind is Tok.STRING:
            name = self.string_value(name_tok)
        else:
            raise self.wrong_token_error("expected operation name in quotes")
        if name in ("func.func", "builtin.module"):
            if name == "func.func":
                item = self._function(name_tok, outer=scope if context == "func" else None)
            else:
                item = self._module(name_tok)
            if results:
                raise self.error_at(start.pos, "cannot name an operation with no results")
            if context == "func" or (context == "module" and name == "builtin.module"):
                # parsed in full, as MLIR does; quantir has no place for it
                self.defer(name_tok.pos, f"quantir does not support nested '{name}' operations")
                return None
            return item
        if name_tok.kind is Tok.BARE_ID:
            op = self._custom_operation(name, name_tok, scope)
        else:
            op = self._generic_operation(scope)
        self.skip_trailing_location()
        if results:
            expected = sum(c for _, c, _ in results)
            if not op.results:
                raise self.error_at(start.pos, "cannot name an operation with no results")
            if expected != len(op.results):
                raise self.error_at(start.pos, f"operation defines {len(op.results)} results but was "
                                               f"provided {expected} to bind")
            i = 0
            for rname, count, pos in results:
                for sub in range(count):
                    self._define(scope, rname, sub, pos, op.results[i])
                    i += 1
        block.append(op)
        if context != "func":
            where = "at the top level" if context == "builtin" else "in a module"
            self.defer(name_tok.pos, f"quantir supports only 'func.func' and 'module' operations {where}, "
                                     f"not '{op.name}'")
        return None

    def _custom_name(self, t: Token, default_dialect: str) -> str:
        """The op a custom-form name stands for: a name without a dialect is looked up in the
        default dialect (``func`` in a function body, ``builtin`` outside)."""
        name = t.text
        dialect, dot, rest = name.partition(".")
        if dot and rest:
            return name
        if f"{default_dialect}.{name}" in _DEFAULT_DIALECT_OPS:
            return f"{default_dialect}.{name}"
        if dot:  # `func.`: MLIR tries the default dialect too
            raise self.error_at(t.pos, f"custom op '{name}' is unknown (tried '{default_dialect}.{name}' as well)")
        raise self.error_at(t.pos, f"custom op '{name}' is unknown (tried '{default_dialect}.{name}' as well)")

    def _custom_operation(self, name: str, t: Token, scope: _Scope) -> Operation:
        dialect = name.split(".", 1)[0]
        loc = self.loc(t.pos)
        if name in _QUANT_CASTS:
            return self._quant_cast(_QUANT_CASTS[name], scope, loc)
        if name == "func.return":
            return self._return(scope, loc)
        if name == "arith.constant":
            return self._constant(loc)
        opdef = _opdef.lookup(name)
        if opdef is linalg.GENERIC:
            return self._linalg_generic(scope, loc)
        if opdef in (linalg.YIELD, tensor.EMPTY):
            return self._yield_or_empty(opdef, scope, loc)
        if opdef is not None and (opdef in arith_ops.SYNTAX or opdef in tensor.ASM_NAMES or opdef in shape.SYNTAX):
            return self._lowering_op(opdef, scope, loc)
        if dialect in _KNOWN_DIALECTS:
            raise self.error_at(t.pos, f"custom op '{name}' is unknown")
        err = self.error_at(t.pos, f"Dialect `{dialect}' not found for custom op '{name}' ")
        raise self.note(err, t.pos, "Available dialects: arith, builtin, func, quant ; for more info on dialect "
                                    "registration see https://mlir.llvm.org/getting_started/Faq/"
                                    "#registered-loaded-dependent-whats-up-with-dialects-management")

    def _ssa_use(self) -> tuple[str, int, int]:
        t = self.tok
        self.parse_token(Tok.PERCENT_ID, "expected SSA operand")
        number = 0
        if self.tok.kind is Tok.HASH_ID:
            h = self.tok
            if not h.text[1:].isdigit() or len(h.text) > MAX_INT_DIGITS:
                raise self.error_here("invalid SSA value result number")
            number = int(h.text[1:])
            self.consume()
        return t.text, number, t.pos

    def _quant_cast(self, opdef, scope: _Scope, loc: Location) -> Operation:
        """``$input attr-dict `:` type($input) `to` type($result)``."""
        use = self._ssa_use()
        attrs = self.parse_optional_attr_dict()
        self.parse_token(Tok.COLON, "expected ':'")
        in_type = self.parse_type()
        if not (self.tok.kind is Tok.BARE_ID and self.tok.text == "to"):
            raise self.error_at(self.tok.pos, f"custom op '{opdef.name}' expected 'to'")  # getCurrentLocation()
        self.consume()
        out_type = self.parse_type()
        operand = self._resolve(scope, use, in_type)
        return Operation(opdef, [operand], [out_type], attrs, loc)

    def _lowering_op(self, opdef, scope: _Scope, loc: Location) -> Operation:
        """The custom forms of :mod:`quantir.ir.dialects.arith_ops`, ``tensor`` and ``shape``
        (see the printer)."""
        if opdef in shape.SYNTAX or opdef in (tensor.FROM_ELEMENTS, tensor.RESHAPE):
            return self._shape_op(opdef, scope, loc)
        kind = arith_ops.SYNTAX.get(opdef)
        attrs = self.parse_optional_attr_dict() if opdef is tensor.DIM else {}
        first = self._ssa_use()
        sizes = []
        if opdef is tensor.SPLAT and self.consume_if(Tok.LSQUARE):
            if self.tok.kind is not Tok.RSQUARE:
                sizes.append(self._ssa_use())
                while self.consume_if(Tok.COMMA):
                    sizes.append(self._ssa_use())
            self.parse_token(Tok.RSQUARE, "expected ']'")
        second = None
        if kind == "binary" or opdef is tensor.DIM:
            self.parse_token(Tok.COMMA, "expected ','")
            second = self._ssa_use()
        if opdef is not tensor.DIM:
            attrs = self.parse_optional_attr_dict()
        self.parse_token(Tok.COLON, "expected ':'")
        t = self.parse_type()
        index = IndexType()
        if kind == "binary":
            operands, result = [self._resolve(scope, first, t), self._resolve(scope, second, t)], t
        elif kind == "unary":
            operands, result = [self._resolve(scope, first, t)], t
        elif kind == "cast":
            if not (self.tok.kind is Tok.BARE_ID and self.tok.text == "to"):
                raise self.error_at(self.tok.pos, f"custom op '{opdef.name}' expected 'to'")
            self.consume()
            result = self.parse_type()
            operands = [self._resolve(scope, first, t)]
        elif opdef is tensor.SPLAT:
            if not isinstance(t, TensorType):
                raise self.error_at(self.tok.pos, f"custom op '{opdef.name}' expected a tensor type")
            operands = [self._resolve(scope, first, t.element_type)]
            operands += [self._resolve(scope, u, index) for u in sizes]
            result = t
        else:  # tensor.dim
            operands, result = [self._resolve(scope, first, t), self._resolve(scope, second, index)], index
        return Operation(opdef, operands, [result], attrs, loc)

    def _operand_list(self) -> list[tuple[str, int, int]]:
        uses = []
        if self.tok.kind is Tok.PERCENT_ID:
            uses.append(self._ssa_use())
            while self.consume_if(Tok.COMMA):
                uses.append(self._ssa_use())
        return uses

    def _type_list(self, n: int, what: str) -> list[Type]:
        types = [self.parse_type()] if n else []
        while len(types) < n:
            self.parse_token(Tok.COMMA, f"expected ',' in {what}")
            types.append(self.parse_type())
        return types

    def _yield_or_empty(self, opdef, scope: _Scope, loc: Location) -> Operation:
        """``linalg.yield %a, ... : T, ...`` and ``tensor.empty(%d, ...) : T``."""
        if opdef is tensor.EMPTY:
            self.parse_token(Tok.LPAREN, "expected '('")
            uses = self._operand_list()
            self.parse_token(Tok.RPAREN, "expected ')'")
        else:
            uses = self._operand_list()
        attrs = self.parse_optional_attr_dict()
        if opdef is tensor.EMPTY:
            self.parse_token(Tok.COLON, "expected ':'")
            result = self.parse_type()
            return Operation(opdef, [self._resolve(scope, u, IndexType()) for u in uses], [result], attrs, loc)
        types = []
        if uses:
            self.parse_token(Tok.COLON, "expected ':'")
            types = self._type_list(len(uses), "yield types")
        return Operation(opdef, [self._resolve(scope, u, t) for u, t in zip(uses, types)], [], attrs, loc)

    def _linalg_generic(self, scope: _Scope, loc: Location) -> Operation:
        """``linalg.generic {indexing_maps = [...], iterator_types = [...]} ins(... : ...)
        outs(... : ...) { ^bb0(...): ... } -> T`` with parallel loops only (what the quant
        lowering emits)."""
        pos = self.tok.pos
        attrs = self.parse_optional_attr_dict()
        maps = attrs.pop("indexing_maps", None)
        loops = attrs.pop("iterator_types", None)
        if not (isinstance(maps, ArrayAttr) and all(isinstance(m, linalg.AffineMapAttr) for m in maps.value)):
            raise self.error_at(pos, "custom op 'linalg.generic' expects 'indexing_maps' to be an array of affine maps")
        if not (isinstance(loops, ArrayAttr) and all(getattr(x, "value", None) == "parallel" for x in loops.value)):
            raise self.error_at(pos, "quantir reads linalg.generic with parallel iterator_types only")
        groups = {}
        for word in ("ins", "outs"):
            if self.tok.kind is Tok.BARE_ID and self.tok.text == word:
                self.consume()
                self.parse_token(Tok.LPAREN, "expected '('")
                uses = self._operand_list()
                self.parse_token(Tok.COLON, "expected ':'")
                types = self._type_list(len(uses), f"'{word}' types")
                self.parse_token(Tok.RPAREN, "expected ')'")
                groups[word] = [self._resolve(scope, u, t) for u, t in zip(uses, types)]
        body = self._region(None, None)  # type: ignore[arg-type]
        if body is None or not body.ops or body.ops[-1].opdef is not linalg.YIELD:
            raise self.error_at(pos, "linalg.generic's body must end with linalg.yield")
        results = []
        if self.consume_if(Tok.ARROW):
            results = [self.parse_type()]
            while self.consume_if(Tok.COMMA):
                results.append(self.parse_type())
        ins, outs = groups.get("ins", []), groups.get("outs", [])
        if [v.type for v in outs] != results:
            raise self.error_at(pos, "linalg.generic's result types must be its 'outs' types")
        op = linalg.generic(ins, outs, maps.value, body, loc)
        op.attributes.update(attrs)
        return op

    def _shape_op(self, opdef, scope: _Scope, loc: Location) -> Operation:
        """``shape.X %a : T -> R``, ``tensor.from_elements %a, ... : T`` and
        ``tensor.reshape %a(%s) : (T, S) -> R``."""
        uses = [self._ssa_use()]
        if opdef is tensor.RESHAPE:
            self.parse_token(Tok.LPAREN, "expected '('")
            uses.append(self._ssa_use())
            self.parse_token(Tok.RPAREN, "expected ')'")
        while opdef is tensor.FROM_ELEMENTS and self.consume_if(Tok.COMMA):
            uses.append(self._ssa_use())
        attrs = self.parse_optional_attr_dict()
        self.parse_token(Tok.COLON, "expected ':'")
        if opdef is tensor.RESHAPE:
            self.parse_token(Tok.LPAREN, "expected '('")
            types = [self.parse_type()]
            self.parse_token(Tok.COMMA, "expected ','")
            types.append(self.parse_type())
            self.parse_token(Tok.RPAREN, "expected ')'")
        else:
            types = [self.parse_type()]
        if opdef is tensor.FROM_ELEMENTS:
            result = types[0]
            if not isinstance(result, TensorType):
                raise self.error_at(self.tok.pos, f"custom op '{opdef.name}' expected a tensor type")
            types = [result.element_type] * len(uses)
        else:
            self.parse_token(Tok.ARROW, "expected '->'")
            result = self.parse_type()
        operands = [self._resolve(scope, u, t) for u, t in zip(uses, types)]
        return Operation(opdef, operands, [result], attrs, loc)

    def _return(self, scope: _Scope, loc: Location) -> Operation:
        """``attr-dict ($operands^ `:` type($operands))?``."""
        attrs = self.parse_optional_attr_dict()
        uses = []
        if self.tok.kind is Tok.PERCENT_ID:
            first = self.tok.pos
            uses.append(self._ssa_use())
            while self.consume_if(Tok.COMMA):
                uses.append(self._ssa_use())
            self.parse_token(Tok.COLON, "expected ':'")
            types = [self.parse_type()]
            while self.consume_if(Tok.COMMA):
                types.append(self.parse_type())
            if len(types) != len(uses):
                raise self.error_at(first, f"custom op 'func.return' number of operands and types do not match: "
                                           f"got {len(uses)} operands and {len(types)} types")
            operands = [self._resolve(scope, u, ty) for u, ty in zip(uses, types)]
        else:
            operands = []
        return Operation(func.RETURN, operands, [], attrs, loc)

    def _constant(self, loc: Location) -> Operation:
        """``attr-dict $value``: the result type is the value's type."""
        attrs = self.parse_optional_attr_dict()
        pos = self.tok.pos
        value = self.parse_attribute()
        if isinstance(value, (UnitAttr, ArrayAttr, DictAttr, DenseArrayAttr, TypeAttr, SymbolRefAttr)):
            raise self.error_at(pos, "custom op 'arith.constant' invalid kind of attribute specified")
        attrs["value"] = value
        t = IntegerType(1) if isinstance(value, BoolAttr) else getattr(value, "type", NoneType())
        return Operation(arith.CONSTANT, [], [t], attrs, loc)

    def _generic_operation(self, scope: _Scope) -> Operation:
        t = self.consume()
        name = self.string_value(t)
        if not name:
            raise self.error_at(t.pos, "empty operation name is invalid")
        if "\0" in name:
            raise self.error_at(t.pos, "null character not allowed in operation name")
        opdef = _opdef.lookup(name) or _opdef.unregistered(name)
        self.parse_token(Tok.LPAREN, "expected '(' to start operand list")
        uses = []
        if self.tok.kind is Tok.PERCENT_ID:
            uses.append(self._ssa_use())
            while self.consume_if(Tok.COMMA):
                uses.append(self._ssa_use())
        self.parse_token(Tok.RPAREN, "expected ')' to end operand list")
        if self.tok.kind is Tok.LSQUARE:
            raise self.error_here("quantir does not support successors")
        props: dict[str, Attribute] = {}
        if self.consume_if(Tok.LESS):
            p = self.parse_attribute()
            self.parse_token(Tok.GREATER, "expected '>' to close properties")
            if not isinstance(p, DictAttr):
                raise self.error_at(t.pos, f"quantir supports only a dictionary as properties of '{name}'")
            if not opdef.registered:
                self.defer(t.pos, f"quantir does not support properties on unregistered operation '{name}'")
            else:
                props = dict(p.value)
        if self.tok.kind is Tok.LPAREN:
            raise self.error_here("quantir does not support regions on this operation")
        attrs = self.parse_optional_attr_dict()
        colon = self.tok.pos
        self.parse_token(Tok.COLON, "expected ':' followed by operation type")
        type_pos = self.tok.pos
        fn_type = self.parse_type()
        if not isinstance(fn_type, FunctionType):
            raise self.error_at(type_pos, "expected function type")
        del colon
        if len(fn_type.inputs) != len(uses):
            plural = "\0" if len(uses) == 1 else "s"  # MLIR's `"s"[n == 1]`: a NUL, faithfully
            raise self.error_at(type_pos, f"expected {len(uses)} operand type{plural} but had {len(fn_type.inputs)}")
        operands = [self._resolve(scope, u, ty) for u, ty in zip(uses, fn_type.inputs)]
        return Operation(opdef, operands, list(fn_type.results), {**attrs, **props}, self.loc(t.pos))

    # -- SSA names ------------------------------------------------------------------------------
    def _resolve(self, scope: _Scope, use: tuple[str, int, int], t: Type) -> Value:
        name, number, pos = use
        entries = scope.entries.setdefault(name, [])
        if number < len(entries) and entries[number] is not None:
            value, vpos = entries[number]  # type: ignore[misc]
            if value.type == t:
                return value
            err = self.error_at(pos, f"use of value '{name}' expects different type than prior uses: "
                                     f"'{t}' vs '{value.type}'")
            raise self.note(err, vpos, "prior use here")
        if len(entries) <= number:
            entries.extend([None] * (number + 1 - len(entries)))
        if entries[0] is not None and not isinstance(entries[0][0], _ForwardRef):
            raise self.error_at(pos, "reference to invalid result number")
        ref = _ForwardRef(t)
        entries[number] = (ref, pos)
        self.forward_refs[id(ref)] = (ref, pos)
        return ref

    def _define(self, scope: _Scope, name: str, number: int, pos: int, value: Value) -> None:
        entries = scope.entries.setdefault(name, [])
        if len(entries) <= number:
            entries.extend([None] * (number + 1 - len(entries)))
        existing = entries[number]
        if existing is not None:
            old, opos = existing
            if not isinstance(old, _ForwardRef):
                err = self.error_at(pos, f"redefinition of SSA value '{name}'")
                raise self.note(err, opos, "previously defined here")
            if old.type != value.type:
                err = self.error_at(pos, f"definition of SSA value '{name}#{number}' has type '{value.type}'")
                raise self.note(err, opos, f"previously used here with type '{old.type}'")
            old.replace_all_uses_with(value)
            del self.forward_refs[id(old)]
        entries[number] = (value, pos)

