// A residual ADD whose operands have different ranges: the conv's output [-0.75, 0.75] and the input
// [-2, 2]. LiteRT's ADD rescales each operand itself, so both keep their own parameters: no requantize.
// RANGES: %arg0 = [-2.0, 2.0]
// RANGES: %0 = [-0.75, 0.75]
// RANGES: %1 = [-2.5, 2.5]
module {
  func.func @main(%arg0: tensor<1x2x2x2xf32> {quantir.name = "x"}) -> (tensor<1x2x2x2xf32> {quantir.name = "y"}) {
    %cst = arith.constant dense<[[[[2.500000e-01]], [[-5.000000e-01]]], [[[1.250000e-01]], [[2.500000e-01]]]]> : tensor<2x2x1x1xf32>
    %0 = "nn.conv"(%arg0, %cst) : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
    %1 = "nn.add"(%0, %arg0) : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    return %1 : tensor<1x2x2x2xf32>
  }
}
