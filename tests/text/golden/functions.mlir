// RUN: quantir opt %s
// Modules and functions: names, visibility, declarations, argument/result attributes, function
// attributes, result lists, multi-result ops and renumbered SSA names.

// CHECK: module @model attributes {quantir.version = 1 : i64, x.flag} {
module @model attributes {x.flag, quantir.version = 1} {
  // CHECK-NEXT: func.func @main(%arg0: tensor<1x4xf32> {onnx.name = "input"}, %arg1: i8) -> (tensor<1x4xf32> {onnx.name = "output"}, i8) attributes {quantir.source = "test"} {
  func.func @main(%input: tensor<1x4xf32> {onnx.name = "input"}, %n: i8) -> (tensor<1x4xf32> {onnx.name = "output"}, i8) attributes {quantir.source = "test"} {
    // CHECK-NEXT: %0:3 = "test.split"(%arg0) : (tensor<1x4xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>, i1)
    %parts:3 = "test.split"(%input) : (tensor<1x4xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>, i1)
    // CHECK-NEXT: %1 = "test.concat"(%0#1, %0#0) {axis = 1 : i64} : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x4xf32>
    %joined = "test.concat"(%parts#1, %parts#0) {axis = 1} : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x4xf32>
    // CHECK-NEXT: %2 = "test.call_like"(%1) {callee = @helper} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %r = "test.call_like"(%joined) {callee = @helper} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    // CHECK-NEXT: return %2, %arg1 : tensor<1x4xf32>, i8
    return %r, %n : tensor<1x4xf32>, i8
  }
  // CHECK-NEXT: }
  // CHECK-NEXT: func.func private @helper(tensor<1x4xf32> {test.arg}) -> tensor<1x4xf32>
  func.func private @helper(%x: tensor<1x4xf32> {test.arg}) -> tensor<1x4xf32>
  // CHECK-NEXT: func.func private @two_results(i8, f32) -> (i8, f32)
  func.func private @two_results(i8, f32) -> (i8, f32)
  // CHECK-NEXT: func.func private @returns_function() -> ((f32) -> f32)
  func.func private @returns_function() -> ((f32) -> f32)
  // CHECK-NEXT: func.func nested @nested_decl()
  func.func nested @nested_decl()
  // CHECK-NEXT: func.func @no_results(%arg0: f32) {
  // CHECK-NEXT:   return
  // CHECK-NEXT: }
  func.func @no_results(%a: f32) -> () {
    return
  }
  // CHECK-NEXT: func.func public @explicit_public() {
  func.func public @explicit_public() {
    return
  }
  // CHECK: func.func @"quoted name"() {
  func.func @"quoted name"() {
    return
  }
}
