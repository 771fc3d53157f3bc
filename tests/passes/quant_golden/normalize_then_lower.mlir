// FLAGS: --split-input-file --normalize-quant-types --lower-quant-ops
// A one-scale sub-channel type becomes per-tensor and is then lowered (mlir-opt 22.1.8 wrote
// normalize_then_lower.expected).

func.func @sub_channel_one_scale(%arg0: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %0 = quant.qcast %arg0 : tensor<4x?xf32> to tensor<4x?x!quant.uniform<i8:f32:{0:4}, {{0.75:3}}>>
  %1 = quant.dcast %0 : tensor<4x?x!quant.uniform<i8:f32:{0:4}, {{0.75:3}}>> to tensor<4x?xf32>
  return %1 : tensor<4x?xf32>
}
