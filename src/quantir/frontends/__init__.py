"""Frontends: model formats in. The only layer (with ``backends``) that imports format
packages; each format lives in its own subpackage and is imported on first use.

- ``quantir.frontends.onnx.load_onnx`` — ONNX (opset 13+, external data).
"""
from __future__ import annotations


def load_onnx(*args, **kwargs):
    """``quantir.frontends.onnx.load_onnx``, imported on first use (it pulls in ``onnx``)."""
    from .onnx import load_onnx as _load
    return _load(*args, **kwargs)


__all__ = ["load_onnx"]
