"""The quantizer's stages as text, for the golden files in ``tests/quantize/golden``.

A case is a float ``.mlir`` file (the ``nn`` dialect as ``print_module`` writes it) whose
leading comments declare ranges::

    // RANGES: %arg0 = [-1.0, 1.0]
    // RANGES: %1 = [0.0, 2.5]

The names are the SSA names of the file itself. Calibration reads them like this:

- every function argument needs a line: its calibration data is ``SAMPLES`` samples whose
  elements are evenly spaced over that range (``np.linspace``, in C order), so the observed
  range is exactly the declared one and no random generator is involved;
- every region's output needs a line too: it is what the calibration callback returns for that
  region (so no range in the outputs depends on float rounding of the machine);
- any other name is an error: the quantizer takes the range of a float op's output from the
  data, so a line for it would be ignored without a word.

``run_case`` quantizes through the public API (``quantir.quantize`` with the callback above:
annotate, calibrate, solve, lower) and renders what each stage decided: ``annotate`` (one line
per region, one per op left float with its reason), ``solve`` (one line per value with
parameters, in the order of the file) and ``lower`` (the integer module, printed with every
constant inline so the weights can be read).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import quantir as qr
from quantir.ir import Function, Value
from quantir.quantize.methods import Range
from quantir.text import parse_module, print_module
from quantir.text.printer import Namer

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
STAGES = ("annotate", "solve", "lower")
SUFFIX = {"annotate": ".annotate.txt", "solve": ".solve.txt", "lower": ".lower.mlir"}
SAMPLES = 16   # the health check calls fewer a guess and warns
# bias correction moves the int32 bias by the float conv's mean error on the data; off, the
# bias in the lowered file is the model's bias over (input scale x weight scale), checkable by hand
CONFIG = {"engine": "interpreter", "progress": False, "bias_correction": "off"}

_RANGE = re.compile(r"//\s*RANGES:\s*(?P<name>%\S+)\s*=\s*\[\s*(?P<lo>[^,\]]+?)\s*,\s*(?P<hi>[^\]]+?)\s*\]\s*$")


class GoldenError(Exception):
    """A golden case that cannot run as written (names the file and the line)."""


@dataclass(frozen=True)
class Case:
    path: Path
    text: str
    ranges: dict[str, tuple[float, float]]   # SSA name ('%1') -> declared range

    @property
    def name(self) -> str:
        return self.path.name[: -len(".mlir")]

    def expected_path(self, stage: str) -> Path:
        return self.path.with_name(self.name + SUFFIX[stage])


def all_cases(directory: Path = GOLDEN_DIR) -> list[Case]:
    """Every input in ``directory``: the ``.mlir`` files that are not a stage's output."""
    return [load_case(p) for p in sorted(directory.glob("*.mlir")) if not p.name.endswith(SUFFIX["lower"])]


def load_case(path: Path) -> Case:
    text = path.read_text()
    ranges: dict[str, tuple[float, float]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not re.match(r"//\s*RANGES:", line):
            continue
        m = _RANGE.match(line)
        if m is None:
            raise GoldenError(f"{path.name}:{number}: expected '// RANGES: %name = [low, high]', found {line!r}")
        name = m["name"]
        try:
            lo, hi = float(m["lo"]), float(m["hi"])
        except ValueError:
            raise GoldenError(f"{path.name}:{number}: the bounds of {name} are not numbers: {line!r}") from None
        if not lo <= hi or name in ranges:
            why = f"{name} is declared twice" if name in ranges else f"low {lo:g} is above high {hi:g}"
            raise GoldenError(f"{path.name}:{number}: {why}")
        ranges[name] = (lo, hi)
    return Case(path, text, ranges)


def non_comment_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("//")]


def canonical_input(case: Case) -> str:
    """The input as ``print_module`` writes it: the names in RANGES lines and in the stage
    outputs are its SSA names, so the checked-in input must read the same."""
    return print_module(parse_module(case.text, str(case.path)), large_elements="inline")


def value_names(fn: Function) -> dict[Value, str]:
    """Each value of ``fn`` with the SSA name the printer gives it, in the order it prints them."""
    namer = Namer.for_block(fn.body)
    values = list(fn.body.arguments) + [r for op in fn.ops for r in op.results]
    return {v: namer.use(v) for v in values}


def calibration(case: Case, fn: Function, names: dict[Value, str]) -> dict[str, np.ndarray]:
    """``SAMPLES`` samples per argument, evenly spaced over its declared range."""
    feeds = {}
    for i, arg in enumerate(fn.body.arguments):
        name = names[arg]
        if name not in case.ranges:
            raise GoldenError(f"{case.path.name}: argument {name} has no '// RANGES: {name} = [low, high]' line; "
                              "its calibration data is built from it")
        attr = fn.arg_attrs[i].get("quantir.name") if i < len(fn.arg_attrs) else None
        if attr is None:
            raise GoldenError(f"{case.path.name}: argument {name} needs a {{quantir.name = \"...\"}} attribute")
        sample = tuple(arg.type.shape[1:])
        lo, hi = case.ranges[name]
        count = SAMPLES * int(np.prod(sample, dtype=np.int64))
        feeds[attr.value] = np.linspace(lo, hi, count, dtype=np.float32).reshape((SAMPLES, *sample))
    return feeds


