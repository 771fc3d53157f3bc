// FLAGS: --split-input-file --normalize-quant-types
// Sub-channel types as per-tensor / per-axis where their scales allow (mlir-opt 22.1.8 wrote
// normalize_quant_types.expected).

func.func private @callee(tensor<?x?x!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0:127}}>>) -> tensor<?x?x!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0:127}}>>

func.func @to_per_tensor(%arg0: tensor<?x?x!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0:127}}>>) -> tensor<?x?xf32> {
  %0 = quant.dcast %arg0 : tensor<?x?x!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0:127}}>> to tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @to_per_axis(%arg0: tensor<3x4xf32>) -> tensor<3x4x!quant.uniform<i8:f32:{0:1, 1:4}, {{2.0:10}, {3.0:20}, {4.0:30}}>> {
  %0 = quant.qcast %arg0 : tensor<3x4xf32> to tensor<3x4x!quant.uniform<i8:f32:{0:1, 1:4}, {{2.0:10}, {3.0:20}, {4.0:30}}>>
  return %0 : tensor<3x4x!quant.uniform<i8:f32:{0:1, 1:4}, {{2.0:10}, {3.0:20}, {4.0:30}}>>
}

// -----

func.func @to_per_axis_last(%arg0: tensor<2x6x!quant.uniform<u8<1:255>:f32:{0:2, 1:2}, {{1.0:1, 2.0:2, 3.0:3}}>>) -> tensor<2x6x!quant.uniform<u8<1:255>:f32:{0:2, 1:2}, {{1.0:1, 2.0:2, 3.0:3}}>> {
  return %arg0 : tensor<2x6x!quant.uniform<u8<1:255>:f32:{0:2, 1:2}, {{1.0:1, 2.0:2, 3.0:3}}>>
}

// -----

func.func @stays_sub_channel(%arg0: tensor<2x4x!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0, 3.0}, {4.0, 5.0}}>>) -> tensor<2x4xf32> {
  %0 = quant.dcast %arg0 : tensor<2x4x!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0, 3.0}, {4.0, 5.0}}>> to tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @casts_pair(%arg0: f32, %arg1: tensor<2x!quant.uniform<i8:f32:{0:2}, {3.0}>>) -> (f32, tensor<2x!quant.uniform<i8:f32:{0:2}, {3.0}>>) {
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8:f32, 1.0>
  %1 = quant.dcast %0 : !quant.uniform<i8:f32, 1.0> to f32
  %2 = quant.dcast %arg1 : tensor<2x!quant.uniform<i8:f32:{0:2}, {3.0}>> to tensor<2xf32>
  %3 = quant.qcast %2 : tensor<2xf32> to tensor<2x!quant.uniform<i8:f32:{0:2}, {3.0}>>
  return %1, %3 : f32, tensor<2x!quant.uniform<i8:f32:{0:2}, {3.0}>>
}
