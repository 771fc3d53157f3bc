"""Round-trip properties on random modules built through the IR API (see ir_strategies):
print -> parse -> print is a fixed point in every printing mode, and iree-opt reads quantir's
output and prints exactly the same text."""
from __future__ import annotations

import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .ir_strategies import modules
from quantir.text import parse_module, print_module

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(modules(), st.sampled_from(["resource", "inline", "elide"]), st.booleans())
def test_print_parse_print_is_a_fixed_point(module, large_elements, generic):
    first = print_module(module, large_elements=large_elements, generic=generic)
    reparsed = parse_module(first, "printed.mlir")  # valid IR prints valid text
    assert print_module(reparsed, large_elements=large_elements, generic=generic) == first
    # and the generic and custom forms describe the same module
    assert print_module(parse_module(print_module(reparsed, large_elements=large_elements, generic=not generic)),
                        large_elements=large_elements, generic=generic) == first


@pytest.mark.oracle
def test_iree_opt_reads_and_reprints_the_same_text(iree_opt):
    """Modules drawn by hypothesis, checked in one iree-opt process (`// -----` chunks)."""
    texts: list[str] = []

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(modules())
    def collect(module):
        texts.append(print_module(module))

    collect()
    proc = subprocess.run([iree_opt, "--allow-unregistered-dialect", "--split-input-file"],
                          input="// -----\n".join(texts), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    outputs = proc.stdout.split("// -----\n")
    assert len(outputs) == len(texts)
    for ours, theirs in zip(texts, outputs):
        assert theirs == ours + "\n", f"iree-opt printed\n{theirs}\nfor quantir's\n{ours}"
