"""Final quantization parameters of every activation tensor, from ranges and the spec.

- A tensor's range comes from its observers through the calibration callback (a constant
  operand's range from its values).
- Same-scale ops (pooling, reshape, transpose, pad, resize, concat: ``spec.SPEC`` rows whose
  output is ``SAME_AS``) put their inputs and output in one class (union-find); a class's
  range is the union of its members' ranges, so no requantize is needed inside it.
- Fixed-output ops (softmax, logistic, tanh) win: their class gets the fixed parameters.
- Parameters are LiteRT's: asymmetric int8 per tensor, real 0 exactly representable
  (``numerics.asymmetric_qparams``, TFLite scheme).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ir import Value
from ..numerics import asymmetric_qparams
from . import spec
from .calibrate import CalibrationInfo, Statistics, constant_array, default_callback
from .config import Config
from .methods import Range
from .patterns import Annotation, Region


@dataclass(frozen=True)
class ActParams:
    """int8 per-tensor parameters of one activation tensor."""

    scale: float          # a float32 value
    zero_point: int
    fixed: bool = False   # imposed by the op (softmax ...), not calibrated
    rmin: float = 0.0     # the range they came from
    rmax: float = 0.0


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, k: int) -> int:
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


Callback = Callable[[CalibrationInfo], Range]


def solve(annotation: Annotation, statistics: Statistics, config: Config, fn,
          callback: Callback = default_callback) -> dict[Value, ActParams]:
    values: dict[int, Value] = {}
    ranges: dict[int, tuple[float, float]] = {}
    fixed: dict[int, tuple[float, int]] = {}
    uf = _UnionFind()

    def value_range(v: Value, region: Region | None) -> tuple[float, float]:
        array = constant_array(v)
        if array is not None:
            return float(np.min(array, initial=0.0)), float(np.max(array, initial=0.0))
        if region is not None and v is region.output:
            r = callback(CalibrationInfo(region, statistics, config, fn))
        else:
            r = statistics.range(v, config)
        return float(r.rmin), float(r.rmax)

    for region in annotation.regions:
        row = spec.SPEC[region.pattern.kind]
        members = [*region.inputs, region.output]
        for v in members:
            if id(v) not in values:
                values[id(v)] = v
                ranges[id(v)] = value_range(v, region if v is region.output else None)
        if row.output.kind is spec.Kind.SAME_AS:
            for v in region.inputs:
                if constant_array(v) is None:
                    uf.union(id(v), id(region.output))
        if row.output.kind is spec.Kind.FIXED:
            fixed[id(region.output)] = row.output.fixed
    # class ranges and fixed parameters
    class_range: dict[int, tuple[float, float]] = {}
    class_fixed: dict[int, tuple[float, int]] = {}
    for k, (lo, hi) in ranges.items():
        root = uf.find(k)
        a, b = class_range.get(root, (lo, hi))
        class_range[root] = (min(a, lo), max(b, hi))
        if k in fixed:
            class_fixed.setdefault(root, fixed[k])
    out: dict[Value, ActParams] = {}
    for k, v in values.items():
        root = uf.find(k)
        lo, hi = class_range[root]
        if root in class_fixed:
            s, zp = class_fixed[root]
            out[v] = ActParams(float(np.float32(s)), int(zp), True, lo, hi)
        else:
            scale, zp = asymmetric_qparams(lo, hi)
            out[v] = ActParams(float(scale), int(zp), False, lo, hi)
    return out
