// RUN: quantir opt %s
// Every attribute kind on generic ops, printed as MLIR prints it: dictionaries sorted,
// `: i64`/`: f64` elided only inside arrays, unit attributes bare, strings escaped.

// CHECK-LABEL: func.func @scalars
func.func @scalars() {
  // CHECK-NEXT: "test.op"() {a = 1 : i64, b = -3 : i32, c = 255 : ui8, d = -1 : i8, e = 7 : index, f = true, g = false, h = -128 : si8} : () -> ()
  "test.op"() {h = -128 : si8, g = false, f = 1 : i1, e = 7 : index, d = 0xFF : i8, c = 255 : ui8, b = -3 : i32, a = 1} : () -> ()
  // CHECK-NEXT: "test.op"() {a = 1.000000e-01 : f64, b = 1.000000e-01 : f32, c = 9.997550e-02 : f16, d = 1.000980e-01 : bf16, e = -0.000000e+00 : f32, f = 0x7F800000 : f32, g = 0x7FC00000 : f32, h = 0xFFF0000000000000 : f64} : () -> ()
  "test.op"() {a = 0.1, b = 0.1 : f32, c = 0.1 : f16, d = 0.1 : bf16, e = -0.0 : f32, f = 1.0e39 : f32, g = 0x7FC00000 : f32, h = 0xFFF0000000000000 : f64} : () -> ()
  // MLIR's float printer: 6 digits if they round-trip in the type, else the shortest that does.
  // CHECK-NEXT: "test.op"() {a = 0.123456702 : f32, b = 0.12345678901234568 : f64, c = 9.9999999999999997E+37 : f64, d = 0x41678C29C0000000 : f64, e = 1.401300e-45 : f32, f = 6.550400e+04 : f16} : () -> ()
  "test.op"() {a = 0.1234567 : f32, b = 0.123456789012345678, c = 1.0e38, d = 12345678.0, e = 1.4e-45 : f32, f = 65504.0 : f16} : () -> ()
  // CHECK-NEXT: "test.op"() {a = "plain", b = "esc\0A\09\22\\\01\FF", c = "caf\C3\A9", d = ""} : () -> ()
  "test.op"() {a = "plain", b = "esc\n\t\"\\\01\FF", c = "café", d = ""} : () -> ()
  return
}

// CHECK-LABEL: func.func @structured
func.func @structured() {
  // CHECK-NEXT: "test.op"() {a = [], b = [1, 2.000000e+00, 3 : i32, 4.000000e+00 : f32, "s", true, unit, f32, [5], {k = 6 : i64}], c = {}, d = {x, y = [7]}} : () -> ()
  "test.op"() {a = [], b = [1, 2.0, 3 : i32, 4.0 : f32, "s", true, unit, f32, [5], {k = 6}], c = {}, d = {y = [7], x}} : () -> ()
  // CHECK-NEXT: "test.op"() {a = array<i64: 1, -2>, b = array<i32>, c = array<f32: 1.000000e+00, 5.000000e-01>, d = array<i1: true, false>, e = array<i8: -1>, f = array<f16: 9.997550e-02>} : () -> ()
  "test.op"() {a = array<i64: 1, -2>, b = array<i32>, c = array<f32: 1.0, 0.5>, d = array<i1: true, false>, e = array<i8: 255>, f = array<f16: 0.1>} : () -> ()
  // CHECK-NEXT: "test.op"() {a = @sym, b = @"with space", c = tensor<2x?x!quant.uniform<i8:f32, 5.000000e-01>>, d = (i32, f32) -> (), e = none, f = index} : () -> ()
  "test.op"() {a = @sym, b = @"with space", c = tensor<2x?x!quant.uniform<i8:f32, 0.5>>, d = (i32, f32) -> (), e = none, f = index} : () -> ()
  // CHECK-NEXT: "test.op"() {"0starts with digit" = 1 : i64, dotted.name = 3 : i64, "has space" = 2 : i64} : () -> ()
  "test.op"() {"has space" = 2, "0starts with digit" = 1, dotted.name = 3} : () -> ()
  return
}

// CHECK-LABEL: func.func @elements
func.func @elements() {
  // CHECK-NEXT: "test.op"() {a = dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>, b = dense<1.500000e+00> : tensor<3xf32>, c = dense<[true, false]> : tensor<2xi1>, d = dense<> : tensor<0x3xf32>, e = dense<-1> : tensor<i8>, f = dense<[1.000980e-01, 2.500000e-01]> : tensor<2xbf16>} : () -> ()
  "test.op"() {a = dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>, b = dense<[1.5, 1.5, 1.5]> : tensor<3xf32>, c = dense<[true, false]> : tensor<2xi1>, d = dense<> : tensor<0x3xf32>, e = dense<255> : tensor<i8>, f = dense<[0.1, 0.25]> : tensor<2xbf16>} : () -> ()
  // CHECK-NEXT: "test.op"() {a = dense<[65535, 0]> : tensor<2xui16>, b = dense<[0x7FC00000, 0xFF800000, 1.000000e+00]> : tensor<3xf32>, c = dense<[[1, 2]]> : tensor<1x2xi64>, d = dense<3> : tensor<2xindex>} : () -> ()
  "test.op"() {a = dense<[65535, 0]> : tensor<2xui16>, b = dense<[0x7FC00000, 0xFF800000, 1.0]> : tensor<3xf32>, c = dense<"0x01000000000000000200000000000000"> : tensor<1x2xi64>, d = dense<3> : tensor<2xindex>} : () -> ()
  return
}

// CHECK-LABEL: func.func @operands_and_results
// CHECK-NEXT: %[[A:.*]]:2 = "test.two"(%arg0) : (f32) -> (f32, i32)
// CHECK-NEXT: %[[B:.*]] = "test.fn"(%[[A]]#1, %[[A]]#0) : (i32, f32) -> ((f32) -> f32)
// CHECK-NEXT: "test.none"() : () -> ()
// CHECK-NEXT: return %[[A]]#0 : f32
func.func @operands_and_results(%arg0: f32) -> f32 {
  %a, %b = "test.two"(%arg0) : (f32) -> (f32, i32)
  %c = "test.fn"(%b, %a) : (i32, f32) -> ((f32) -> f32)
  "test.none"() : () -> ()
  return %a : f32
}
