// RUN: quantir opt %s
// Trailing locations, location aliases and attribute/type aliases are read and dropped
// (aliases are resolved); comments are ignored.

// CHECK-LABEL: func.func @with_locations
// CHECK-SAME: (%arg0: tensor<2xf32>) -> tensor<2xf32> attributes {k = 3 : i32} {
// CHECK-NEXT: %0 = "test.op"(%arg0) {c = 3 : i32} : (tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT: return %0 : tensor<2xf32>
#three = 3 : i32
!vec = tensor<2xf32>
#loc = loc("model.py":10:4)
func.func @with_locations(%arg0: !vec loc("in":1:1)) -> !vec attributes {k = #three} {
  %0 = "test.op"(%arg0) {c = #three} : (!vec) -> tensor<2xf32> loc(#loc) // a comment
  return %0 : tensor<2xf32> loc(fused["a", callsite("f" at "g":1:2)])
} loc(unknown)
