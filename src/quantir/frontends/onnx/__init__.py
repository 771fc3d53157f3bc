"""ONNX import: ``load_onnx(path_or_model) -> Module`` of ``nn`` ops.

>>> from quantir.frontends.onnx import load_onnx
>>> # module = load_onnx("model.onnx")               # folded, BN fused, identities gone
>>> # module = load_onnx(model_proto, keep_unsupported=True)

Supported: the default ONNX domain at opset 13 and newer (older models are upgraded with
ONNX's version converter), external data next to the model file, the ops in
``SUPPORTED_OPS``. Only this package imports ``onnx``.

How the pieces fit: ``loader`` reads and upgrades the file, ``importer`` converts nodes in
order using the table in ``ops`` (folding constant subgraphs on the spot; ``symbolic``
resolves shape arithmetic on a dynamic batch dim), then ``default_pipeline()`` runs.
``conformance`` runs ONNX's backend node tests through all of it.
"""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from ...ir import Module
from .importer import GraphImporter
from .loader import MIN_OPSET, read_model
from .ops import SUPPORTED_OPS, constant_input_slots

__all__ = ["load_onnx", "SUPPORTED_OPS", "constant_input_slots", "MIN_OPSET", "default_pipeline"]


def default_pipeline() -> list:
    """The passes ``load_onnx`` runs by default, in order."""
    from ...passes import Canonicalize, CanonicalizeOptions
    from ...passes.fold_affine import FoldAffine
    from ...passes.fold_batchnorm import FoldBatchNorm
    from ...passes.fold_constants import FoldConstants, RemoveIdentities
    from ...passes.fold_pad import FoldPad
    # canonicalize erases the dead ops (folded weights, shape arithmetic); constants are not
    # uniqued: hashing every weight's bytes costs more than it saves here.
    return [FoldConstants(), RemoveIdentities(), FoldBatchNorm(), FoldAffine(), FoldPad(), FoldConstants(),
            Canonicalize(CanonicalizeOptions(cse_constants=False))]


def load_onnx(model: "str | os.PathLike | bytes | object", *, keep_unsupported: bool = False,
              optimize: bool = True, constant_inputs: Mapping[str, np.ndarray] | None = None,
              keep_qdq: bool = False) -> Module:
    """Import an ONNX model (a path, serialized bytes or a ``ModelProto``) as a ``Module``.

    - ``keep_unsupported``: unsupported nodes become opaque ``nn.onnx_op`` ops (carrying the
      serialized NodeProto and the opset) instead of raising ``UnsupportedOpError``.
    - ``optimize``: run ``default_pipeline()`` (constant folding, identity/dropout removal,
      BatchNormalization and Pad folding into convolutions, dead code elimination by
      ``canonicalize``).
    - ``keep_qdq``: keep DequantizeLinear of constants (quantized weights and bias) as ops
      instead of folding them to float constants, so a QDQ model's parameters stay visible
      (``quantir check``). Use with ``optimize=False``.
    - ``constant_inputs``: graph inputs to bind to constant values (they disappear from the
      function's arguments), e.g. a Reshape shape that a test feeds as an input.

    Raises ``ModelFormatError`` (unreadable, truncated or non-ONNX file; opset upgrade
    failure), ``UnsupportedOpError`` (op, attribute value or element type quantir does not
    implement; names the op type, the node and the file) and ``ShapeError``.
    """
    loaded = read_model(model)
    module = GraphImporter(loaded, keep_unsupported, constant_inputs, keep_qdq).run()
    if optimize:
        for p in default_pipeline():
            p.run(module)
    return module
