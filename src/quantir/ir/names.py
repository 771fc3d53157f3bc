"""The names a function's inputs and outputs go by outside the IR (feeds, results, exported models).

An argument or result named by its ``quantir.name`` attribute keeps that name; others are
``arg<i>`` and, for results, the value's name hint or ``out<i>``.
"""
from __future__ import annotations

from .attributes import StringAttr
from .core import Function


def input_names(fn: Function) -> list[str]:
    return [_attr_name(fn.arg_attrs[i] if i < len(fn.arg_attrs) else {}, f"arg{i}")
            for i in range(len(fn.arguments))]


def output_names(fn: Function) -> list[str]:
    return [_attr_name(fn.res_attrs[i] if i < len(fn.res_attrs) else {}, v.name_hint or f"out{i}")
            for i, v in enumerate(fn.outputs)]


def _attr_name(attrs, default: str) -> str:
    a = attrs.get("quantir.name")
    return a.value if isinstance(a, StringAttr) else default
