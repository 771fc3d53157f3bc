"""The .tflite plugin of ``bench/fuzz_models.py``: seeds, mutations, and what a user runs on a file.

- :func:`seeds`: valid int8 .tflite files, exported by quantir from the Fashion-MNIST CNN and
  two tiny ONNX CNNs (one with an all-zero channel) quantized with a few random samples, plus a
  hand-built chain of the ops those lack (pooling, resize, LOGISTIC, TANH, MUL, LEAKY_RELU,
  TRANSPOSE, SLICE, RESHAPE, EXPAND_DIMS, SQUEEZE). Cached under ``.cache/fuzz/tflite/``.
- :func:`mutate`: byte-level (bit flips, truncation, splices, boundary 32-bit integers, inserted or
  deleted bytes) or structural (the file decoded with quantir's reader, one field changed —
  opcode, version, operator inputs/outputs/options, tensor shape/type/scale/zero point/buffer,
  buffer bytes, schema version, graph inputs — and re-serialised without the writer's checks).
- :func:`exercise`: what a user would do with the file: ``quantir show``, ``check``, ``run`` on
  random input of the declared shape, and ``verify`` (LiteRT in its child process), each through
  the CLI's ``main``. A command that refuses the file (exit 1, a typed one-line error) is an
  acceptable outcome, reported to the driver as a ``QuantirError``; anything else escaping is a
  finding.
"""
from __future__ import annotations

import contextlib
import dataclasses as dc
import io
import math
import random
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "fuzz" / "tflite"
for p in (ROOT / "src", ROOT):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

MAX_FEED_ELEMENTS = 1 << 20   # a declared input larger than this is not fed (a user could not either)
BOUNDARY_INTS = (0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000,
                 0xFFFFFFFF, 0xFFFFFFFE, 1 << 16, 1 << 24)
BOUNDARY_DIMS = (0, 1, -1, -2, 2, 3, 7, 1 << 15, 1 << 20, (1 << 31) - 1, -(1 << 31))
BAD_SCALES = (float("nan"), float("inf"), -float("inf"), 0.0, -0.5, 1e38, 1e-45, 3.4e38, 1e-30)


# -- seeds ----------------------------------------------------------------------------------------

def _quantized_seed(onnx_path: Path, shape: tuple[int, ...], n: int, seed: int) -> bytes:
    import warnings

    import quantir as qr
    warnings.simplefilter("ignore")   # few samples on purpose: the seeds need to be valid, not accurate
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, *shape)).astype(np.float32)
    from quantir.runtime.interpreter import input_names
    name = input_names(qr.load(onnx_path).main)[0]
    result = qr.quantize(onnx_path, {name: x}, qr.Config(progress=False))
    out = onnx_path.with_suffix(".tflite")
    result.save(out)
    return out.read_bytes()


def _op_chain() -> bytes:
    """A chain of ops the exported seeds lack, int8 throughout (checked bit-exact against LiteRT)."""
    from quantir.backends.tflite import (BuiltinOperator as OP, LeakyReluOptions, ModelBuilder, MulOptions,
                                         Pool2DOptions, Padding, Quantization, ReshapeOptions, SqueezeOptions,
                                         TransposeOptions)
    from quantir.backends.tflite.schema import ResizeNearestNeighborOptions, SliceOptions

    def q(s, z=0):
        return Quantization((s,), (z,))
    b = ModelBuilder(description="fuzz seed: op chain")
    x = b.add_tensor("x", (1, 6, 6, 4), np.int8, q(0.05, 3))
    a = b.add_tensor("pool", (1, 3, 3, 4), np.int8, q(0.05, 3))
    b.add_operator(OP.AVERAGE_POOL_2D, [x], [a], Pool2DOptions(padding=Padding.VALID, stride_w=2, stride_h=2,
                                                               filter_width=2, filter_height=2))
    r = b.add_tensor("resized", (1, 6, 6, 4), np.int8, q(0.05, 3))
    b.add_operator(OP.RESIZE_NEAREST_NEIGHBOR, [a, b.add_constant("size", np.array([6, 6], np.int32))], [r],
                   ResizeNearestNeighborOptions())
    lg = b.add_tensor("sigmoid", (1, 6, 6, 4), np.int8, q(1 / 256, -128))
    b.add_operator(OP.LOGISTIC, [r], [lg])
    th = b.add_tensor("tanh", (1, 6, 6, 4), np.int8, q(1 / 128, 0))
    b.add_operator(OP.TANH, [r], [th])
    mu = b.add_tensor("mul", (1, 6, 6, 4), np.int8, q(0.004, 0))
    b.add_operator(OP.MUL, [lg, th], [mu], MulOptions())
    lr = b.add_tensor("leaky", (1, 6, 6, 4), np.int8, q(0.004, 0))
    b.add_operator(OP.LEAKY_RELU, [mu], [lr], LeakyReluOptions(alpha=0.2))
    tr = b.add_tensor("transposed", (1, 4, 6, 6), np.int8, q(0.004, 0))
    b.add_operator(OP.TRANSPOSE, [lr, b.add_constant("perm", np.array([0, 3, 1, 2], np.int32))], [tr],
                   TransposeOptions())
    sl = b.add_tensor("sliced", (1, 4, 4, 4), np.int8, q(0.004, 0))
    b.add_operator(OP.SLICE, [tr, b.add_constant("begin", np.array([0, 0, 1, 1], np.int32)),
                              b.add_constant("size4", np.array([1, 4, 4, 4], np.int32))], [sl], SliceOptions())
    rs = b.add_tensor("flat", (1, 64), np.int8, q(0.004, 0))
    b.add_operator(OP.RESHAPE, [sl, b.add_constant("shape", np.array([1, 64], np.int32))], [rs],
                   ReshapeOptions(new_shape=(1, 64)))
    ed = b.add_tensor("expanded", (1, 1, 64), np.int8, q(0.004, 0))
    b.add_operator(OP.EXPAND_DIMS, [rs, b.add_constant("axis", np.array([1], np.int32))], [ed])
    sq = b.add_tensor("y", (1, 64), np.int8, q(0.004, 0))
    b.add_operator(OP.SQUEEZE, [ed], [sq], SqueezeOptions(squeeze_dims=(1,)))
    b.set_io([x], [sq])
    return b.finish()


