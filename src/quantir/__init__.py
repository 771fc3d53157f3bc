"""quantir — a post-training integer quantization compiler with an MLIR-compatible IR.

Layers, each importing only from those above it: ``types`` → ``numerics`` → ``ir`` → ``text``
→ ``rewrite`` → ``passes`` → ``quantize`` → ``runtime`` → ``frontends``/``backends`` →
``report`` → ``cli``. See docs/design.md in the shared folder and the README.
"""
__version__ = "0.1.0"
