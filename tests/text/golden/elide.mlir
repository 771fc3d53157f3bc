// RUN: quantir opt %s --mlir-elide-elementsattrs-if-larger=4
// Elements attributes of more than N elements print as dense_resource<__elided__>, splats
// excepted; dense_resource attributes keep their blobs.

// CHECK-LABEL: func.func @elided
// CHECK-NEXT: %cst = arith.constant dense_resource<__elided__> : tensor<5xi8>
// CHECK-NEXT: %cst_0 = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi8>
// CHECK-NEXT: %cst_1 = arith.constant dense<1.000000e+00> : tensor<100xf32>
// CHECK-NEXT: %cst_2 = arith.constant dense_resource<blob> : tensor<8xi8>
// CHECK-NEXT: "test.op"() {a = array<i64: 1, 2, 3, 4, 5, 6>} : () -> ()
// CHECK: blob: "0x010000000102030405060708"
func.func @elided() -> (tensor<5xi8>, tensor<4xi8>, tensor<100xf32>, tensor<8xi8>) {
  %0 = arith.constant dense<[1, 2, 3, 4, 5]> : tensor<5xi8>
  %1 = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi8>
  %2 = arith.constant dense<1.0> : tensor<100xf32>
  %3 = arith.constant dense_resource<blob> : tensor<8xi8>
  "test.op"() {a = array<i64: 1, 2, 3, 4, 5, 6>} : () -> ()
  return %0, %1, %2, %3 : tensor<5xi8>, tensor<4xi8>, tensor<100xf32>, tensor<8xi8>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x010000000102030405060708"
    }
  }
#-}
