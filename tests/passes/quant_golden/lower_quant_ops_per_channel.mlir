// FLAGS: --split-input-file --lower-quant-ops
// Per-axis and sub-channel quant.qcast / quant.dcast into linalg.generic, as upstream MLIR
// (mlir-opt 22.1.8 wrote lower_quant_ops_per_channel.expected from this file).

func.func @qcast_per_axis_unsigned_bounds(%arg0: tensor<2x3xf32>) -> tensor<2x3x!quant.uniform<u8<1:254>:f32:1, {2.0:128, 3.0:0, 4.0:255}>> {
  %0 = quant.qcast %arg0 : tensor<2x3xf32> to tensor<2x3x!quant.uniform<u8<1:254>:f32:1, {2.0:128, 3.0:0, 4.0:255}>>
  return %0 : tensor<2x3x!quant.uniform<u8<1:254>:f32:1, {2.0:128, 3.0:0, 4.0:255}>>
}

// -----

func.func @dcast_per_axis(%arg0: tensor<3x2x!quant.uniform<i8:f32:0, {2.0:10, 3.0:-20, 0.5}>>) -> tensor<3x2xf32> {
  %0 = quant.dcast %arg0 : tensor<3x2x!quant.uniform<i8:f32:0, {2.0:10, 3.0:-20, 0.5}>> to tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @per_axis_dynamic_and_per_tensor(%arg0: tensor<?x3xf32>, %arg1: f32) -> (tensor<?x3x!quant.uniform<i8<-100:100>:f32:1, {2.0, 3.0, 4.0}>>, !quant.uniform<i8:f32, 2.0:10>) {
  %0 = quant.qcast %arg0 : tensor<?x3xf32> to tensor<?x3x!quant.uniform<i8<-100:100>:f32:1, {2.0, 3.0, 4.0}>>
  %1 = quant.qcast %arg1 : f32 to !quant.uniform<i8:f32, 2.0:10>
  return %0, %1 : tensor<?x3x!quant.uniform<i8<-100:100>:f32:1, {2.0, 3.0, 4.0}>>, !quant.uniform<i8:f32, 2.0:10>
}

// -----

func.func @dcast_per_axis_dynamic_channels(%arg0: tensor<?x4x?x!quant.uniform<i16:f16:1, {0.5:1, 0.25:2, 0.125:3, 1.0:4}>>) -> tensor<?x4x?xf16> {
  %0 = quant.dcast %arg0 : tensor<?x4x?x!quant.uniform<i16:f16:1, {0.5:1, 0.25:2, 0.125:3, 1.0:4}>> to tensor<?x4x?xf16>
  return %0 : tensor<?x4x?xf16>
}

// -----

func.func @qcast_sub_channel(%arg0: tensor<4x6x2xf32>) -> tensor<4x6x2x!quant.uniform<i8:f32:{1:3, 0:2}, {{{2.0}, {3.0:1}}, {{4.0:2}, {5.0}}}>> {
  %0 = quant.qcast %arg0 : tensor<4x6x2xf32> to tensor<4x6x2x!quant.uniform<i8:f32:{1:3, 0:2}, {{{2.0}, {3.0:1}}, {{4.0:2}, {5.0}}}>>
  return %0 : tensor<4x6x2x!quant.uniform<i8:f32:{1:3, 0:2}, {{{2.0}, {3.0:1}}, {{4.0:2}, {5.0}}}>>
}

// -----

func.func @dcast_sub_channel_i4(%arg0: tensor<3x4x!quant.uniform<i4:f32:{0:1, 1:2}, {{2.0:1, 3.0:2}, {4.0:3, 5.0:4}, {6.0:5, 7.0:6}}>>) -> tensor<3x4xf32> {
  %0 = quant.dcast %arg0 : tensor<3x4x!quant.uniform<i4:f32:{0:1, 1:2}, {{2.0:1, 3.0:2}, {4.0:3, 5.0:4}, {6.0:5, 7.0:6}}>> to tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @maps_shared_across_functions(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = quant.qcast %arg0 : tensor<2x3xf32> to tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0, 3.0}>>
  %1 = quant.dcast %0 : tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0, 3.0}>> to tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
func.func @second(%arg0: tensor<2x3x!quant.uniform<i8:f32:0, {1.0, 2.0}>>, %arg1: tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0, 3.0}>>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = quant.dcast %arg0 : tensor<2x3x!quant.uniform<i8:f32:0, {1.0, 2.0}>> to tensor<2x3xf32>
  %1 = quant.dcast %arg1 : tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0, 3.0}>> to tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

func.func @dcast_per_axis_unranked(%arg0: tensor<*x!quant.uniform<i8:f32:1, {2.0:10, 3.0:20}>>) -> tensor<*xf32> {
  %0 = quant.dcast %arg0 : tensor<*x!quant.uniform<i8:f32:1, {2.0:10, 3.0:20}>> to tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @qcast_per_axis_unranked_unsigned_bounds(%arg0: tensor<*xf16>) -> tensor<*x!quant.uniform<u8<1:255>:f16:0, {2.0:10, 3.0:20, 0.5}>> {
  %0 = quant.qcast %arg0 : tensor<*xf16> to tensor<*x!quant.uniform<u8<1:255>:f16:0, {2.0:10, 3.0:20, 0.5}>>
  return %0 : tensor<*x!quant.uniform<u8<1:255>:f16:0, {2.0:10, 3.0:20, 0.5}>>
}

// -----

func.func @sub_channel_dynamic_dim(%arg0: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = quant.qcast %arg0 : tensor<?x4xf32> to tensor<?x4x!quant.uniform<u8<0:200>:f32:{1:2}, {{2.0:100, 3.0:50}}>>
  %1 = "test.use"(%0) : (tensor<?x4x!quant.uniform<u8<0:200>:f32:{1:2}, {{2.0:100, 3.0:50}}>>) -> tensor<?x4x!quant.uniform<u8<0:200>:f32:{1:2}, {{2.0:100, 3.0:50}}>>
  %2 = quant.dcast %1 : tensor<?x4x!quant.uniform<u8<0:200>:f32:{1:2}, {{2.0:100, 3.0:50}}>> to tensor<?x4xf32>
  return %2 : tensor<?x4xf32>
}
