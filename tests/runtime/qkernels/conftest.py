"""Print how many one-op LiteRT models each integer kernel was compared on."""
import sys


def pytest_terminal_summary(terminalreporter):
    oracle = sys.modules.get("qk_oracle")  # imported by the oracle tests; absent when LiteRT is missing
    if oracle is None or not oracle.COUNTS:
        return
    terminalreporter.section("qkernels vs LiteRT: models compared per op")
    for op in sorted(oracle.COUNTS):
        terminalreporter.write_line(f"{op:28s} {oracle.COUNTS[op]:5d}   mismatching models: {oracle.MISMATCHES[op]}")