def run_case(case: Case) -> dict[str, str]:
    """Quantize the case and return each stage's text, keyed by stage."""
    module = parse_module(case.text, str(case.path))
    fn = module.main
    names = value_names(fn)
    by_name = {n: v for v, n in names.items()}
    unknown = sorted(set(case.ranges) - set(by_name))
    if unknown:
        raise GoldenError(f"{case.path.name}: RANGES names {', '.join(unknown)}, which the function does not define")
    declared = {by_name[n]: r for n, r in case.ranges.items()}

    undeclared: list[str] = []

    def callback(info):
        rng = declared.get(info.region.output)
        if rng is None:
            undeclared.append(names[info.region.output])
            return info.output_range()
        return Range(*rng)

    result = qr.quantize(module, calibration(case, fn, names), qr.Config(callback=callback, **CONFIG))
    if undeclared:
        raise GoldenError(f"{case.path.name}: region output {', '.join(undeclared)} has no '// RANGES: "
                          f"{undeclared[0]} = [low, high]' line; it is what the calibration callback returns")
    outputs = {r.output for r in result.annotation.regions}
    ignored = sorted((n for v, n in names.items() if n in case.ranges and v not in outputs
                      and v not in fn.body.arguments), key=list(names.values()).index)
    if ignored:
        raise GoldenError(f"{case.path.name}: RANGES names {', '.join(ignored)}, which is neither an argument nor "
                          "a region's output: the quantizer observes its range on the data, the line would be ignored")
    return {"annotate": annotation_text(result.annotation, names),
            "solve": params_text(result.params, names),
            "lower": print_module(result.module, large_elements="inline")}


# -- rendering ------------------------------------------------------------------------------------

def _kind(kind) -> str:
    return getattr(kind, "name", None) or str(kind)   # a LiteRT builtin enum or its name


def _op(op, names: dict[Value, str]) -> str:
    return f"{names[op.results[0]]} {op.name}" if op.results else op.name


def annotation_text(annotation, names: dict[Value, str]) -> str:
    """``region <pattern> -> <LiteRT op> [activation]: <ops claimed> (inputs ...)`` per region,
    ``float <op>: <reason>`` per op left float, in program order."""
    lines = []
    for r in annotation.regions:
        act = "" if r.activation == "NONE" else f" [{r.activation}]"
        ops = ", ".join(_op(op, names) for op in r.ops)
        inputs = ", ".join(names[v] for v in r.inputs)
        lines.append(f"region {r.pattern.name} -> {_kind(r.pattern.kind)}{act}: {ops} (inputs {inputs})")
    for op, why in annotation.float_ops:
        lines.append(f"float {_op(op, names)}: {why}")
    return "\n".join(lines) + "\n"


def _num(x) -> str:
    """The shortest text that reads back as the same float32."""
    return str(np.float32(x))


def _nums(xs) -> str:
    return "[" + ", ".join(_num(x) for x in np.atleast_1d(np.asarray(xs, np.float32))) + "]"


def params_text(params, names: dict[Value, str]) -> str:
    """One line per value the solver decided, in the order of the file: activations with
    ``scale``, ``zero_point``, whether the op imposes them (``fixed``) or the range does
    (``calibrated``), and the range; weights with their scales and the bias to quantize."""
    lines = []
    for v, name in names.items():
        p = params.get(v)
        if p is None:
            continue
        if hasattr(p, "zero_point"):
            how = "fixed" if p.fixed else "calibrated"
            lines.append(f"{name}: scale {_num(p.scale)} zero_point {p.zero_point} {how} "
                         f"range [{_num(p.rmin)}, {_num(p.rmax)}]")
        else:
            per = "per channel" if np.ndim(p.scale) else "per tensor"
            bias = "none" if p.bias is None else _nums(p.bias)
            lines.append(f"{name}: weights scale {_nums(p.scale)} ({per}) bias {bias}")
    return "\n".join(lines) + "\n"


# -- comparison ----------------------------------------------------------------------------------

def compare(produced: str, expected_path: Path, update: bool = False) -> None:
    """Assert that ``produced`` is the text of ``expected_path``, with a unified diff when it is
    not; with ``update``, write it there instead (then review the change with ``git diff``)."""
    if update:
        expected_path.write_text(produced)
        return
    if not expected_path.exists():
        raise AssertionError(f"{expected_path.name} does not exist: run with QUANTIR_UPDATE_GOLDEN=1 to write it, "
                             "then read it before committing")
    expected = expected_path.read_text()
    if produced != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), produced.splitlines(keepends=True),
                                            f"{expected_path.name} (expected)", f"{expected_path.name} (produced)"))
        raise AssertionError(f"{expected_path.name} differs (QUANTIR_UPDATE_GOLDEN=1 rewrites it):\n{diff}")
