module {
  func.func @main(%arg0: tensor<1x2x2x2xf32> {quantir.name = "x"}) -> (tensor<1x2x2x2xf32> {quantir.name = "y"}) {
    %0 = "nn.neg"(%arg0) : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    %1 = quant.qcast %0 : tensor<1x2x2x2xf32> to tensor<1x2x2x2x!quant.uniform<i8:f32, 0.011764706112444401:-43>>
    %cst = arith.constant dense<[[[[127]], [[-127]]], [[[127]], [[32]]]]> : tensor<2x2x1x1xi8>
    %2 = quant.scast %cst : tensor<2x2x1x1xi8> to tensor<2x2x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0039370078593492508,0.0078740157186985015}>>
    %3 = "qnn.conv"(%1, %2) {activation = "RELU", dilations = array<i64: 1, 1>, group = 1 : i64, multiplier = array<i64: 1623294656, 1623294656>, pads = array<i64: 0, 0, 0, 0>, shift = array<i64: -7, -6>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2x!quant.uniform<i8:f32, 0.011764706112444401:-43>>, tensor<2x2x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0039370078593492508,0.0078740157186985015}>>) -> tensor<1x2x2x2x!quant.uniform<i8:f32, 0.0078431377187371254:-128>>
    %4 = quant.dcast %3 : tensor<1x2x2x2x!quant.uniform<i8:f32, 0.0078431377187371254:-128>> to tensor<1x2x2x2xf32>
    %5 = "nn.softmax"(%4) {axis = 1 : i64} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    return %5 : tensor<1x2x2x2xf32>
  }
}
