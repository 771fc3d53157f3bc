// RUN: quantir opt %s
// arith.constant in its custom form, with MLIR's result names: %cN_iW for integers, %true and
// %false for i1, %cst for floats and elements; clashes get _0, _1, ... from one counter per function.

// CHECK-LABEL: func.func @names
// CHECK-NEXT: %c1_i64 = arith.constant 1 : i64
// CHECK-NEXT: %c1_i64_0 = arith.constant 1 : i64
// CHECK-NEXT: %c-1_i8 = arith.constant -1 : i8
// CHECK-NEXT: %c3 = arith.constant 3 : index
// CHECK-NEXT: %true = arith.constant true
// CHECK-NEXT: %false = arith.constant false
// CHECK-NEXT: %true_1 = arith.constant {tag} true
// CHECK-NEXT: %cst = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %cst_2 = arith.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-NEXT: %cst_3 = arith.constant dense<0.000000e+00> : tensor<2x2xf16>
// CHECK-NEXT: %c42_i32 = arith.constant 42 : i32
// CHECK-NEXT: %0 = "test.use"
func.func @names() {
  %a = arith.constant 1 : i64
  %b = arith.constant 1
  %c = arith.constant 255 : i8
  %d = arith.constant 3 : index
  %e = arith.constant true
  %f = arith.constant 0 : i1
  %g = arith.constant {tag} 1 : i1
  %h = arith.constant 1.0 : f32
  %i = arith.constant dense<[1, 2]> : tensor<2xi64>
  %j = arith.constant dense<0.0> : tensor<2x2xf16>
  %k = "arith.constant"() <{value = 42 : i32}> : () -> i32
  %u = "test.use"(%a, %b, %c, %d, %e, %f, %g, %h, %i, %j, %k) : (i64, i64, i8, index, i1, i1, i1, f32, tensor<2xi64>, tensor<2x2xf16>, i32) -> i1
  return
}

// Names restart in every function.
// CHECK-LABEL: func.func @restart
// CHECK-NEXT: %cst = arith.constant 2.000000e+00 : f64
// CHECK-NEXT: return %cst
func.func @restart() -> f64 {
  %0 = arith.constant 2.0
  return %0 : f64
}

// More than 100 elements print as hex (not splats); legacy generic constants keep their value.
// CHECK-LABEL: func.func @large
// CHECK-NEXT: %cst = arith.constant dense<"0x000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F60616263646566"> : tensor<103xi8>
// CHECK-NEXT: %cst_0 = arith.constant dense<7> : tensor<200xi8>
func.func @large() -> (tensor<103xi8>, tensor<200xi8>) {
  %0 = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102]> : tensor<103xi8>
  %1 = "arith.constant"() {value = dense<7> : tensor<200xi8>} : () -> tensor<200xi8>
  return %0, %1 : tensor<103xi8>, tensor<200xi8>
}
