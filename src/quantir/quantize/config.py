"""Options of a quantization run: one explicit object, passed from the CLI down. No globals."""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any, Callable, Literal

from ..errors import CalibrationError
from .methods import MethodOptions, options_for
from .precision import parse_budget

Engine = Literal["ort", "interpreter"]
BiasCorrection = Literal["off", "weights", "empirical"]
WeightRounding = Literal["auto", "nearest", "hessian"]
LayerNormForm = Literal["rsqrt", "l2"]
Target = Literal["litert", "onnxruntime"]
Activations = Literal["int8", "int16"]
Mode = Literal["static", "dynamic"]
TARGETS = ("litert", "onnxruntime")
OUTLIER_PASSES = ("fold_layer_norm", "smooth_layer_norm")   # quantize.outliers.PASSES
DEFAULT_BUDGET = 0.995    # every output's mean cosine (Config.budget)


@dataclass(frozen=True)
class Config:
    """What to quantize and how.

    The defaults follow the LiteRT int8 spec: per-channel symmetric int8 weights, asymmetric
    per-tensor int8 activations, int32 bias, ranges from min/max over the calibration data.

    ``bias_correction`` folds the mean output error of every conv/FC into its int32 bias
    (see ``quantize.solver``, "Bias correction"): ``"weights"`` (default) removes ``E[(W_q - W) x]``, the error
    that rounding the weights adds on average, from the float inputs' means (nearly free);
    ``"empirical"`` removes ``E[W_q x_q] - E[W x]`` with ``x_q`` the inputs the integer graph
    actually computes on the kept calibration samples (it runs the integer graph once: slower,
    and also corrects the bias that upstream activation rounding propagates); ``"off"``.

    ``target`` is the runtime the integer model is meant for, whose arithmetic decides what
    quantir evaluates: ``"litert"`` (LiteRT's reference kernels, quantir's interpreter) or
    ``"onnxruntime"`` (the QDQ export as ONNX Runtime's CPU provider runs it, with its fusions
    and the ops it leaves in float; ``runtime.ort.OrtIntegerExecutor``). It does not change the integer
    module; it changes what the calibration callbacks' quantized values, empirical bias
    correction and the summary's per-layer errors are computed with.

    ``mode="dynamic"``: no calibration data; ``quantize(model, None, Config(mode="dynamic"))``
    returns, for ``target="litert"``, LiteRT's dynamic-range model (``quantize.hybrid``: int8
    weights per channel in FULLY_CONNECTED / BATCH_MATMUL / CONV_2D / EMBEDDING_LOOKUP, inputs
    quantized per row inside each kernel, the rest float32; saved as .tflite or .mlir) and, for
    ``target="onnxruntime"``, ONNX Runtime's (``quantize.dynamic``: DynamicQuantizeLinear /
    MatMulInteger; saved as .onnx or .mlir). Only ``target`` is read in that mode; the weights'
    options are ``HybridConfig`` / ``DynamicConfig`` through ``quantir.quantize_hybrid`` /
    ``quantir.quantize_dynamic``.

    ``method`` defaults to ``"entropy"``: measured on six models in four runtimes (README, "Which
    calibration method"), it has the smallest mean loss in quantir's interpreter (LiteRT's
    reference kernels, the default target); elsewhere the methods are within a few samples of each
    other and their order changes between runs.

    ``weight_rounding``: ``"nearest"`` rounds each int8 weight to its nearest step; ``"hessian"``
    rounds a conv's or FC's weights together so that its *output* on the kept calibration samples
    moves least (GPTQ; ``quantize.params``), same scales, one extra float pass over those samples.
    ``"auto"`` (default): nearest, unless the ``budget`` promotes tensors to int16 or ``activations``
    is ``"int16"``; then the model is also quantized with hessian rounding and that is kept when it
    meets the budget on the budget's samples, or when neither does and it measures at least as well
    (the budget's metric; the default cosine when the budget is off or a callback, for all-int16):
    two modules that both meet it are closer than that metric ranks well, and with every activation
    int16 the task metrics measured preferred hessian (not on PicoDet's mixed model: docs/design.md).
    With int8 activations the gain did not carry over (``quantize.params``);
    with the sensitive activations int16 it measured better (PicoDet, 32 calibration pages, every
    activation int16, 16 other pages: boxes matching fp32's at IoU 0.9 92.4% nearest, 96.9% hessian;
    EfficientNet-Lite0, all int16: top-1 agreement 96.5% -> 99.0%), though on PicoDet the int16
    activations' own rounding, amplified by the network, is the larger error (README).

    ``layer_norm``: the LiteRT int8 ops a LayerNorm over the last axis becomes (``quantize.ops.
    normalization``): ``"rsqrt"`` MEAN, SUB, MUL, MEAN, ADD, RSQRT, MUL; ``"l2"`` MEAN, SUB,
    L2_NORMALIZATION and one MUL, which keeps rows whose variances differ by 100x or more (the
    residual streams of PP-OCR's SVTR blocks) where the int8 variance would round the small ones away.

    ``activations``: ``"int8"`` (LiteRT's int8 spec) or ``"int16"`` (its 16x8 mode: every activation
    int16 symmetric, zero point 0, weights still int8, FC biases int32 (LiteRT's quantized_bias_type
    INT32); an op with no int16 kernel runs in int8 between requantizes, see ``quantize.solver``).
    An int16 tensor takes its observed min/max whatever ``method`` says: the clipping methods choose
    ranges for 255 steps, and 65,535 steps need no clipping (all-MiniLM-L6-v2, 128 held-out pydoc
    sentences, interpreter: cosine vs fp32 0.997 with int16 min/max, 0.844 with int16 entropy).

    ``int16``: tensor names (ONNX value names) whose same-scale classes are int16 in an int8 model,
    the rest staying int8 with a requantize (LiteRT QUANTIZE) at each boundary; a name whose op has
    no 16x8 kernel stays int8.

    ``budget`` drives automatic mixed precision (``quantize.precision``): when the all-int8 model's
    outputs miss it on the kept calibration samples, the fewest tensors are promoted to int16 until
    it is met. A cosine floor in (0, 1] that every float output's mean cosine over the samples must
    reach (default 0.995: CNN classifiers meet it in int8 and are unchanged; it also holds class
    scores' top-1 and each quantity of a detector's per-position outputs), an SQNR floor that
    every output's must reach (``"25dB"``), a callback ``(float_outputs, int_outputs) ->
    bool``, or None / ``"off"``. It applies to ``activations="int8"`` without ``int16`` names.

    ``workers``: how many calibration samples the budget's integer runs (each candidate promotion,
    hessian rounding, a float fallback) put through quantir's interpreter at once, on threads
    (``Interpreter.run_all``); None (default) uses every CPU this process may run on, 1 runs them one
    after another. Only the speed changes: every sample's integers are the same.

    ``outliers``: the passes that move LayerNorm outlier channels from an activation into the weights
    of the matmuls reading it, before calibration (``quantize.outliers``): ``"fold_layer_norm"`` (γ/β
    into the matmuls) and ``"smooth_layer_norm"`` (SmoothQuant scaling, α per LayerNorm). They apply
    only where every reader of the LayerNorm is such a matmul (pre-LN blocks); None or () turns them off.
    Off by default: on the Fashion-MNIST ViT they raise the logits' SQNR against fp32 by 0.5-0.6 dB
    but its top-1 in LiteRT arithmetic came out 0.08-0.23 points lower on the two calibration sets
    measured (docs/numerics.md §9); all-MiniLM-L6-v2 is post-LN, where neither applies.

    ``channel_split``: a conv whose output channels differ in range by 16x or more, read through an
    elementwise activation by a depthwise conv, becomes two convs, two activations and two depthwise
    convs on two channel groups (``quantize.channel_split``; exact in float, LiteRT ops only), so the
    small channels get a scale of their own instead of rounding steps the big ones set. Before
    calibration, from one float pass over the first 64 samples. On by default: PicoDet's stem has
    such channels (and a depthwise conv that amplifies their rounding); False keeps the graph as it is.
    ``calibration_stats`` does not split (statistics of one model from two sample sets must merge).

    ``callback`` replaces the calibration method for every region output: a function of a
    ``calibrate.CalibrationInfo`` returning a ``methods.Range`` (the RFC's CalibrationCallback).

    >>> Config(method="percentile", exclude=("head/Gemm",)).method_options.percentile
    99.999
    """

    method: str = "entropy"                   # minmax | percentile | entropy | mse (see above)
    method_options: MethodOptions | None = None
    per_channel: bool = True                  # per-axis weights (False: one scale per weight tensor)
    exclude: tuple[str, ...] = ()             # op labels (ONNX node names) or nn op names (nn.softmax) to keep float
    engine: Engine = "ort"                    # fp32 calibration executor; the numpy interpreter is the fallback
    batch_size: int = 32                      # samples per calibration batch
    max_samples: int | None = None            # stop after this many calibration samples
    progress: bool = True                     # show a progress bar while calibrating
    bias_correction: BiasCorrection = "weights"   # off | weights | empirical (see above)
    callback: Callable[[Any], Any] | None = None  # CalibrationInfo -> Range per region output; None: `method`
    target: Target = "litert"                 # litert | onnxruntime: whose integer arithmetic quantir evaluates
    weight_rounding: WeightRounding = "auto"      # auto | nearest | hessian (see above)
    layer_norm: LayerNormForm = "rsqrt"       # rsqrt | l2: the LiteRT ops a LayerNorm becomes (see above)
    activations: Activations = "int8"         # int8 | int16 (16x8: int16 activations, int8 weights; see above)
    int16: tuple[str, ...] = ()               # tensor names whose same-scale classes are int16 (mixed precision)
    budget: Any = DEFAULT_BUDGET              # output floor for mixed precision: cosine | "25dB" | callback | None
    outliers: tuple[str, ...] | None = ()      # LayerNorm outlier passes, off by default (quantize.outliers; see above)
    mode: Mode = "static"                     # static (calibrated int8/16x8) | dynamic (no data; see above)
    workers: int | None = None                # threads for the budget's integer runs; None: every CPU (see above)
    channel_split: bool = True                # conv -> activation -> depthwise conv in channel groups (see above)

    def __post_init__(self) -> None:
        if self.method_options is None:
            object.__setattr__(self, "method_options", options_for(self.method))
        if self.max_samples is not None and (isinstance(self.max_samples, bool) or
                                             not isinstance(self.max_samples, Integral) or self.max_samples < 1):
            raise CalibrationError(f"max_samples (--max-samples) must be a whole number of at least 1, got "
                                   f"{self.max_samples!r}: it is how many calibration samples to use at most; "
                                   f"leave it unset to use them all")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.engine not in ("ort", "interpreter"):
            raise ValueError(f"engine must be 'ort' or 'interpreter', got {self.engine!r}")
        if self.target not in TARGETS:
            raise ValueError(f"target must be 'litert' or 'onnxruntime' (the runtime the integer model is for), "
                             f"got {self.target!r}")
        if self.mode not in ("static", "dynamic"):
            raise ValueError(f"mode must be 'static' (calibrated integer model) or 'dynamic' (int8 weights, "
                             f"activations quantized at run time, no calibration data), got {self.mode!r}")
        if self.layer_norm not in ("rsqrt", "l2"):
            raise ValueError(f"layer_norm must be 'rsqrt' or 'l2', got {self.layer_norm!r}")
        if self.weight_rounding not in ("auto", "nearest", "hessian"):
            raise ValueError(f"weight_rounding must be 'auto', 'nearest' or 'hessian', got {self.weight_rounding!r}")
        if self.activations not in ("int8", "int16"):
            raise CalibrationError(f"activations must be 'int8' or 'int16' (the storage of every activation tensor; "
                                   f"int16 is LiteRT's 16x8 mode), got {self.activations!r}")
        if isinstance(self.int16, str):
            object.__setattr__(self, "int16", (self.int16,))
        object.__setattr__(self, "int16", tuple(self.int16))
        if not all(isinstance(n, str) for n in self.int16):
            raise CalibrationError(f"int16 must be tensor names (strings), got {self.int16!r}")
        parse_budget(self.budget)   # a budget it cannot read is an error now, not after calibration
        if isinstance(self.outliers, str):
            object.__setattr__(self, "outliers", (self.outliers,))
        if self.outliers is not None:
            object.__setattr__(self, "outliers", tuple(self.outliers))
            unknown = [p for p in self.outliers if p not in OUTLIER_PASSES]
            if unknown:
                raise ValueError(f"outliers: unknown pass(es) {unknown}; the passes are {list(OUTLIER_PASSES)} "
                                 f"(None or () turns them off)")
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, Integral)
                                         or self.workers < 1):
            raise ValueError(f"workers must be a whole number of at least 1, or None for every CPU this process may "
                             f"use, got {self.workers!r}")
        if self.bias_correction not in ("off", "weights", "empirical"):
            raise ValueError(f"bias_correction must be 'off', 'weights' or 'empirical', got {self.bias_correction!r}")

    @property
    def integer_engine(self) -> str:
        """The engine kind (``calibrate.EngineFactory``) that runs integer segments the target's way."""
        return "ort-qdq" if self.target == "onnxruntime" else "interpreter"

    def excludes(self, label: str | None, op_name: str) -> bool:
        return op_name in self.exclude or (label is not None and label in self.exclude)
