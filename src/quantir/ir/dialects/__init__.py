"""Dialects: each module registers its op definitions on import.

``func`` and ``arith`` hold the few MLIR builtin ops quantir needs; ``quant`` is MLIR's
quantization dialect plus its legacy instrumentation ops; ``nn`` holds float network ops and
``qnn`` integer ones.
"""
from . import arith, func, quant  # noqa: F401  (registration side effects)
from . import nn  # noqa: F401,E402  (the float network ops; see nn.py)
from . import qnn  # noqa: F401,E402  (integer ops on quantized tensors; see qnn.py)
from . import hybrid  # noqa: F401,E402  (LiteRT dynamic-range ops: f32 activations, int8 weights; see hybrid.py)
from . import arith_ops, linalg, shape, tensor  # noqa: F401,E402  (--lower-quant-ops output; passes/quant_lowering.py)
