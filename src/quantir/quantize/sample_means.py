"""Bias correction's expected inputs when the calibration samples differ in size.

Bias correction (``Config.bias_correction``) needs, per conv/FC, the mean input each weight
multiplies (``params.expected_taps``), which it gets from the input's mean at every position
(``SampleMeanObserver``). Samples of different sizes (a model with dynamic H, W: text lines of
several widths) have no common positions. ``SizedSampleMean`` keeps the per-position mean of
the current run of same-size samples (batches hold one size, ``data.DatasetManager.batches``);
when the size changes it turns that run's mean into the expected taps of every region reading
the tensor, weighted by the outputs the run produced (samples x output positions), so memory
stays one sample's mean plus the taps, however many sizes there are. The result is the mean over
every output element of every sample, which is what the corrected int32 bias adds to each of
them; with one size it is ``expected_taps`` of the plain mean, bit for bit.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..errors import CalibrationError
from ..ir.dialects.nn_conv import conv_transpose_geometry
from .observers import SampleMeanObserver
from .params import expected_taps
from .regions import Region, conv_window


class SizedSampleMean:
    """A ``SampleMeanObserver`` that accepts samples of different sizes (see the module doc).

    ``mean`` exists while every sample had one size (``mixed`` is False); ``taps(region)`` always."""

    def __init__(self, name: str, regions: Sequence[Region] = ()):
        self.name = name
        self.regions = list(regions)
        self.mixed = False
        self._run = SampleMeanObserver(name=name)
        self._folded: dict[int, tuple[np.ndarray, float]] = {}   # id(region) -> (Σ weight·taps, Σ weight)
        self._folded_samples = 0

    @property
    def num_samples(self) -> int:
        return self._run.num_samples + self._folded_samples

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x)
        held = self._run._sum
        if held is not None and x.ndim and x.size and x.shape[1:] != held.shape:
            self._fold()
            self._run = SampleMeanObserver(name=self.name)
            self.mixed = True
        self._run.update(x)

    @property
    def mean(self) -> np.ndarray:
        if self.mixed:
            raise CalibrationError(f"tensor {self.name!r}: the calibration samples differ in size here, so it has no "
                                   f"mean per position; ask for the expected taps of a layer reading it instead")
        return self._run.mean

    def taps(self, region: Region) -> np.ndarray:
        """The mean input each weight of ``region`` multiplies, over all samples and output positions."""
        if not self.mixed:
            return expected_taps(region, self._run.mean)
        if not any(r is region for r in self.regions):
            raise CalibrationError(f"tensor {self.name!r}: layer '{region.label}' was not among its readers when "
                                   f"the calibration samples were observed")
        total, weight = self._folded.get(id(region), (0.0, 0.0))
        if self._run.num_samples:
            t, w = self._weighted(region)
            total, weight = total + t, weight + w
        return total / weight

    def _weighted(self, region: Region) -> tuple[np.ndarray, float]:
        mean = self._run.mean
        w = float(self._run.num_samples * outputs_per_sample(region, mean.shape))
        return expected_taps(region, mean) * w, w

    def _fold(self) -> None:
        for r in self.regions:
            t, w = self._weighted(r)
            total, weight = self._folded.get(id(r), (0.0, 0.0))
            self._folded[id(r)] = (total + t, weight + w)
        self._folded_samples += self._run.num_samples


def outputs_per_sample(region: Region, sample_shape: Sequence[int]) -> int:
    """How many times one sample of ``sample_shape`` applies each weight of a conv/FC region:
    its output positions (conv, transposed conv), or its rows (FC: every axis but the last)."""
    name = region.pattern.name
    if name.startswith("conv_transpose"):
        op = region.match.ops["op"]
        kernel = region.match.consts["w"].shape[2:]
        attrs = {k: op.attr(k) for k in ("strides", "dilations", "pads", "auto_pad", "output_padding", "output_shape")}
        out, _, _ = conv_transpose_geometry(tuple(sample_shape[1:]), kernel, attrs)
        return max(math.prod(out), 1)
    if name != "conv":
        return math.prod(sample_shape[:-1])
    op = region.match.ops["op"]
    kh, kw = region.match.consts["w"].shape[2:]
    g = conv_window(op, (kh, kw), sample_shape[1:])
    top, left, bottom, right = g["pads"]
    (sh, sw), (dh, dw) = g["strides"], g["dilations"]
    ho = (sample_shape[1] + top + bottom - dh * (kh - 1) - 1) // sh + 1
    wo = (sample_shape[2] + left + right - dw * (kw - 1) - 1) // sw + 1
    return ho * wo
