"""Errors raised while loading real data (Fashion-MNIST, photos, ImageNet class names).

A data set is found on disk or in an installed package; nothing is ever downloaded. When
something is missing, the error names the path that was looked at and the command that
installs it, so the user's next step is in the message.
"""
from __future__ import annotations

from quantir.errors import ParseError, QuantirError

__all__ = ["DatasetError", "DatasetNotFoundError", "DatasetFormatError"]


class DatasetError(QuantirError):
    """Base of the errors of ``quantir.datasets``."""


class DatasetNotFoundError(DatasetError):
    """A data set, or the optional package that ships it, is not installed."""


class DatasetFormatError(DatasetError, ParseError):
    """A data file that exists but is truncated, corrupt, or not of the expected format."""
