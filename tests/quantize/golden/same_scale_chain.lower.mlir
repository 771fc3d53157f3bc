module {
  func.func @main(%arg0: tensor<1x1x4x4xf32> {quantir.name = "x"}) -> (tensor<1x16xf32> {quantir.name = "y"}) {
    %0 = quant.qcast %arg0 : tensor<1x1x4x4xf32> to tensor<1x1x4x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>
    %cst = arith.constant dense<[[[[127]]], [[[-127]]]]> : tensor<2x1x1x1xi8>
    %1 = quant.scast %cst : tensor<2x1x1x1xi8> to tensor<2x1x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0078740157186985015,0.0078740157186985015}>>
    %2 = "qnn.conv"(%0, %1) {activation = "NONE", dilations = array<i64: 1, 1>, group = 1 : i64, multiplier = array<i64: 1236796040, 1236796040>, pads = array<i64: 0, 0, 0, 0>, shift = array<i64: -7, -7>, strides = array<i64: 1, 1>} : (tensor<1x1x4x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>, tensor<2x1x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0078740157186985015,0.0078740157186985015}>>) -> tensor<1x2x4x4x!quant.uniform<i8:f32, 0.013725490309298038:18>>
    %3 = "qnn.max_pool"(%2) {kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4x!quant.uniform<i8:f32, 0.013725490309298038:18>>) -> tensor<1x2x2x2x!quant.uniform<i8:f32, 0.013725490309298038:18>>
    %4 = "nn.reshape"(%3) {shape = array<i64: 1, 8>} : (tensor<1x2x2x2x!quant.uniform<i8:f32, 0.013725490309298038:18>>) -> tensor<1x8x!quant.uniform<i8:f32, 0.013725490309298038:18>>
    %cst_0 = arith.constant dense<127> : tensor<2x1x1x1xi8>
    %5 = quant.scast %cst_0 : tensor<2x1x1x1xi8> to tensor<2x1x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0039370078593492508,0.0019685039296746254}>>
    %6 = "qnn.conv"(%0, %5) {activation = "NONE", dilations = array<i64: 1, 1>, group = 1 : i64, multiplier = array<i64: 1236796040, 1236796040>, pads = array<i64: 0, 0, 0, 0>, shift = array<i64: -8, -9>, strides = array<i64: 2, 2>} : (tensor<1x1x4x4x!quant.uniform<i8:f32, 0.0078431377187371254:-1>>, tensor<2x1x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0039370078593492508,0.0019685039296746254}>>) -> tensor<1x2x2x2x!quant.uniform<i8:f32, 0.013725490309298038:18>>
    %7 = "nn.reshape"(%6) {shape = array<i64: 1, 8>} : (tensor<1x2x2x2x!quant.uniform<i8:f32, 0.013725490309298038:18>>) -> tensor<1x8x!quant.uniform<i8:f32, 0.013725490309298038:18>>
    %8 = "qnn.concat"(%4, %7) {axis = 1 : i64} : (tensor<1x8x!quant.uniform<i8:f32, 0.013725490309298038:18>>, tensor<1x8x!quant.uniform<i8:f32, 0.013725490309298038:18>>) -> tensor<1x16x!quant.uniform<i8:f32, 0.013725490309298038:18>>
    %9 = quant.dcast %8 : tensor<1x16x!quant.uniform<i8:f32, 0.013725490309298038:18>> to tensor<1x16xf32>
    return %9 : tensor<1x16xf32>
  }
}
