// SOFTMAX and LOGISTIC only accept the output parameters scale 1/256, zero point -128: the solver gives
// them those whatever range their callback returns (the declared [0, 0.5] and [0.25, 0.75] change nothing).
// RANGES: %arg0 = [-1.0, 1.0]
// RANGES: %0 = [-2.0, 2.0]
// RANGES: %1 = [0.0, 0.5]
// RANGES: %2 = [0.25, 0.75]
module {
  func.func @main(%arg0: tensor<1x4xf32> {quantir.name = "x"}) -> (tensor<1x3xf32> {quantir.name = "p"}, tensor<1x3xf32> {quantir.name = "s"}) {
    %cst = arith.constant dense<[[1.000000e+00, -5.000000e-01, 2.500000e-01, 0.000000e+00], [0.000000e+00, 5.000000e-01, -1.000000e+00, 7.500000e-01], [-2.500000e-01, 2.500000e-01, 5.000000e-01, 1.000000e+00]]> : tensor<3x4xf32>
    %cst_0 = arith.constant dense<[0.000000e+00, 5.000000e-01, -5.000000e-01]> : tensor<3xf32>
    %0 = "nn.gemm"(%arg0, %cst, %cst_0) {trans_b = 1 : i64} : (tensor<1x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<1x3xf32>
    %1 = "nn.softmax"(%0) {axis = -1 : i64} : (tensor<1x3xf32>) -> tensor<1x3xf32>
    %2 = "nn.sigmoid"(%0) : (tensor<1x3xf32>) -> tensor<1x3xf32>
    return %1, %2 : tensor<1x3xf32>, tensor<1x3xf32>
  }
}
