// RUN: quantir opt %s --split-input-file --canonicalize
// The quant casts' folds and dead-cast erasure, as mlir-opt --canonicalize applies them.

// dcast(qcast(x)) -> x, whatever the quantized type in between.
// CHECK-LABEL: func.func @dcast_of_qcast
// CHECK-NEXT: return %arg0 : tensor<4xf32>
func.func @dcast_of_qcast(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 2.500000e-01>>
  %1 = quant.dcast %0 : tensor<4x!quant.uniform<i8:f32, 2.500000e-01>> to tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// qcast(dcast(y)) -> y when the types match...
// CHECK-LABEL: func.func @qcast_of_dcast_same_type
// CHECK-NEXT: return %arg0 : tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>
func.func @qcast_of_dcast_same_type(%arg0: tensor<4x!quant.uniform<i8:f32, 0.5>>) -> tensor<4x!quant.uniform<i8:f32, 0.5>> {
  %0 = quant.dcast %arg0 : tensor<4x!quant.uniform<i8:f32, 0.5>> to tensor<4xf32>
  %1 = quant.qcast %0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.5>>
  return %1 : tensor<4x!quant.uniform<i8:f32, 0.5>>
}

// -----

// ...and is a requantization, kept, when they do not.
// CHECK-LABEL: func.func @qcast_of_dcast_other_type
// CHECK-NEXT: %[[D:.*]] = quant.dcast %arg0 : tensor<4x!quant.uniform<i8:f32, 5.000000e-01>> to tensor<4xf32>
// CHECK-NEXT: %[[Q:.*]] = quant.qcast %[[D]] : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 2.500000e-01>>
// CHECK-NEXT: return %[[Q]]
func.func @qcast_of_dcast_other_type(%arg0: tensor<4x!quant.uniform<i8:f32, 0.5>>) -> tensor<4x!quant.uniform<i8:f32, 0.25>> {
  %0 = quant.dcast %arg0 : tensor<4x!quant.uniform<i8:f32, 0.5>> to tensor<4xf32>
  %1 = quant.qcast %0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.25>>
  return %1 : tensor<4x!quant.uniform<i8:f32, 0.25>>
}

// -----

// scast(scast(x)) -> x when x's type comes back; a chain of four folds to nothing.
// CHECK-LABEL: func.func @scast_pairs
// CHECK-NEXT: return %arg0, %arg0 : tensor<4xi8>, tensor<4xi8>
func.func @scast_pairs(%arg0: tensor<4xi8>) -> (tensor<4xi8>, tensor<4xi8>) {
  %0 = quant.scast %arg0 : tensor<4xi8> to tensor<4x!quant.uniform<i8:f32, 1.0>>
  %1 = quant.scast %0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4xi8>
  %2 = quant.scast %1 : tensor<4xi8> to tensor<4x!quant.uniform<i8:f32, 2.0>>
  %3 = quant.scast %2 : tensor<4x!quant.uniform<i8:f32, 2.0>> to tensor<4xi8>
  return %1, %3 : tensor<4xi8>, tensor<4xi8>
}

// -----

// scast(scast(x)) with another quantized type at the end does not fold.
// CHECK-LABEL: func.func @scast_retype
// CHECK-NEXT: %[[S:.*]] = quant.scast %arg0 : tensor<4x!quant.uniform<i8:f32, 1.000000e+00>> to tensor<4xi8>
// CHECK-NEXT: %[[T:.*]] = quant.scast %[[S]] : tensor<4xi8> to tensor<4x!quant.uniform<i8:f32, 2.000000e+00>>
// CHECK-NEXT: return %[[T]]
func.func @scast_retype(%arg0: tensor<4x!quant.uniform<i8:f32, 1.0>>) -> tensor<4x!quant.uniform<i8:f32, 2.0>> {
  %0 = quant.scast %arg0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4xi8>
  %1 = quant.scast %0 : tensor<4xi8> to tensor<4x!quant.uniform<i8:f32, 2.0>>
  return %1 : tensor<4x!quant.uniform<i8:f32, 2.0>>
}

// -----

// Unused casts are erased (they are Pure); unregistered ops are kept.
// CHECK-LABEL: func.func @unused_casts
// CHECK-NOT: quant.
// CHECK: "test.effect"(%arg0)
// CHECK-NOT: quant.
// CHECK: return
func.func @unused_casts(%arg0: tensor<4xf32>) {
  %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 1.0>>
  %1 = quant.scast %0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4xi8>
  %2 = quant.dcast %0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4xf32>
  "test.effect"(%arg0) : (tensor<4xf32>) -> ()
  return
}

// -----

// Equal constants merge and move to the front, as MLIR's OperationFolder does; unused ones go.
// CHECK-LABEL: func.func @constants
// CHECK-NEXT: %[[C2:.*]] = arith.constant 2 : i32
// CHECK-NEXT: %[[C1:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[X:.*]] = "test.source"() : () -> f32
// CHECK-NEXT: "test.use"(%[[C1]], %[[C1]], %[[X]], %[[C2]]) : (f32, f32, f32, i32) -> ()
// CHECK-NEXT: return
func.func @constants() {
  %x = "test.source"() : () -> f32
  %a = arith.constant 1.0 : f32
  %b = arith.constant 1.0 : f32
  %unused = arith.constant 7 : i64
  %c = arith.constant 2 : i32
  "test.use"(%a, %b, %x, %c) : (f32, f32, f32, i32) -> ()
  return
}

// -----

// A round trip through quantization inside a graph leaves only the float path.
// CHECK-LABEL: func.func @qdq_chain
// CHECK-NEXT: %[[R:.*]] = "test.relu"(%arg0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK-NEXT: return %[[R]]
func.func @qdq_chain(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = quant.qcast %arg0 : tensor<2x2xf32> to tensor<2x2x!quant.uniform<i8:f32, 0.1:-1>>
  %1 = quant.dcast %0 : tensor<2x2x!quant.uniform<i8:f32, 0.1:-1>> to tensor<2x2xf32>
  %2 = "test.relu"(%1) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %3 = quant.qcast %2 : tensor<2x2xf32> to tensor<2x2x!quant.uniform<i8:f32, 0.1:-1>>
  %4 = quant.dcast %3 : tensor<2x2x!quant.uniform<i8:f32, 0.1:-1>> to tensor<2x2xf32>
  return %4 : tensor<2x2xf32>
}
