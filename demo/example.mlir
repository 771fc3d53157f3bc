// A float input quantized to int8, stored as integers, reinterpreted and dequantized.
// `quantir opt --canonicalize` folds the cast pairs away.
func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %0 = quant.qcast %arg0 : tensor<1x4xf32> to tensor<1x4x!quant.uniform<i8:f32, 0.0156862754:-64>>
  %1 = quant.scast %0 : tensor<1x4x!quant.uniform<i8:f32, 0.0156862754:-64>> to tensor<1x4xi8>
  %2 = quant.scast %1 : tensor<1x4xi8> to tensor<1x4x!quant.uniform<i8:f32, 0.0156862754:-64>>
  %3 = quant.dcast %2 : tensor<1x4x!quant.uniform<i8:f32, 0.0156862754:-64>> to tensor<1x4xf32>
  %w = arith.constant dense<[[1, -2], [3, -127]]> : tensor<2x2xi8>
  %4 = quant.scast %w : tensor<2x2xi8> to tensor<2x2x!quant.uniform<i8<-127:127>:f32:0, {0.01, 0.02}>>
  return %3 : tensor<1x4xf32>
}
