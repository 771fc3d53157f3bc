// RUN: quantir opt %s --mlir-print-op-generic
// --mlir-print-op-generic: the whole module generically, SSA ids unique across the module and
// regions numbered last function first (as MLIR's region worklist does).

// CHECK: "builtin.module"() <{sym_name = "g"}> ({
// CHECK-NEXT:   "func.func"() <{arg_attrs = [{test.a}, {}], function_type = (tensor<4xf32>, f32) -> tensor<4xf32>, res_attrs = [{test.r = 1 : i64}], sym_name = "f"}> ({
// CHECK-NEXT:   ^bb0(%arg1: tensor<4xf32>, %arg2: f32):
// CHECK-NEXT:     %1 = "arith.constant"() <{value = dense<1.000000e+00> : tensor<4xf32>}> : () -> tensor<4xf32>
// CHECK-NEXT:     %2 = "quant.qcast"(%arg1) {k} : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-NEXT:     %3 = "quant.dcast"(%2) : (tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>) -> tensor<4xf32>
// CHECK-NEXT:     "func.return"(%3) : (tensor<4xf32>) -> ()
// CHECK-NEXT:   }) {test.fn} : () -> ()
// CHECK-NEXT:   "func.func"() <{function_type = (i8) -> i8, sym_name = "decl", sym_visibility = "private"}> ({
// CHECK-NEXT:   }) : () -> ()
// CHECK-NEXT:   "func.func"() <{function_type = (i1) -> i32, sym_name = "last"}> ({
// CHECK-NEXT:   ^bb0(%arg0: i1):
// CHECK-NEXT:     %0 = "arith.constant"() <{value = 7 : i32}> : () -> i32
// CHECK-NEXT:     "func.return"(%0) : (i32) -> ()
// CHECK-NEXT:   }) : () -> ()
// CHECK-NEXT: }) {test.m} : () -> ()
module @g attributes {test.m} {
  func.func @f(%a: tensor<4xf32> {test.a}, %b: f32) -> (tensor<4xf32> {test.r = 1}) attributes {test.fn} {
    %c = arith.constant dense<1.0> : tensor<4xf32>
    %q = quant.qcast %a {k} : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.5>>
    %d = quant.dcast %q : tensor<4x!quant.uniform<i8:f32, 0.5>> to tensor<4xf32>
    return %d : tensor<4xf32>
  }
  func.func private @decl(i8) -> i8
  "func.func"() <{function_type = (i1) -> i32, sym_name = "last"}> ({
  ^bb0(%x: i1):
    %0 = "arith.constant"() <{value = 7 : i32}> : () -> i32
    "func.return"(%0) : (i32) -> ()
  }) : () -> ()
}
