// RUN: quantir opt %s
// dense_resource constants: blobs (4-byte little-endian alignment, then the raw little-endian
// data) survive the round trip byte for byte; blobs are listed in order of first use, unused
// ones dropped; `__elided__` has no blob.

// CHECK-LABEL: func.func @blobs
// CHECK-NEXT: %cst = arith.constant dense_resource<weights> : tensor<2x2xf32>
// CHECK-NEXT: %cst_0 = arith.constant dense_resource<"bias key"> : tensor<3xi8>
// CHECK-NEXT: %cst_1 = arith.constant dense_resource<mask> : tensor<2xi1>
// CHECK-NEXT: %cst_2 = arith.constant dense_resource<half> : tensor<2xf16>
// CHECK-NEXT: %cst_3 = arith.constant dense_resource<__elided__> : tensor<2xi64>
// CHECK-NEXT: "test.op"() {w = dense_resource<weights> : tensor<2x2xf32>} : () -> ()
func.func @blobs() -> (tensor<2x2xf32>, tensor<3xi8>, tensor<2xi1>, tensor<2xf16>, tensor<2xi64>) {
  %0 = arith.constant dense_resource<weights> : tensor<2x2xf32>
  %1 = arith.constant dense_resource<"bias key"> : tensor<3xi8>
  %2 = arith.constant dense_resource<mask> : tensor<2xi1>
  %3 = arith.constant dense_resource<half> : tensor<2xf16>
  %4 = arith.constant dense_resource<__elided__> : tensor<2xi64>
  "test.op"() {w = dense_resource<weights> : tensor<2x2xf32>} : () -> ()
  return %0, %1, %2, %3, %4 : tensor<2x2xf32>, tensor<3xi8>, tensor<2xi1>, tensor<2xf16>, tensor<2xi64>
}

// CHECK:      {-#
// CHECK-NEXT:   dialect_resources: {
// CHECK-NEXT:     builtin: {
// CHECK-NEXT:       weights: "0x040000000000803F000000400000404000008040",
// CHECK-NEXT:       "bias key": "0x01000000FF0102",
// CHECK-NEXT:       mask: "0x010000000100",
// CHECK-NEXT:       half: "0x02000000003C00C0"
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: #-}
// CHECK-NOT: unused
{-#
  dialect_resources: {
    builtin: {
      unused: "0x0400000001000000",
      half: "0x02000000003C00C0",
      mask: "0x010000000100",
      "bias key": "0x01000000FF0102",
      weights: "0x040000000000803F000000400000404000008040"
    }
  }
#-}
