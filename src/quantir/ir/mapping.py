"""``IRMapping``: which new thing stands for each value of the function being rewritten.

Every pass that builds one function from another (the lowering, the ONNX export, the uint8
re-encoding, a clone) walks the source in order and needs, for each source value, its version
in the output. This is that map, in the spirit of MLIR's ``IRMapping``: values are keys by
identity, the mapped-to side is usually a ``Value`` of the new function but may be anything a
backend keeps per value (the TFLite export keeps its tensor indices), and a miss is an error
that names the value instead of a bare ``KeyError``.
"""
from __future__ import annotations

from typing import Generic, Iterable, Iterator, TypeVar

from ..errors import VerifyError
from .core import BlockArgument, OpResult, Value

__all__ = ["IRMapping", "describe_value"]

T = TypeVar("T")


def describe_value(v: Value) -> str:
    """A value as an error message names it: ``'conv1'`` (its name hint), else where it comes
    from: ``#0 of 'nn.add' (node 'Add_3')`` or ``argument #2``."""
    if v.name_hint:
        return f"'{v.name_hint}'"
    if isinstance(v, OpResult):
        return f"#{v.index} of {v.op.describe()}"
    if isinstance(v, BlockArgument):
        return f"argument #{v.index}"
    return repr(v)


class IRMapping(Generic[T]):
    """Source values -> their versions (``IRMapping()`` maps to ``Value``\\ s; a backend may map to
    its own handles, e.g. ``IRMapping[dict[Form, int]]``).

    ``map`` binds (re-binding replaces), ``lookup`` reads and raises ``VerifyError`` naming the
    value when it is not mapped (in an op-by-op walk: used before its definition was visited),
    ``lookup_or_none`` reads without failing. ``m[v]`` is ``m.lookup(v)`` and ``v in m`` is
    ``m.contains(v)``; there is no ``m[v] = x``, so every binding goes through ``map``.
    """

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[Value, T] = {}

    def map(self, src: Value, new: T) -> T:
        """Bind ``src`` to ``new``; returns ``new``."""
        self._map[src] = new
        return new

    def map_all(self, sources: Iterable[Value], news: Iterable[T]) -> None:
        """Bind each of ``sources`` to the corresponding one of ``news`` (the same number of each)."""
        sources, news = list(sources), list(news)
        if len(sources) != len(news):
            raise ValueError(f"cannot map {len(sources)} values to {len(news)}")
        for s, n in zip(sources, news):
            self._map[s] = n

    def lookup(self, src: Value) -> T:
        try:
            return self._map[src]
        except KeyError:
            raise VerifyError(f"value {describe_value(src)} is used before it is defined") from None

    def lookup_or_none(self, src: Value) -> T | None:
        return self._map.get(src)

    def contains(self, src: Value) -> bool:
        return src in self._map

    __getitem__ = lookup
    __contains__ = contains

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[Value]:
        """The mapped source values, in the order they were first mapped."""
        return iter(self._map)

    def __repr__(self) -> str:
        return f"<IRMapping of {len(self._map)} values>"
