"""The runnable examples in the numerics docstrings stay true."""
import doctest
import importlib

import pytest

MODULES = ["quantir.numerics", "quantir.numerics.rounding", "quantir.numerics.fixedpoint",
           "quantir.numerics.gemmlowp", "quantir.numerics.multipliers", "quantir.numerics.quantize",
           "quantir.numerics.qparams"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_numerics_imports_only_numpy_and_the_standard_library():
    import ast
    import pathlib
    import sys

    import quantir.numerics as pkg

    allowed = {"numpy", "quantir"} | set(sys.stdlib_module_names)
    for path in pathlib.Path(pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [node.module.split(".")[0]]
                if roots == ["quantir"]:
                    assert node.module.startswith(("quantir.numerics", "quantir.errors")), (path.name, node.module)
            else:
                continue
            assert set(roots) <= allowed, (path.name, roots)


def test_public_api_is_exported():
    import quantir.numerics as qn

    assert len(qn.__all__) == len(set(qn.__all__))
    for name in qn.__all__:
        assert hasattr(qn, name), name