def seeds() -> list[bytes]:
    """Valid int8 .tflite files (built once, then read from the cache)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    names = ["fashion_cnn", "tiny_cnn", "tiny_cnn_zero", "op_chain"]
    if not all((CACHE / f"{n}.tflite").exists() for n in names):
        import shutil

        from tests.quantize import tiny_models
        shutil.copy(ROOT / "models" / "fashion_mnist_cnn.onnx", CACHE / "fashion_cnn.onnx")
        _quantized_seed(CACHE / "fashion_cnn.onnx", (1, 28, 28), 8, 0)
        tiny_models.cnn(CACHE / "tiny_cnn.onnx")
        _quantized_seed(CACHE / "tiny_cnn.onnx", (1, 8, 8), 8, 1)
        tiny_models.cnn(CACHE / "tiny_cnn_zero.onnx", seed=3, zero_channel=True)
        _quantized_seed(CACHE / "tiny_cnn_zero.onnx", (1, 8, 8), 8, 2)
        (CACHE / "op_chain.tflite").write_bytes(_op_chain())
    return [(CACHE / f"{n}.tflite").read_bytes() for n in names]


# -- mutations ------------------------------------------------------------------------------------

def _bytes_mutation(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    if not b:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    kind = rng.randrange(6)
    if kind == 0:                                   # bit flips
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1:                                 # truncation
        del b[rng.randrange(len(b)):]
    elif kind == 2:                                 # splice a chunk of the file over another place
        n = rng.randint(1, min(256, len(b)))
        src, dst = rng.randrange(len(b) - n + 1), rng.randrange(len(b) - n + 1)
        b[dst:dst + n] = b[src:src + n]
    elif kind == 3 and len(b) >= 4:                 # a 4-byte little-endian boundary value
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(0, len(b) - 3) & ~3 if rng.random() < 0.8 else rng.randrange(len(b) - 3)
            value = rng.choice(BOUNDARY_INTS + (len(b), len(b) - i, rng.randrange(1 << 32)))
            b[i:i + 4] = struct.pack("<I", value & 0xFFFFFFFF)
    elif kind == 4:                                 # inserted bytes
        i = rng.randrange(len(b) + 1)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    else:                                           # deleted bytes
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 16)]
    return bytes(b)


def _scale(rng: random.Random) -> float:
    return rng.choice(BAD_SCALES) if rng.random() < 0.7 else 10 ** rng.uniform(-8, 4)


def _mutate_tensor(t, rng: random.Random, n_buffers: int):
    from quantir.backends.tflite.schema import TensorType
    field = rng.randrange(7)
    if field == 0 and t.shape:                      # one dim
        shape = list(t.shape)
        shape[rng.randrange(len(shape))] = rng.choice(BOUNDARY_DIMS)
        return dc.replace(t, shape=tuple(shape), shape_signature=())
    if field == 1:                                  # rank
        shape = list(t.shape)
        if shape and rng.random() < 0.5:
            del shape[rng.randrange(len(shape))]
        else:
            shape.insert(rng.randrange(len(shape) + 1), rng.choice((1, 2, 3)))
        return dc.replace(t, shape=tuple(shape), shape_signature=())
    if field == 2:
        return dc.replace(t, type=rng.choice(list(TensorType)))
    if field == 3:
        return dc.replace(t, buffer=rng.choice((0, 1, n_buffers - 1, rng.randrange(max(1, n_buffers)))))
    q = t.quantization
    if q is None:
        from quantir.backends.tflite import Quantization
        return dc.replace(t, quantization=Quantization((_scale(rng),), (0,)))
    if field == 4:
        scales = list(q.scale)
        scales[rng.randrange(len(scales))] = _scale(rng)
        return dc.replace(t, quantization=dc.replace(q, scale=tuple(scales)))
    if field == 5:
        zps = list(q.zero_point)
        zps[rng.randrange(len(zps))] = rng.choice((-129, -128, 127, 128, 255, 1 << 31, -(1 << 40), 5))
        return dc.replace(t, quantization=dc.replace(q, zero_point=tuple(zps)))
    if rng.random() < 0.5:
        return dc.replace(t, quantization=dc.replace(q, quantized_dimension=rng.choice((-1, 0, 1, 3, 4, 1 << 20))))
    return dc.replace(t, quantization=None)


def _mutate_options(options, rng: random.Random):
    from quantir.backends.tflite import schema
    if options is None or rng.random() < 0.25:
        cls = rng.choice(sorted({c for c in schema.OPERATOR_OPTIONS.values() if c is not None},
                                key=lambda c: c.__name__))
        return None if rng.random() < 0.4 else cls()
    fields = schema.option_fields(type(options))
    if not fields:
        return None
    f = rng.choice(fields)
    if f.kind in schema.VECTOR_KINDS:
        value = tuple(rng.choice(BOUNDARY_DIMS) for _ in range(rng.randrange(5)))
    elif f.kind == "float32":
        value = rng.choice((0.0, -1.0, float("nan"), float("inf"), 1e38, 1e-30, 2.0))
    elif f.kind == "bool":
        value = not getattr(options, f.name)
    elif f.enum is not None:
        value = rng.choice(list(f.enum))
    else:
        lo, hi = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}.get(f.kind, (-(1 << 31),
                                                                                                (1 << 31) - 1))
        value = rng.choice([v for v in (0, -1, 1, 2, 3, 7, lo, hi, 1 << 15) if lo <= v <= hi])
    return dc.replace(options, **{f.name: value})


def _structural_mutation(data: bytes, rng: random.Random) -> bytes:
    from quantir.backends.tflite import read_model
    from quantir.backends.tflite.schema import BuiltinOperator

    m = read_model(data)
    sg = m.subgraphs[0]
    tensors, ops, buffers, codes = list(sg.tensors), list(sg.operators), list(m.buffers), list(m.operator_codes)
    n_t = len(tensors)
    kind = rng.randrange(9)
    if kind == 0 and codes:                         # opcode: another builtin, a bad version
        i = rng.randrange(len(codes))
        if rng.random() < 0.7:
            codes[i] = dc.replace(codes[i], builtin_code=int(rng.choice(list(BuiltinOperator))))
        else:
            codes[i] = dc.replace(codes[i], version=rng.choice((0, -1, 2, 99, 1 << 30)))
    elif kind in (1, 2) and ops:                    # an operator's inputs / outputs
        k = rng.randrange(len(ops))
        op = ops[k]
        ins, outs = list(op.inputs), list(op.outputs)
        what = rng.randrange(5)
        if what == 0 and ins:
            ins[rng.randrange(len(ins))] = rng.choice((-1, rng.randrange(n_t), 0))
        elif what == 1:
            ins.append(rng.choice((-1, rng.randrange(n_t))) if rng.random() < 0.5 or not ins else ins[0])
        elif what == 2 and ins:
            del ins[rng.randrange(len(ins))]
        elif what == 3 and outs:
            outs[rng.randrange(len(outs))] = rng.randrange(n_t)
        else:
            outs.append(rng.randrange(n_t))
        ops[k] = dc.replace(op, inputs=tuple(ins), outputs=tuple(outs))
    elif kind == 3 and ops:                         # options
        k = rng.randrange(len(ops))
        ops[k] = dc.replace(ops[k], options=_mutate_options(ops[k].options, rng))
    elif kind == 4 and ops:                         # operator order / opcode index
        k = rng.randrange(len(ops))
        if rng.random() < 0.5 and len(ops) > 1:
            j = rng.randrange(len(ops))
            ops[k], ops[j] = ops[j], ops[k]
        else:
            ops[k] = dc.replace(ops[k], opcode_index=rng.randrange(max(1, len(codes))))
    elif kind in (5, 6) and tensors:                # a tensor
        i = rng.randrange(n_t)
        tensors[i] = _mutate_tensor(tensors[i], rng, len(buffers))
    elif kind == 7 and len(buffers) > 1:            # a buffer's bytes
        i = rng.randrange(1, len(buffers))
        b = buffers[i]
        buffers[i] = rng.choice((b"", b[: len(b) // 2], b + b[:8], bytes(len(b)), b"\xff" * len(b)))
    else:                                           # the model: schema version, graph inputs/outputs
        what = rng.randrange(3)
        if what == 0:
            m = dc.replace(m, version=rng.choice((0, 1, 2, 4, 1 << 31)))
        elif what == 1:
            sg = dc.replace(sg, inputs=tuple(rng.randrange(n_t) for _ in range(rng.randint(0, 2))))
        else:
            sg = dc.replace(sg, outputs=tuple(rng.randrange(n_t) for _ in range(rng.randint(0, 2))))
    sg = dc.replace(sg, tensors=tuple(tensors), operators=tuple(ops))
    m = dc.replace(m, subgraphs=(sg,), buffers=tuple(buffers), operator_codes=tuple(codes))
    return _write_unchecked(m)


def _write_unchecked(model) -> bytes:
    """``write_model`` without its consistency checks: the point is to write what they refuse."""
    from quantir.backends.tflite import writer
    return writer.write_model(model, check=False)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One mutant of ``data``: structural half of the time (when the file decodes and re-encodes),
    else byte-level; sometimes both."""
    if rng.random() < 0.5:
        try:
            out = _structural_mutation(data, rng)
        except Exception:   # noqa: BLE001 - not every change can be serialised (e.g. a dim above int32)
            out = _bytes_mutation(data, rng)
    else:
        out = _bytes_mutation(data, rng)
    return _bytes_mutation(out, rng) if rng.random() < 0.1 else out


