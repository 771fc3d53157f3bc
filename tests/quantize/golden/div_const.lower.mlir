module {
  func.func @main(%arg0: tensor<1x2x2x2xf32> {quantir.name = "x"}) -> (tensor<1x2x2x2xf32> {quantir.name = "y"}) {
    %cst = arith.constant dense<[[[127]], [[-96]]]> : tensor<2x1x1xi8>
    %0 = quant.scast %cst : tensor<2x1x1xi8> to tensor<2x1x1x!quant.uniform<i8:f32, 0.0078431377187371254:-128>>
    %1 = quant.qcast %arg0 : tensor<1x2x2x2xf32> to tensor<1x2x2x2x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>
    %2 = "qnn.mul"(%1, %0) {activation = "NONE"} : (tensor<1x2x2x2x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>, tensor<2x1x1x!quant.uniform<i8:f32, 0.0078431377187371254:-128>>) -> tensor<1x2x2x2x!quant.uniform<i8:f32, 0.015686275437474251:-1>>
    %3 = quant.dcast %2 : tensor<1x2x2x2x!quant.uniform<i8:f32, 0.015686275437474251:-1>> to tensor<1x2x2x2xf32>
    return %3 : tensor<1x2x2x2xf32>
  }
}
