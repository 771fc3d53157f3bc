module {
  func.func @main(%arg0: tensor<1x4xf32> {quantir.name = "x"}) -> (tensor<1x8xf32> {quantir.name = "y"}) {
    %0 = quant.qcast %arg0 : tensor<1x4xf32> to tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>
    %1 = "qnn.softmax"(%0) : (tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>) -> tensor<1x4x!quant.uniform<i8:f32, 3.906250e-03:-128>>
    %2 = "qnn.tanh"(%0) : (tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>) -> tensor<1x4x!quant.uniform<i8:f32, 7.812500e-03>>
    %3 = "qnn.requantize"(%1) {multiplier = array<i64: 2139094913>, shift = array<i64: -1>} : (tensor<1x4x!quant.uniform<i8:f32, 3.906250e-03:-128>>) -> tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>
    %4 = "qnn.requantize"(%2) {multiplier = array<i64: 2139094913>, shift = array<i64: 0>} : (tensor<1x4x!quant.uniform<i8:f32, 7.812500e-03>>) -> tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>
    %5 = "qnn.concat"(%3, %4) {axis = 1 : i64} : (tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>, tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>) -> tensor<1x8x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>
    %6 = quant.dcast %5 : tensor<1x8x!quant.uniform<i8:f32, 0.0078431377187371254:-1>> to tensor<1x8xf32>
    return %6 : tensor<1x8xf32>
  }
}
