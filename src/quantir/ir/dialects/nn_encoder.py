"""Ops that transformer exports write beside the data path: ``nn.gather_elements``,
``nn.gather_nd``, ``nn.cum_sum``, ``nn.trilu``, ``nn.einsum``, and ``nn.dynamic_expand`` /
``nn.dynamic_slice`` (Expand and Slice with shapes and bounds known only at run time, as Hugging
Face builds its 4-D attention mask and slices its token-type buffer).

None of them decides a result shape from a run-time value, so CumSum's ``axis`` and Trilu's
``k`` stay operands (as in ONNX) and the kernels read them. Einsum's equation is parsed once,
here (:func:`parse_einsum`), for the type rule, the importer (which turns matmul-like
equations into ``nn.matmul``) and the kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ShapeError
from ...types import IntegerType
from .nn_base import INT, INTS, STRING, Dim, define, elt, fmt_shape, normalize_axis, opt, shape_of, tensor, variadic


def _gather_elements(types, attrs):
    data, indices = shape_of(types[0]), shape_of(types[1])
    if not isinstance(elt(types[1]), IntegerType):
        raise ShapeError(f"gather_elements indices must be integers, got '{types[1]}'")
    if data is not None and indices is not None:
        if len(data) != len(indices):
            raise ShapeError(f"gather_elements data {fmt_shape(data)} and indices {fmt_shape(indices)} must "
                             f"have one rank")
        axis = normalize_axis(attrs["axis"], len(data))
        if any(i is not None and d is not None and i > d for a, (i, d) in enumerate(zip(indices, data)) if a != axis):
            raise ShapeError(f"gather_elements indices {fmt_shape(indices)} are larger than data {fmt_shape(data)} "
                             f"outside axis {axis}")
    return [tensor(indices, elt(types[0]))]


def _gather_nd(types, attrs):
    data, indices = shape_of(types[0]), shape_of(types[1])
    if not isinstance(elt(types[1]), IntegerType):
        raise ShapeError(f"gather_nd indices must be integers, got '{types[1]}'")
    b = attrs["batch_dims"]
    if data is None or indices is None or not indices or indices[-1] is None:
        return [tensor(None, elt(types[0]))]
    r = indices[-1]
    if r < 1 or b < 0 or b >= min(len(data), len(indices)) or b + r > len(data):
        raise ShapeError(f"gather_nd with batch_dims {b}: indices {fmt_shape(indices)} do not index data "
                         f"{fmt_shape(data)} (need batch_dims < both ranks and batch_dims + {r} <= {len(data)})")
    return [tensor(indices[:-1] + data[b + r:], elt(types[0]))]


def _same_type(types, attrs):
    return [types[0]]


def _scalar_int(t, what: str) -> None:
    s = shape_of(t)
    if not isinstance(elt(t), IntegerType) or (s is not None and len(s) > 1) or (s and s[0] not in (1, None)):
        raise ShapeError(f"{what} must be an integer scalar (or 1-element tensor), got '{t}'")


def _cum_sum(types, attrs):
    _scalar_int(types[1], "cum_sum axis")
    return [types[0]]


def _trilu(types, attrs):
    s = shape_of(types[0])
    if s is not None and len(s) < 2:
        raise ShapeError(f"trilu needs a rank >= 2 input, got '{types[0]}'")
    if len(types) > 1:
        _scalar_int(types[1], "trilu k")
    return [types[0]]


def _dynamic_expand(types, attrs):
    """The rank is the shape operand's length (or the data's, if larger); ``dims`` holds the
    result dims the importer proved (``-1``: known only at run time)."""
    s, data = shape_of(types[1]), shape_of(types[0])
    if s is None or len(s) != 1 or s[0] is None or not isinstance(elt(types[1]), IntegerType):
        raise ShapeError(f"dynamic_expand needs its shape as a 1-D integer tensor of static length, got "
                         f"'{types[1]}'")
    dims = tuple(attrs["dims"])
    rank = max(s[0], len(data)) if data is not None else s[0]
    if len(dims) != rank or any(d < -1 for d in dims):
        raise ShapeError(f"dynamic_expand dims {dims} must be {rank} sizes >= 0 or -1 (unknown)")
    return [tensor(tuple(None if d == -1 else d for d in dims), elt(types[0]))]


def _dynamic_slice(types, attrs):
    """ONNX Slice with its bounds as run-time operands; ``dims`` as in ``dynamic_expand``."""
    for name, t in zip(("starts", "ends", "axes", "steps"), types[1:]):
        if not isinstance(elt(t), IntegerType) or (shape_of(t) is not None and len(shape_of(t)) != 1):
            raise ShapeError(f"dynamic_slice {name} must be a 1-D integer tensor, got '{t}'")
    dims = tuple(attrs["dims"])
    data = shape_of(types[0])
    if (data is not None and len(dims) != len(data)) or any(d < -1 for d in dims):
        raise ShapeError(f"dynamic_slice dims {dims} must be one size >= 0 or -1 (unknown) per dim of "
                         f"'{types[0]}'")
    return [tensor(tuple(None if d == -1 else d for d in dims), elt(types[0]))]


# -- einsum -------------------------------------------------------------------------------------

ELLIPSIS = "."   # one character standing for the ellipsis in parsed terms


@dataclass(frozen=True)
class Einsum:
    """A parsed equation: one term per input and the output term, each a string of letters in
    which ``.`` stands for the ellipsis (``"...ij"`` becomes ``".ij"``)."""

    inputs: tuple[str, ...]
    output: str

    def spelled(self) -> str:
        def term(t: str) -> str:
            return t.replace(ELLIPSIS, "...")
        return ",".join(map(term, self.inputs)) + "->" + term(self.output)


def parse_einsum(equation: str, n_inputs: int | None = None) -> Einsum:
    """``"bij, bjk -> bik"`` -> ``Einsum(("bij", "bjk"), "bik")``; implicit output (no ``->``):
    the letters used once, in alphabetical order, after the ellipsis. ``ShapeError`` says what
    is malformed."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    if "->" in rhs:
        raise ShapeError(f"einsum equation {equation!r} has more than one '->'")
    terms = lhs.split(",")
    if n_inputs is not None and len(terms) != n_inputs:
        raise ShapeError(f"einsum equation {equation!r} names {len(terms)} operands, the op has {n_inputs}")
    parsed = [_term(t, equation) for t in terms]
    if arrow:
        out = _term(rhs, equation)
        if len(set(out)) != len(out):
            raise ShapeError(f"einsum equation {equation!r} repeats a label in its output")
        seen = set("".join(parsed))
        if any(c not in seen for c in out):
            raise ShapeError(f"einsum equation {equation!r}: output labels must appear in an input")
    else:
        letters = "".join(parsed).replace(ELLIPSIS, "")
        out = (ELLIPSIS if any(ELLIPSIS in t for t in parsed) else "") + \
            "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return Einsum(tuple(parsed), out)


