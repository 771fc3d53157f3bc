"""Real data for calibration and accuracy checks, loaded from disk or installed packages only.

* ``fashion_mnist``: Fashion-MNIST from Debian's ``dataset-fashion-mnist`` (numpy only).
* ``photos``: real photos shipped by scikit-image / scikit-learn, preprocessed for
  EfficientNet-Lite0, and the 1000 ImageNet class names (optional dependencies,
  imported lazily).

Nothing here downloads anything; a missing data set raises ``DatasetNotFoundError``
naming the command that installs it.
"""
from quantir.datasets.errors import DatasetError, DatasetFormatError, DatasetNotFoundError

__all__ = ["DatasetError", "DatasetFormatError", "DatasetNotFoundError"]
