// A conv, its bias and a Relu become one CONV_2D with a fused RELU; a depthwise conv (group = channels)
// and a Clip(0, 6) become one CONV_2D with RELU6. Weights are per channel, the bias int32.
// RANGES: %arg0 = [-1.0, 1.0]
// RANGES: %1 = [0.0, 2.5]
// RANGES: %3 = [0.0, 3.75]
module {
  func.func @main(%arg0: tensor<1x1x4x4xf32> {quantir.name = "x"}) -> (tensor<1x2x4x4xf32> {quantir.name = "y"}) {
    %cst = arith.constant dense<[[[[5.000000e-01, -2.500000e-01, 0.000000e+00], [2.500000e-01, 1.000000e+00, 2.500000e-01], [0.000000e+00, -2.500000e-01, 5.000000e-01]]], [[[-5.000000e-01, 0.000000e+00, 5.000000e-01], [-1.000000e+00, 0.000000e+00, 1.000000e+00], [-5.000000e-01, 0.000000e+00, 5.000000e-01]]]]> : tensor<2x1x3x3xf32>
    %cst_0 = arith.constant dense<[1.250000e-01, -2.500000e-01]> : tensor<2xf32>
    %cst_1 = arith.constant dense<[[[[1.500000e+00]]], [[[-7.500000e-01]]]]> : tensor<2x1x1x1xf32>
    %0 = "nn.conv"(%arg0, %cst, %cst_0) {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x1x4x4xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
    %1 = "nn.relu"(%0) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %2 = "nn.conv"(%1, %cst_1) {group = 2 : i64} : (tensor<1x2x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
    %3 = "nn.clip"(%2) {max = 6.000000e+00 : f32, min = 0.000000e+00 : f32} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    return %3 : tensor<1x2x4x4xf32>
  }
}
