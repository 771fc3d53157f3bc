// SOFTMAX (1/256, -128) and TANH (1/128, 0) feed one CONCATENATION: each keeps its fixed parameters (the
// concat requantizes its inputs, so fixed outputs stay out of its same-scale class), and the concat's own
// parameters come from its calibrated range; a requantize brings each input to them.
// RANGES: %arg0 = [-1.0, 1.0]
// RANGES: %0 = [0.0, 1.0]
// RANGES: %1 = [-1.0, 1.0]
// RANGES: %2 = [-1.0, 1.0]
module {
  func.func @main(%arg0: tensor<1x4xf32> {quantir.name = "x"}) -> (tensor<1x8xf32> {quantir.name = "y"}) {
    %0 = "nn.softmax"(%arg0) {axis = -1 : i64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %1 = "nn.tanh"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %2 = "nn.concat"(%0, %1) {axis = 1 : i64} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
    return %2 : tensor<1x8xf32>
  }
}
