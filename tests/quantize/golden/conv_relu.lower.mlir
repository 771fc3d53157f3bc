module {
  func.func @main(%arg0: tensor<1x1x4x4xf32> {quantir.name = "x"}) -> (tensor<1x2x4x4xf32> {quantir.name = "y"}) {
    %0 = quant.qcast %arg0 : tensor<1x1x4x4xf32> to tensor<1x1x4x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>
    %cst = arith.constant dense<[[[[64, -32, 0], [32, 127, 32], [0, -32, 64]]], [[[-64, 0, 64], [-127, 0, 127], [-64, 0, 64]]]]> : tensor<2x1x3x3xi8>
    %1 = quant.scast %cst : tensor<2x1x3x3xi8> to tensor<2x1x3x3x!quant.uniform<i8<-127:127>:f32:0, {0.0078740157186985015,0.0078740157186985015}>>
    %cst_0 = arith.constant dense<[2024, -4048]> : tensor<2xi32>
    %2 = quant.scast %cst_0 : tensor<2xi32> to tensor<2x!quant.uniform<i32:f32:0, {6.1756989452987909E-5,6.1756989452987909E-5}>>
    %3 = "qnn.conv"(%0, %1, %2) {activation = "RELU", dilations = array<i64: 1, 1>, group = 1 : i64, multiplier = array<i64: 1731514409, 1731514409>, pads = array<i64: 1, 1, 1, 1>, shift = array<i64: -7, -7>, strides = array<i64: 1, 1>} : (tensor<1x1x4x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>, tensor<2x1x3x3x!quant.uniform<i8<-127:127>:f32:0, {0.0078740157186985015,0.0078740157186985015}>>, tensor<2x!quant.uniform<i32:f32:0, {6.1756989452987909E-5,6.1756989452987909E-5}>>) -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.0098039219155907631:-128>>
    %cst_1 = arith.constant dense<[[[[127]]], [[[-127]]]]> : tensor<2x1x1x1xi8>
    %4 = quant.scast %cst_1 : tensor<2x1x1x1xi8> to tensor<2x1x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.011811023578047752,0.0059055117890238762}>>
    %5 = "qnn.conv"(%3, %4) {activation = "RELU6", dilations = array<i64: 1, 1>, group = 2 : i64, multiplier = array<i64: 1082196514, 1082196514>, pads = array<i64: 0, 0, 0, 0>, shift = array<i64: -6, -7>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4x!quant.uniform<i8:f32, 0.0098039219155907631:-128>>, tensor<2x1x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.011811023578047752,0.0059055117890238762}>>) -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.014705882407724857:-128>>
    %6 = quant.dcast %5 : tensor<1x2x4x4x!quant.uniform<i8:f32, 0.014705882407724857:-128>> to tensor<1x2x4x4xf32>
    return %6 : tensor<1x2x4x4xf32>
  }
}