# -- what a user does with the file -----------------------------------------------------------------

def warm_up() -> None:
    """Import what exercise needs once per worker (not per input)."""
    import quantir.cli.main  # noqa: F401
    import quantir.frontends.tflite  # noqa: F401
    import quantir.quantize.check  # noqa: F401
    import quantir.verify  # noqa: F401


def _random_feeds(path: str, rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    """Random input of each graph input's declared shape (dynamic dims as 2), None if too large."""
    from quantir.frontends.tflite import import_tflite
    from quantir.runtime.interpreter import input_names
    from quantir.types import QuantizedType

    fn = import_tflite(path).module.main
    feeds = {}
    for name, arg in zip(input_names(fn), fn.arguments):
        t = arg.type
        shape = tuple(2 if d is None else d for d in t.shape)
        if math.prod(shape) > MAX_FEED_ELEMENTS:
            return None
        et = t.element_type
        if isinstance(et, QuantizedType):
            feeds[name] = rng.integers(-128, 128, size=shape).astype(np.int8)
        elif getattr(et, "numpy_dtype", None) is not None and np.dtype(et.numpy_dtype).kind == "i":
            feeds[name] = rng.integers(-3, 4, size=shape).astype(et.numpy_dtype)
        else:
            feeds[name] = rng.normal(size=shape).astype(np.float32)
    return feeds


def exercise(path: str, workdir: str) -> None:
    """show, check, run and verify ``path`` as the CLI would; a refusal is a QuantirError."""
    from quantir.cli.main import main
    from quantir.errors import QuantirError

    work = Path(workdir)
    refused = []

    def cli(*argv: str) -> tuple[int, str]:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(list(argv))
        if code not in (0, 1):
            raise AssertionError(f"quantir {argv[0]} exited {code}: {err.getvalue()[-300:]}")
        if err.getvalue():
            refused.append(f"{argv[0]}: {err.getvalue().strip()[:200]}")
        return code, err.getvalue()

    cli("show", path)
    check_code, _ = cli("check", path)
    try:
        feeds = _random_feeds(path, np.random.default_rng(len(Path(path).read_bytes())))
    except QuantirError as e:
        raise QuantirError(f"not runnable: {e}; " + "; ".join(refused)) from None
    if feeds is not None:
        np.savez(work / "in.npz", **feeds)
        run_code, _ = cli("run", path, "--inputs", str(work / "in.npz"), "--outputs", str(work / "out.npz"))
        _, said = cli("verify", path, "--inputs", str(work / "in.npz"))
        if "LiteRT crashed with" in said:
            if check_code == 0 and run_code == 0:   # issue 11 item 3: check must not call such a model clean
                raise AssertionError(f"quantir check reports 0 violations on a model LiteRT crashes on: {said[:300]}")
            from quantir.verify import OracleError
            raise OracleError("; ".join(refused))   # counted apart: a LiteRT crash quantir survived
    if refused:
        raise QuantirError("; ".join(refused))