def _term(t: str, equation: str) -> str:
    if t.count("...") > 1 or t.replace("...", "").count(".") or (t.count(".") % 3):
        raise ShapeError(f"einsum equation {equation!r}: term {t!r} has a malformed ellipsis")
    t = t.replace("...", ELLIPSIS)
    bad = [c for c in t if c != ELLIPSIS and not c.isalpha()]
    if bad:
        raise ShapeError(f"einsum equation {equation!r}: {bad[0]!r} is not a label (expected letters, ',', "
                         f"'...' and '->')")
    return t


def einsum_dims(spec: Einsum, shapes: list[tuple[Dim, ...]]) -> tuple[dict[str, Dim], tuple[Dim, ...]]:
    """Each label's size and the ellipsis's dims (right-aligned broadcast), checking the ranks."""
    sizes: dict[str, Dim] = {}
    ellipses: list[tuple[Dim, ...]] = []
    for term, shape in zip(spec.inputs, shapes):
        letters = len(term) - (ELLIPSIS in term)
        if len(shape) < letters or (ELLIPSIS not in term and len(shape) != letters):
            raise ShapeError(f"einsum term {term.replace(ELLIPSIS, '...')!r} does not fit an operand of shape "
                             f"{fmt_shape(shape)} ({spec.spelled()})")
        n_ell = len(shape) - letters
        dims = list(shape)
        pos = term.find(ELLIPSIS)
        if pos >= 0:
            ellipses.append(tuple(dims[pos:pos + n_ell]))
            dims[pos:pos + n_ell] = [None]   # one placeholder so letters line up
        for c, d in zip(term, dims):
            if c == ELLIPSIS:
                continue
            known = sizes.get(c)
            if known is not None and d is not None and known != d and 1 not in (known, d):
                raise ShapeError(f"einsum label {c!r} has sizes {known} and {d} ({spec.spelled()})")
            if known is None or known == 1:
                sizes[c] = d if known is None or d is not None else known
    rank = max((len(e) for e in ellipses), default=0)
    ell: list[Dim] = []
    for i in range(rank):
        dims = {e[len(e) - rank + i] for e in ellipses if len(e) - rank + i >= 0}
        fixed = {d for d in dims if d not in (None, 1)}
        if len(fixed) > 1:
            raise ShapeError(f"einsum ellipsis dims do not broadcast: {sorted(fixed)} ({spec.spelled()})")
        ell.append(fixed.pop() if fixed else (None if None in dims else 1))
    return sizes, tuple(ell)


