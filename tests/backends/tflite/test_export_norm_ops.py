"""SUM, L2_NORMALIZATION and LOG_SOFTMAX through .tflite under drawn parameters: every bound tensor
equal to LiteRT's, read back as the same ops, `quantir check` clean.

4-D inputs first go through a 1x1 max pool, so they reach the op in the NHWC form: SUM's axes are
then mapped to NHWC (and back on import), and the last-axis ops take the IR's layout back. SUM is
compared with LiteRT's default resolver, whose kernel quantir binds (quantize/ops/reduce.py);
the other two with BUILTIN_REF."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quantir.quantize.ops  # noqa: F401  (the declarations bind the kernels)
from quantir.backends.tflite.export import export_tflite
from quantir.frontends.tflite import import_tflite
from quantir.ir.dialects import qnn
from quantir.quantize.check import check_module
from quantir.runtime import run

from ...runtime.qkernels.qk_oracle import log_uniform, zero_points
from .qir import QFunction, feeds_for, qt

pytest.importorskip("ai_edge_litert.interpreter")
from quantir.backends.tflite.litert import run_model_tensors  # noqa: E402

pytestmark = pytest.mark.oracle

H = settings(max_examples=30, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _input(f: QFunction, shape, s, z):
    """The op's input: 4-D through a 1x1 max pool (the NHWC form), else the quantized argument."""
    if len(shape) != 4:
        return f.q
    return f.op(qnn.MAX_POOL, [f.q], qt(shape, s, z), "pooled", kernel_shape=(1, 1), strides=(1, 1),
                pads=(0, 0, 0, 0))


def _bit_exact(module, x, resolver: str, opdef) -> None:
    ex = export_tflite(module)
    names = list(ex.bindings)
    _, theirs = run_model_tensors(ex.to_bytes(), [x], [ex.bindings[n][0] for n in names], resolver)
    ours = run(module, {"x": x}, intermediates=names)
    for n in names:
        idx, perm = ex.bindings[n]
        mine = np.transpose(ours[n], perm) if perm else ours[n]
        assert mine.shape == theirs[idx].shape, n
        assert np.count_nonzero(mine != theirs[idx]) == 0, f"{n}: differs from LiteRT ({resolver})"
    back = import_tflite(ex.model).module
    assert [op.opdef for op in back.main.ops].count(opdef) == 1
    report = check_module(back)
    assert report.ok and opdef.name not in report.unknown, [str(v) for v in report.violations]


@st.composite
def shapes(draw):
    rank = draw(st.integers(2, 4))
    return (None, *(draw(st.integers(1, 6)) for _ in range(rank - 1)))


@H
@given(st.integers(0, 2**32 - 1), shapes(), log_uniform(1e-3, 1.0), zero_points, log_uniform(0.05, 20.0),
       zero_points, st.booleans(), st.data())
def test_sum(seed, shape, s_in, z_in, ratio, z_out, keep, data):
    rank = len(shape)
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, rank - 1), min_size=1))))
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else \
        tuple(d for i, d in enumerate(shape) if i not in axes)
    f = QFunction(shape, s_in, z_in)
    y = f.op(qnn.REDUCE_SUM, [_input(f, shape, s_in, z_in)], qt(out_shape, s_in * ratio, z_out), "sum", axes=axes,
             keepdims=int(keep))
    x = feeds_for(np.random.default_rng(seed), (2, *shape[1:]), s_in, z_in)
    _bit_exact(f.finish(y), x, "optimized", qnn.REDUCE_SUM)


@H
@given(st.integers(0, 2**32 - 1), shapes(), log_uniform(1e-3, 1.0), zero_points)
def test_l2_normalization(seed, shape, s_in, z_in):
    f = QFunction(shape, s_in, z_in)
    y = f.op(qnn.L2_NORMALIZATION, [_input(f, shape, s_in, z_in)], qt(shape, 1 / 128, 0), "l2")
    x = feeds_for(np.random.default_rng(seed), (2, *shape[1:]), s_in, z_in)
    _bit_exact(f.finish(y), x, "reference", qnn.L2_NORMALIZATION)


@H
@given(st.integers(0, 2**32 - 1), shapes(), log_uniform(1e-3, 1.0), zero_points)
def test_log_softmax(seed, shape, s_in, z_in):
    f = QFunction(shape, s_in, z_in)
    y = f.op(qnn.LOG_SOFTMAX, [_input(f, shape, s_in, z_in)], qt(shape, 16 / 256, 127), "log_softmax")
    x = feeds_for(np.random.default_rng(seed), (2, *shape[1:]), s_in, z_in)
    _bit_exact(f.finish(y), x, "reference", qnn.LOG_SOFTMAX)
