// RUN: quantir opt %s --split-input-file --verify-diagnostics
// Every verifier rule of quant.qcast / quant.dcast / quant.scast, with MLIR's message
// (docs/mlir-quant-spec.md §8).

func.func @qcast_operand_not_float(%arg0: tensor<4xi8>) {
  // expected-error @+1 {{'quant.qcast' op operand #0 must be scalar or tensor of floating-point, but got 'tensor<4xi8>'}}
  %0 = quant.qcast %arg0 : tensor<4xi8> to tensor<4x!quant.uniform<i8:f32, 1.0>>
  return
}

// -----

func.func @qcast_result_not_quant(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.qcast' op result #0 must be scalar or tensor of quantized type, but got 'tensor<4xf32>'}}
  %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<4xf32>
  return
}

// -----

func.func @dcast_operand_not_quant(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.dcast' op operand #0 must be scalar or tensor of quantized type, but got 'tensor<4xf32>'}}
  %0 = quant.dcast %arg0 : tensor<4xf32> to tensor<4xf32>
  return
}

// -----

func.func @dcast_result_not_float(%arg0: tensor<4x!quant.uniform<i8:f32, 1.0>>) {
  // expected-error @+1 {{'quant.dcast' op result #0 must be scalar or tensor of floating-point, but got 'tensor<4xi8>'}}
  %0 = quant.dcast %arg0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4xi8>
  return
}

// -----

func.func @scast_float_operand(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.scast' op operand #0 must be scalar or tensor of signless integer or quantized type, but got 'tensor<4xf32>'}}
  %0 = quant.scast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 1.0>>
  return
}

// -----

func.func @scast_signed_integer(%arg0: tensor<4x!quant.uniform<i8:f32, 1.0>>) {
  // expected-error @+1 {{'quant.scast' op result #0 must be scalar or tensor of signless integer or quantized type, but got 'tensor<4xsi8>'}}
  %0 = quant.scast %arg0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4xsi8>
  return
}

// -----

func.func @shape_mismatch(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.qcast' op failed to verify that input and result are both scalars or both tensors with matching shape}}
  %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<5x!quant.uniform<i8:f32, 1.0>>
  return
}

// -----

func.func @dynamic_does_not_match_static(%arg0: tensor<?xf32>) {
  // expected-error @+1 {{'quant.qcast' op failed to verify that input and result are both scalars or both tensors with matching shape}}
  %0 = quant.qcast %arg0 : tensor<?xf32> to tensor<4x!quant.uniform<i8:f32, 1.0>>
  return
}

// -----

func.func @scalar_vs_0d_tensor(%arg0: f32) {
  // expected-error @+1 {{'quant.qcast' op failed to verify that input and result are both scalars or both tensors with matching shape}}
  %0 = quant.qcast %arg0 : f32 to tensor<!quant.uniform<i8:f32, 1.0>>
  return
}

// -----

func.func @unranked_vs_ranked(%arg0: tensor<*x!quant.uniform<i8:f32, 1.0>>) {
  // expected-error @+1 {{'quant.dcast' op failed to verify that input and result are both scalars or both tensors with matching shape}}
  %0 = quant.dcast %arg0 : tensor<*x!quant.uniform<i8:f32, 1.0>> to tensor<4xf32>
  return
}

// -----

func.func @scast_both_integer(%arg0: tensor<4xi8>) {
  // expected-error @+1 {{'quant.scast' op failed to verify that input must be integer and result must be quantized, or vice versa}}
  %0 = quant.scast %arg0 : tensor<4xi8> to tensor<4xi8>
  return
}

// -----

func.func @scast_both_quantized(%arg0: tensor<4x!quant.uniform<i8:f32, 1.0>>) {
  // expected-error @+1 {{'quant.scast' op failed to verify that input must be integer and result must be quantized, or vice versa}}
  %0 = quant.scast %arg0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4x!quant.uniform<i8:f32, 2.0>>
  return
}

// -----

func.func @qcast_expressed_mismatch(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{expressed type in quantized type expected to match float type}}
  %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f16, 1.0>>
  return
}

// -----

func.func @dcast_expressed_mismatch(%arg0: !quant.uniform<i8:f32, 1.0>) {
  // expected-error @+1 {{expressed type in quantized type expected to match float type}}
  %0 = quant.dcast %arg0 : !quant.uniform<i8:f32, 1.0> to f64
  return
}

// -----

func.func @any_without_expressed_type(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{expressed type in quantized type expected to match float type}}
  %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.any<i8>>
  return
}

// -----

func.func @scast_storage_mismatch(%arg0: tensor<4x!quant.uniform<i8:f32, 1.0>>) {
  // expected-error @+1 {{storage type in quantized type expected to match integer type}}
  %0 = quant.scast %arg0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4xi16>
  return
}

// -----

func.func @scast_u8_is_not_ui8(%arg0: tensor<4xi16>) {
  // expected-error @+1 {{storage type in quantized type expected to match integer type}}
  %0 = quant.scast %arg0 : tensor<4xi16> to tensor<4x!quant.uniform<u8:f32, 1.0>>
  return
}

