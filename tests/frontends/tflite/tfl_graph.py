"""Small int8 TFLite graphs for the frontend tests, and the LiteRT comparison.

``Graph`` wraps ``ModelBuilder`` with int8 shorthands; ``compare`` imports the bytes, runs the
IR in quantir's interpreter and the bytes in LiteRT (``BUILTIN_REF`` unless told otherwise),
and asserts that every tensor the import binds — inputs, intermediates, outputs — is equal
element for element after applying its binding's permutation.
"""
from __future__ import annotations

import numpy as np
import pytest

from quantir.backends.tflite import BuiltinOperator, ModelBuilder, Quantization
from quantir.frontends.tflite import TFLiteImport, import_tflite
from quantir.runtime import input_names, output_names, run

OP = BuiltinOperator


def q(scale, zero_point=0, axis: int = 0) -> Quantization:
    s = np.atleast_1d(np.asarray(scale, np.float32))
    z = np.broadcast_to(np.atleast_1d(np.asarray(zero_point, np.int64)), s.shape)
    return Quantization(tuple(s.tolist()), tuple(z.tolist()), axis)


class Graph:
    """``ModelBuilder`` with int8 shorthands; tensors are referred to by index."""

    def __init__(self):
        self.b = ModelBuilder(description="tflite frontend test")
        self.inputs: list[int] = []

    def input(self, name, shape, scale=None, zp=0, dtype=np.int8, signature=()) -> int:
        idx = self.b.add_tensor(name, shape, dtype, q(scale, zp) if scale is not None else None,
                                shape_signature=signature)
        self.inputs.append(idx)
        return idx

    def act(self, name, shape, scale=None, zp=0, dtype=np.int8, signature=(), axis=0) -> int:
        """A non-constant tensor; several scales make it per-axis along ``axis``."""
        return self.b.add_tensor(name, shape, dtype, q(scale, zp, axis) if scale is not None else None,
                                 shape_signature=signature)

    def const(self, name, data, scale=None, zp=0, axis=0) -> int:
        return self.b.add_constant(name, np.asarray(data), q(scale, zp, axis) if scale is not None else None)

    def op(self, code, inputs, outputs, options=None, version=None) -> None:
        self.b.add_operator(code, inputs, outputs, options, version=version)

    def finish(self, outputs) -> bytes:
        self.b.set_io(self.inputs, outputs)
        return self.b.finish()


def assert_same(what: str, got: np.ndarray, expected: np.ndarray) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != LiteRT {expected.shape}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != LiteRT {expected.dtype}"
    if not np.array_equal(got, expected):
        bad = np.argwhere(got != expected)
        first = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} of {got.size} elements differ from LiteRT; first at {first}: "
                             f"ours {got[first]} vs LiteRT {expected[first]}")


def compare(data: bytes, feeds: list[np.ndarray], resolver: str = "reference") -> TFLiteImport:
    """Import ``data``, run both, and compare every bound tensor and every output."""
    from quantir.backends.tflite.litert import run_model_tensors
    result = import_tflite(data)
    fn = result.module.main
    named = dict(zip(input_names(fn), feeds))
    ours = run(result.module, named, intermediates=[b.name for b in result.bindings.values()])
    outputs, tensors = run_model_tensors(data, feeds, list(result.bindings), resolver)
    for name, expected in zip(output_names(fn), outputs):
        assert_same(f"output '{name}'", ours[name], expected)
    for idx, binding in result.bindings.items():
        got = ours[binding.name]
        if binding.to_tflite is not None:
            got = np.transpose(got, binding.to_tflite)
        assert_same(f"tensor {idx} ('{binding.name}')", got, tensors[idx])
    return result


def litert():
    return pytest.importorskip("ai_edge_litert.interpreter")


def op_names(result: TFLiteImport) -> list[str]:
    return [op.name for op in result.module.main.ops]


# ---------------------------------------------------------------------------------------------
# Strategies: hypothesis picks the parameters that matter, a drawn seed drives numpy for data.

from ...runtime.qkernels.qk_oracle import hsettings, int8_data, log_uniform, seeds, zero_points  # noqa: E402,F401


def as_nchw_source(g: Graph, x: int, shape, scale, zp, name="pooled") -> int:
    """Route a 4-D tensor through an identity MAX_POOL_2D (1x1, same parameters), so its native
    IR form is NCHW and the next op meets the layout question."""
    from quantir.backends.tflite import Pool2DOptions, Padding
    y = g.act(name, shape, scale, zp)
    g.op(OP.MAX_POOL_2D, [x], [y], Pool2DOptions(padding=Padding.VALID, filter_width=1, filter_height=1))
    return y
