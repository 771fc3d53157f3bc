module {
  func.func @main(%arg0: tensor<1x4xf32> {quantir.name = "x"}) -> (tensor<1x3xf32> {quantir.name = "p"}, tensor<1x3xf32> {quantir.name = "s"}) {
    %0 = quant.qcast %arg0 : tensor<1x4xf32> to tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>
    %cst = arith.constant dense<[[127, -64, 32, 0], [0, 64, -127, 95], [-32, 32, 64, 127]]> : tensor<3x4xi8>
    %1 = quant.scast %cst : tensor<3x4xi8> to tensor<3x4x!quant.uniform<i8<-127:127>:f32:0, {0.0078740157186985015,0.0078740157186985015,0.0078740157186985015}>>
    %cst_0 = arith.constant dense<[0, 8096, -8096]> : tensor<3xi32>
    %2 = quant.scast %cst_0 : tensor<3xi32> to tensor<3x!quant.uniform<i32:f32:0, {6.1756989452987909E-5,6.1756989452987909E-5,6.1756989452987909E-5}>>
    %3 = "qnn.fully_connected"(%0, %1, %2) {activation = "NONE", multiplier = array<i64: 1082196480, 1082196480, 1082196480>, shift = array<i64: -7, -7, -7>} : (tensor<1x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>, tensor<3x4x!quant.uniform<i8<-127:127>:f32:0, {0.0078740157186985015,0.0078740157186985015,0.0078740157186985015}>>, tensor<3x!quant.uniform<i32:f32:0, {6.1756989452987909E-5,6.1756989452987909E-5,6.1756989452987909E-5}>>) -> tensor<1x3x!quant.uniform<i8:f32, 0.015686275437474251:-1>>
    %4 = "qnn.softmax"(%3) : (tensor<1x3x!quant.uniform<i8:f32, 0.015686275437474251:-1>>) -> tensor<1x3x!quant.uniform<i8:f32, 3.906250e-03:-128>>
    %5 = "qnn.logistic"(%3) : (tensor<1x3x!quant.uniform<i8:f32, 0.015686275437474251:-1>>) -> tensor<1x3x!quant.uniform<i8:f32, 3.906250e-03:-128>>
    %6 = quant.dcast %4 : tensor<1x3x!quant.uniform<i8:f32, 3.906250e-03:-128>> to tensor<1x3xf32>
    %7 = quant.dcast %5 : tensor<1x3x!quant.uniform<i8:f32, 3.906250e-03:-128>> to tensor<1x3xf32>
    return %6, %7 : tensor<1x3xf32>, tensor<1x3xf32>
  }
}