// -----

func.func @per_axis_scalar(%arg0: f32) {
  // expected-error @+1 {{scalar types may not use per-axis quantization}}
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8:f32:0, {1.0, 2.0}>
  return
}

// -----

func.func @per_axis_axis_out_of_rank(%arg0: tensor<2x3xf32>) {
  // expected-error @+1 {{quantized dimension must be less than tensor rank}}
  %0 = quant.qcast %arg0 : tensor<2x3xf32> to tensor<2x3x!quant.uniform<i8:f32:2, {1.0, 2.0}>>
  return
}

// -----

func.func @per_axis_0d(%arg0: tensor<f32>) {
  // expected-error @+1 {{quantized dimension must be less than tensor rank}}
  %0 = quant.qcast %arg0 : tensor<f32> to tensor<!quant.uniform<i8:f32:0, {1.0}>>
  return
}

// -----

func.func @per_axis_size_mismatch(%arg0: tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0}>>) {
  // expected-error @+1 {{quantized dimension size does not match number of scales}}
  %0 = quant.dcast %arg0 : tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0}>> to tensor<2x3xf32>
  return
}

// -----

func.func @per_axis_scast(%arg0: tensor<2x3xi8>) {
  // expected-error @+1 {{quantized dimension size does not match number of scales}}
  %0 = quant.scast %arg0 : tensor<2x3xi8> to tensor<2x3x!quant.uniform<i8:f32:0, {1.0, 2.0, 3.0}>>
  return
}

// -----

func.func @sub_channel_scalar(%arg0: f32) {
  // expected-error @+1 {{scalar types may not use sub-channel quantization}}
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8:f32:{0:1}, {{1.0}}>
  return
}

// -----

func.func @sub_channel_unranked(%arg0: tensor<*xf32>) {
  // expected-error @+1 {{tensor containing the sub-channel quantized type must be ranked}}
  %0 = quant.qcast %arg0 : tensor<*xf32> to tensor<*x!quant.uniform<i8:f32:{0:1}, {{1.0}}>>
  return
}

// -----

func.func @sub_channel_dim_out_of_rank(%arg0: tensor<2x4xf32>) {
  // expected-error @+1 {{quantized dimension 2 must be less than tensor rank 2}}
  %0 = quant.qcast %arg0 : tensor<2x4xf32> to tensor<2x4x!quant.uniform<i8:f32:{2:1}, {{1.0}}>>
  return
}

// -----

func.func @sub_channel_not_divisible(%arg0: tensor<2x4xf32>) {
  // expected-error @+1 {{tensor dimension size 4 at axis 1 must be divisible by the corresponding block size 3}}
  %0 = quant.qcast %arg0 : tensor<2x4xf32> to tensor<2x4x!quant.uniform<i8:f32:{1:3}, {{1.0}}>>
  return
}

// -----

func.func @sub_channel_zero_dim(%arg0: tensor<0x4xf32>) {
  // expected-error @+1 {{tensor dimension size of zero is not allowed with sub-channel quantization}}
  %0 = quant.qcast %arg0 : tensor<0x4xf32> to tensor<0x4x!quant.uniform<i8:f32:{1:2}, {{1.0, 2.0}}>>
  return
}

// -----

func.func @sub_channel_scale_rank(%arg0: tensor<2x4xf32>) {
  // expected-error @+1 {{Rank of scales 1 must match the rank of the tensor 2}}
  %0 = quant.qcast %arg0 : tensor<2x4xf32> to tensor<2x4x!quant.uniform<i8:f32:{1:2}, {1.0, 2.0}>>
  return
}

// -----

func.func @sub_channel_scale_dims(%arg0: tensor<2x4xf32>) {
  // expected-error @+1 {{dimension size 2 of scales tensor at axis 1 should match (tensor dimension at axis / block sizes at axis) = 2}}
  %0 = quant.qcast %arg0 : tensor<2x4xf32> to tensor<2x4x!quant.uniform<i8:f32:{1:2}, {{1.0, 2.0, 3.0}}>>
  return
}

// -----

func.func @unknown_quant_op(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{unregistered operation 'quant.foo' found in dialect ('quant') that does not allow unknown operations}}
  %0 = "quant.foo"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @unknown_quant_op_custom(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'quant.foo' is unknown}}
  %0 = quant.foo %arg0 : tensor<4xf32>
  return
}

// -----

func.func @vector_of_quant(%arg0: vector<4xf32>) {
  // expected-error @+1 {{failed to verify 'elementType': VectorElementTypeInterface instance}}
  %0 = quant.qcast %arg0 : vector<4xf32> to vector<4x!quant.uniform<i8:f32, 1.0>>
  return
}

// -----

// expected-error @+1 {{invalid memref element type}}
func.func @memref_of_quant(%arg0: memref<4x!quant.uniform<i8:f32, 1.0>>) {
  return
}
