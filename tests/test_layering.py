"""The layer order of ``src/quantir``, read from the import statements (an AST check, no import runs).

Every ``import X``, ``from X import Y`` and relative import counts, wherever it is written (a
function-level import is a dependency all the same, only a later one). Imports under
``if TYPE_CHECKING:`` do not count: they never run, they name types for annotations.
``from pkg import name`` depends on the module ``pkg.name`` when that is a module, else on
``pkg`` itself; a parent package that Python runs on the way to a submodule is not an edge
(otherwise every package whose ``__init__`` re-exports a submodule would be a cycle).

Two rules:

(a) Layers, lowest first. A module imports only modules of its own layer or a lower one.
    Kernel libraries are a layer with a narrower rule of their own: they compute on arrays
    and import only ``ir``, ``numerics``, ``types`` and ``errors``.
(b) No import cycle between the modules inside ``quantize/`` and inside ``backends/onnx/``.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable, Mapping

SRC = Path(__file__).resolve().parents[1] / "src"

# (layer name, module prefixes). The root package ``quantir`` holds ``__version__`` and a lazy
# facade that loads ``quantir.api`` with importlib only on attribute access, so it sits at the bottom.
# ``runtime.ort`` runs a module by exporting it with the ONNX backend and handing it to ONNX
# Runtime: an engine over a format, so it sits with frontends and backends, not with the interpreter.
# The TFLite flatbuffer schema and reader live in ``backends/tflite`` and ``frontends/tflite`` reads
# them: frontends and backends are one layer, the formats quantir reads and writes.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("quantir", "quantir.errors", "quantir.fileio", "quantir.types", "quantir.numerics",
              "quantir.datasets")),
    ("ir", ("quantir.ir",)),
    ("text", ("quantir.text",)),
    ("rewrite", ("quantir.rewrite",)),
    ("kernels", ("quantir.runtime.kernels", "quantir.runtime.qkernels")),
    ("passes", ("quantir.passes",)),
    ("quantize", ("quantir.quantize",)),
    ("runtime", ("quantir.runtime",)),
    ("frontends/backends", ("quantir.frontends", "quantir.backends", "quantir.runtime.ort")),
    ("report", ("quantir.report", "quantir.verify")),
    ("api", ("quantir.api",)),
    ("cli", ("quantir.cli", "quantir.__main__")),
)
KERNEL_IMPORTS = ("quantir.ir", "quantir.numerics", "quantir.types", "quantir.errors")
NO_CYCLES = ("quantir.quantize", "quantir.backends.onnx")

# Violations the quantizer refactor (issue 12) is removing, as (importer, imported). The test fails
# on any violation not listed here, and on an entry that no longer occurs: delete it then.
KNOWN: frozenset[tuple[str, str]] = frozenset({
    # quantize/__init__ re-exports the api's quantize()
    ("quantir.quantize", "quantir.api"),
})


# -- reading the imports ----------------------------------------------------------------------------

def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth, except the body of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        children = list(ast.iter_child_nodes(node))
        if _type_checking_block(node):
            children = [c for c in children if c not in node.body]
        stack.extend(children)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The longest module of ``modules`` that ``name`` is or lies in (``quantir.ir.Value`` -> ``quantir.ir``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, tree: ast.AST, is_package: bool, modules: set[str]) -> set[str]:
    """The quantir modules ``name`` imports."""
    out: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in targets:
            if target == "quantir" or target.startswith("quantir."):
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != name:
                    out.add(resolved)
    return out


def read_imports(src: Path = SRC) -> dict[str, set[str]]:
    files = {module_name(p, src): p for p in sorted((src / "quantir").rglob("*.py"))}
    modules = set(files)
    return {name: imports_of(name, ast.parse(p.read_text(), str(p)), p.name == "__init__.py", modules)
            for name, p in files.items()}


# -- the rules --------------------------------------------------------------------------------------

def _in(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the longest prefix ``module`` lies in."""
    best, length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if _in(module, prefix) and len(prefix) > length:
                best, length = index, len(prefix)
    if best < 0:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it to one")
    return best


