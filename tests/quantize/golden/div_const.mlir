// Div by a constant becomes MUL by its float32 reciprocal ([2, 0.25]), an int8 constant with its own
// range [0, 2] (hence the scale 2/255, zero point -128).
// RANGES: %arg0 = [-1.0, 1.0]
// RANGES: %0 = [-2.0, 2.0]
module {
  func.func @main(%arg0: tensor<1x2x2x2xf32> {quantir.name = "x"}) -> (tensor<1x2x2x2xf32> {quantir.name = "y"}) {
    %cst = arith.constant dense<[[[5.000000e-01]], [[4.000000e+00]]]> : tensor<2x1x1xf32>
    %0 = "nn.div"(%arg0, %cst) : (tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) -> tensor<1x2x2x2xf32>
    return %0 : tensor<1x2x2x2xf32>
  }
}
