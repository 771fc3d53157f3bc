"""The golden tests' FileCheck behaves like LLVM's on the directives it supports."""
from __future__ import annotations

import pytest

from .filecheck import FileCheckError, check

OUT = """module {
  func.func @a(%arg0: f32) -> f32 {
    %0 = "x.y"(%arg0) : (f32) -> f32
    return %0 : f32
  }
  func.func @b() {
    return
  }
}
"""


def test_check_and_next():
    check("// CHECK: func.func @a\n// CHECK-NEXT: %0 = \"x.y\"\n// CHECK-NEXT: return %0", OUT)
    with pytest.raises(FileCheckError):
        check("// CHECK: func.func @a\n// CHECK-NEXT: return %0", OUT)


def test_whitespace_runs_and_regex():
    check("// CHECK:    %0   =   \"x.y\"({{.*}})  :", OUT)
    check("// CHECK: func.func @{{[ab]}}(%arg0: f32)", OUT)


def test_variables():
    check("// CHECK: %[[V:.*]] = \"x.y\"\n// CHECK-NEXT: return %[[V]] : f32", OUT)
    with pytest.raises(FileCheckError):
        check("// CHECK: %[[V:[0-9]+]] = \"x.y\"\n// CHECK: return %[[V]]x", OUT)


def test_not_and_label():
    check("// CHECK-LABEL: @a\n// CHECK-NOT: @b\n// CHECK: return\n// CHECK-LABEL: @b\n// CHECK-NEXT: return", OUT)
    with pytest.raises(FileCheckError):
        check("// CHECK-LABEL: @a\n// CHECK-NOT: \"x.y\"\n// CHECK: return", OUT)
    with pytest.raises(FileCheckError):  # checks stay inside their label's block
        check("// CHECK-LABEL: @b\n// CHECK: \"x.y\"", OUT)


def test_same_and_empty():
    check("// CHECK: func.func @a\n// CHECK-SAME: -> f32 {", OUT)
    with pytest.raises(FileCheckError):
        check("// CHECK: func.func @a\n// CHECK-SAME: return", OUT)
    check("// CHECK: }\n// CHECK-NEXT: }\n// CHECK-EMPTY:", "x\n  }\n}\n\nrest\n")


def test_order_matters_and_no_checks_is_an_error():
    with pytest.raises(FileCheckError):
        check("// CHECK: @b\n// CHECK: @a", OUT)
    with pytest.raises(FileCheckError):
        check("no directives", OUT)