def _einsum(types, attrs):
    spec = parse_einsum(attrs["equation"], len(types))
    if len({elt(t) for t in types}) != 1:
        raise ShapeError(f"einsum operands must share one element type, got {', '.join(str(t) for t in types)}")
    shapes = [shape_of(t) for t in types]
    if any(s is None for s in shapes):
        return [tensor(None, elt(types[0]))]
    sizes, ell = einsum_dims(spec, shapes)
    out: list[Dim] = []
    for c in spec.output:
        out.extend(ell if c == ELLIPSIS else (sizes[c],))
    return [tensor(tuple(out), elt(types[0]))]


GATHER_ELEMENTS = define("gather_elements", ("data", "indices"), ("output",), {"axis": INT(0)},
                         _gather_elements,
                         summary="output[i...] = data[... indices[i...] at ``axis`` ...] (negative indices count "
                                 "from the end).")
GATHER_ND = define("gather_nd", ("data", "indices"), ("output",), {"batch_dims": INT(0)}, _gather_nd,
                   summary="Slices of ``data`` addressed by the last dim of ``indices`` (ONNX GatherND).")
CUM_SUM = define("cum_sum", ("x", "axis"), ("y",), {"exclusive": INT(0), "reverse": INT(0)}, _cum_sum,
                 summary="Running sum along the run-time scalar ``axis`` (optionally exclusive / reversed).")
TRILU = define("trilu", ("input", opt("k")), ("output",), {"upper": INT(1)}, _trilu,
               summary="Keep the upper (or lower) triangle of the last two dims, from diagonal ``k``.")
DYNAMIC_EXPAND = define(
    "dynamic_expand", ("input", "shape"), ("output",), {"dims": INTS(required=True)}, _dynamic_expand,
    summary="ONNX Expand to a shape computed at run time (an i64 operand); ``dims`` are the result dims known "
            "before running (-1: unknown).")
DYNAMIC_SLICE = define(
    "dynamic_slice", ("data", "starts", "ends", opt("axes"), opt("steps")), ("output",),
    {"dims": INTS(required=True)}, _dynamic_slice,
    summary="ONNX Slice whose bounds are computed at run time (i64 operands); ``dims`` are the result dims "
            "known before running (-1: unknown).")
EINSUM = define("einsum", (variadic("inputs"),), ("output",), {"equation": STRING(required=True)}, _einsum,
                summary="numpy.einsum in float; matmul-like equations are imported as ``nn.matmul`` instead.")
