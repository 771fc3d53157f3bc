// MAX_POOL, RESHAPE and CONCATENATION keep their input's parameters, so the two convs' outputs, the pool,
// both reshapes and the concat form one same-scale class: every member gets the union of their ranges
// ([-2, 1] from the first conv, [0, 1.5] from the concat), and no op between them requantizes.
// RANGES: %arg0 = [-1.0, 1.0]
// RANGES: %0 = [-2.0, 1.0]
// RANGES: %1 = [-1.0, 0.5]
// RANGES: %2 = [-1.0, 0.5]
// RANGES: %3 = [-0.5, 0.5]
// RANGES: %4 = [-0.5, 0.5]
// RANGES: %5 = [0.0, 1.5]
module {
  func.func @main(%arg0: tensor<1x1x4x4xf32> {quantir.name = "x"}) -> (tensor<1x16xf32> {quantir.name = "y"}) {
    %cst = arith.constant dense<[[[[1.000000e+00]]], [[[-1.000000e+00]]]]> : tensor<2x1x1x1xf32>
    %cst_0 = arith.constant dense<[[[[5.000000e-01]]], [[[2.500000e-01]]]]> : tensor<2x1x1x1xf32>
    %0 = "nn.conv"(%arg0, %cst) : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
    %1 = "nn.max_pool"(%0) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
    %2 = "nn.reshape"(%1) {shape = array<i64: 1, 8>} : (tensor<1x2x2x2xf32>) -> tensor<1x8xf32>
    %3 = "nn.conv"(%arg0, %cst_0) {strides = array<i64: 2, 2>} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32>
    %4 = "nn.reshape"(%3) {shape = array<i64: 1, 8>} : (tensor<1x2x2x2xf32>) -> tensor<1x8xf32>
    %5 = "nn.concat"(%2, %4) {axis = 1 : i64} : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x16xf32>
    return %5 : tensor<1x16xf32>
  }
}
