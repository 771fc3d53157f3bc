"""One-op LiteRT models built with quantir's own TFLite writer, and hypothesis helpers.

``run_op`` assembles a single-operator model (NHWC, as TFLite wants), runs it in the LiteRT
interpreter — ``BUILTIN_REF`` unless told otherwise — and returns the outputs. Tests
transpose NCHW <-> NHWC around quantir's kernels and compare every element.

Every comparison is counted per op in ``COUNTS`` (printed by this directory's conftest),
so the report can say how many models each op was checked on.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

pytest.importorskip("ai_edge_litert.interpreter")

from quantir.backends.tflite import BuiltinOperator, ModelBuilder, Quantization  # noqa: E402
from quantir.backends.tflite.litert import run_model  # noqa: E402

COUNTS: Counter = Counter()
MISMATCHES: Counter = Counter()

OP = BuiltinOperator
ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1")


def hsettings(n: int):
    """Deterministic, database-free hypothesis settings with ``n`` examples."""
    return settings(max_examples=n, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@dataclass
class T:
    """A tensor of the one-op model: shape, dtype, optional quantization, optional constant data."""

    shape: tuple
    dtype: type = np.int8
    scale: object = None
    zero_point: object = 0
    axis: int = 0
    data: np.ndarray | None = None

    def quantization(self):
        if self.scale is None:
            return None
        s = np.atleast_1d(np.asarray(self.scale, dtype=np.float32))
        z = np.broadcast_to(np.atleast_1d(np.asarray(self.zero_point, dtype=np.int64)), s.shape)
        return Quantization(tuple(s.tolist()), tuple(z.tolist()), self.axis)


def build_op(code, inputs: list[T | None], outputs: list[T], options=None, version=None) -> bytes:
    b = ModelBuilder(description="qkernels oracle")
    idx, feeds = [], []
    for i, t in enumerate(inputs):
        if t is None:
            idx.append(-1)
        elif t.data is not None:
            idx.append(b.add_constant(f"c{i}", np.asarray(t.data, dtype=t.dtype), t.quantization()))
        else:
            k = b.add_tensor(f"in{i}", t.shape, t.dtype, t.quantization())
            idx.append(k)
            feeds.append(k)
    outs = [b.add_tensor(f"out{i}", t.shape, t.dtype, t.quantization()) for i, t in enumerate(outputs)]
    b.add_operator(code, idx, outs, options, version=version)
    b.set_io(feeds, outs)
    return b.finish()


def run_op(code, inputs: list[T | None], outputs: list[T], feeds: list[np.ndarray], options=None, *,
           resolver: str = "reference", version=None) -> list[np.ndarray]:
    return run_model(build_op(code, inputs, outputs, options, version), feeds, resolver)


def assert_same(op: str, got: np.ndarray, expected: np.ndarray) -> None:
    """Bit-exact comparison, counted; on failure report how many elements differ and the worst."""
    COUNTS[op] += 1
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{op}: shape {got.shape} != LiteRT {expected.shape}"
    assert got.dtype == expected.dtype, f"{op}: dtype {got.dtype} != LiteRT {expected.dtype}"
    if not np.array_equal(got, expected):
        MISMATCHES[op] += 1
        diff = got.astype(np.float64) - expected.astype(np.float64)
        bad = np.argwhere(diff != 0)
        first = tuple(bad[0])
        raise AssertionError(f"{op}: {len(bad)} of {got.size} elements differ from LiteRT; first at {first}: "
                             f"ours {got[first]} vs LiteRT {expected[first]}; max |diff| {np.abs(diff).max()}")


def nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


# ---------------------------------------------------------------------------
# Strategies: a hypothesis-drawn seed drives numpy for bulk data (fast), hypothesis
# chooses the parameters that matter (ranges, zero points at the ends, shapes).

zero_points = st.one_of(st.sampled_from([-128, 127, 0]), st.integers(-128, 127))


@st.composite
def log_uniform(draw, lo: float, hi: float):
    e = draw(st.floats(np.log10(lo), np.log10(hi), allow_nan=False, allow_infinity=False))
    return float(np.float32(10.0 ** e))


def int8_data(rng: np.random.Generator, shape, lo: int = -128, hi: int = 127) -> np.ndarray:
    """Uniform int8 data with about 5% of the elements at each end of ``[lo, hi]``."""
    x = rng.integers(lo, hi + 1, size=shape)
    u = rng.random(size=shape)
    x[u < 0.05] = lo
    x[u > 0.95] = hi
    return x.astype(np.int8)


seeds = st.integers(0, 2**32 - 1)
