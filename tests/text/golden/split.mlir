// RUN: quantir opt %s --split-input-file
// --split-input-file: every chunk is a module of its own, outputs joined by the marker line.

// CHECK:      module {
// CHECK-NEXT:   func.func @first() {
// CHECK-NEXT:     return
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: // {{-}}----
// CHECK-NEXT: module @second {
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: // {{-}}----
// CHECK-NEXT: module {
// CHECK-NEXT:   func.func private @third(f32)
// CHECK-NEXT: }
func.func @first() {
  return
}

// -----

module @second {
}

// -----

func.func private @third(f32)
