"""Unique names for exported tensors and nodes, linear in the number of names.

Both exporters name thousands of things after a few bases (``filter/ohwi``, ``shape``, a node's
op type). Probing ``base_1, base_2, ...`` from 1 on every call made exporting n ops of one base
quadratic; names are never released, so each base remembers the first suffix not yet tried.
"""
from __future__ import annotations


def unique_name(base: str, sep: str, taken: set[str], next_suffix: dict[str, int], *,
                allow_empty: bool = False) -> str:
    """``base`` if free (and non-empty, unless ``allow_empty``), else the first free
    ``base<sep><k>``, k = 1, 2, ...; adds it to ``taken``. ``next_suffix[base]`` remembers the
    first k not yet tried, valid because ``taken`` only grows."""
    k = next_suffix.get(base, 0)
    name = base if k == 0 else f"{base}{sep}{k}"
    while name in taken or not (name or allow_empty):
        k += 1
        name = f"{base}{sep}{k}"
    next_suffix[base] = k + 1
    taken.add(name)
    return name