def layer_violations(imports: Mapping[str, set[str]]) -> dict[tuple[str, str], str]:
    out = {}
    for a, targets in imports.items():
        la = layer_of(a)
        for b in targets:
            lb = layer_of(b)
            if LAYERS[la][0] == "kernels" and not any(_in(b, p) for p in (*LAYERS[la][1], *KERNEL_IMPORTS)):
                out[(a, b)] = (f"{a} imports {b} (kernel libraries import only "
                               f"{', '.join(p.removeprefix('quantir.') for p in KERNEL_IMPORTS)})")
            elif lb > la:
                out[(a, b)] = f"{a} imports {b} (layer {LAYERS[lb][0]} above {LAYERS[la][0]})"
    return out


def _strongly_connected(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of ``graph`` (iterative, in discovery order)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def cycle_violations(imports: Mapping[str, set[str]], scopes: Iterable[str] = NO_CYCLES) -> dict[tuple[str, str], str]:
    """Each import between two modules of one import cycle inside a scope."""
    out = {}
    for scope in scopes:
        graph = {a: {b for b in targets if _in(b, scope)} for a, targets in imports.items() if _in(a, scope)}
        for b in {b for targets in graph.values() for b in targets} - set(graph):
            graph[b] = set()
        for component in _strongly_connected(graph):
            for a in sorted(component):
                for b in sorted(graph[a] & component):
                    out[(a, b)] = f"{a} imports {b} (import cycle among {', '.join(sorted(component))})"
    return out


def violations(imports: Mapping[str, set[str]]) -> dict[tuple[str, str], str]:
    return {**layer_violations(imports), **cycle_violations(imports)}


# -- the tests --------------------------------------------------------------------------------------

def test_src_follows_the_layer_order_and_has_no_cycles():
    found = violations(read_imports())
    new = [message for edge, message in sorted(found.items()) if edge not in KNOWN]
    gone = sorted(KNOWN - set(found))
    assert not new, "imports against the layer order or in a cycle:\n" + "\n".join(new)
    assert not gone, "fixed, remove from KNOWN in tests/test_layering.py: " + ", ".join(map(str, gone))


def test_every_module_is_in_a_layer():
    for name in read_imports():
        layer_of(name)


def test_a_cycle_and_an_upward_import_are_reported():
    imports = {
        "quantir.ir.core": {"quantir.quantize.lower"},          # ir importing the quantizer: upward
        "quantir.quantize.lower": {"quantir.quantize.solver", "quantir.ir.core"},
        "quantir.quantize.solver": {"quantir.quantize.lower"},  # lower <-> solver
        "quantir.backends.onnx.qdq": {"quantir.backends.onnx.quantized"},   # one way: fine
        "quantir.backends.onnx.quantized": set(),
    }
    assert sorted(violations(imports).values()) == [
        "quantir.ir.core imports quantir.quantize.lower (layer quantize above ir)",
        "quantir.quantize.lower imports quantir.quantize.solver "
        "(import cycle among quantir.quantize.lower, quantir.quantize.solver)",
        "quantir.quantize.solver imports quantir.quantize.lower "
        "(import cycle among quantir.quantize.lower, quantir.quantize.solver)",
    ]


def test_kernel_libraries_import_only_ir_numerics_types_errors():
    imports = {"quantir.runtime.kernels.conv": {"quantir.text.printer", "quantir.numerics.rounding"},
               "quantir.runtime.qkernels.add": {"quantir.runtime.kernels.conv", "quantir.ir.core"}}
    assert list(layer_violations(imports).values()) == [
        "quantir.runtime.kernels.conv imports quantir.text.printer "
        "(kernel libraries import only ir, numerics, types, errors)"]


def test_reading_imports_resolves_relative_function_level_and_submodule_imports(tmp_path):
    pkg = tmp_path / "quantir"
    (pkg / "backends" / "onnx").mkdir(parents=True)
    for rel in ("__init__.py", "errors.py", "backends/__init__.py", "backends/onnx/__init__.py",
                "backends/onnx/builder.py"):
        (pkg / rel).write_text("")
    (pkg / "backends" / "onnx" / "qdq.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import builder\n"
        "import quantir.errors as e\n"
        "if TYPE_CHECKING:\n"
        "    from quantir.api import x\n"
        "def f():\n"
        "    from ...errors import QuantirError\n"
        "    from .. import onnx\n")
    assert read_imports(tmp_path)["quantir.backends.onnx.qdq"] == {
        "quantir.backends.onnx.builder", "quantir.errors", "quantir.backends.onnx"}
