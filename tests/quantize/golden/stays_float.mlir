// Ops that stay float, each with its reason: a Neg (no pattern) before the conv, and a softmax over the
// channel axis (LiteRT's SOFTMAX is over the last axis). The conv gets a qcast of the float Neg output
// (whose range comes from the data: the negated input, [-1, 2]) and a dcast feeds the float softmax.
// RANGES: %arg0 = [-2.0, 1.0]
// RANGES: %2 = [0.0, 2.0]
module {
  func.func @main(%arg0: tensor<1x2x2x2xf32> {quantir.name = "x"}) -> (tensor<1x2x2x2xf32> {quantir.name = "y"}) {
    %cst = arith.constant dense<[[[[5.000000e-01]], [[-5.000000e-01]]], [[[1.000000e+00]], [[2.500000e-01]]]]> : tensor<2x2x1x1xf32>
    %0 = "nn.neg"(%arg0) : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    %1 = "nn.conv"(%0, %cst) : (tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32>
    %2 = "nn.relu"(%1) : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    %3 = "nn.softmax"(%2) {axis = 1 : i64} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    return %3 : tensor<1x2x2x2xf32>
  }
}
