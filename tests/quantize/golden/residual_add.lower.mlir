module {
  func.func @main(%arg0: tensor<1x2x2x2xf32> {quantir.name = "x"}) -> (tensor<1x2x2x2xf32> {quantir.name = "y"}) {
    %0 = quant.qcast %arg0 : tensor<1x2x2x2xf32> to tensor<1x2x2x2x!quant.uniform<i8:f32, 0.015686275437474251:-1>>
    %cst = arith.constant dense<[[[[64]], [[-127]]], [[[64]], [[127]]]]> : tensor<2x2x1x1xi8>
    %1 = quant.scast %cst : tensor<2x2x1x1xi8> to tensor<2x2x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0039370078593492508,0.0019685039296746254}>>
    %2 = "qnn.conv"(%0, %1) {activation = "NONE", dilations = array<i64: 1, 1>, group = 1 : i64, multiplier = array<i64: 1442928697, 1442928697>, pads = array<i64: 0, 0, 0, 0>, shift = array<i64: -6, -7>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2x!quant.uniform<i8:f32, 0.015686275437474251:-1>>, tensor<2x2x1x1x!quant.uniform<i8<-127:127>:f32:0, {0.0039370078593492508,0.0019685039296746254}>>) -> tensor<1x2x2x2x!quant.uniform<i8:f32, 0.0058823530562222004:-1>>
    %3 = "qnn.add"(%2, %0) {activation = "NONE"} : (tensor<1x2x2x2x!quant.uniform<i8:f32, 0.0058823530562222004:-1>>, tensor<1x2x2x2x!quant.uniform<i8:f32, 0.015686275437474251:-1>>) -> tensor<1x2x2x2x!quant.uniform<i8:f32, 0.019607843831181526:-1>>
    %4 = quant.dcast %3 : tensor<1x2x2x2x!quant.uniform<i8:f32, 0.019607843831181526:-1>> to tensor<1x2x2x2xf32>
    return %4 : tensor<1x2x2x2xf32>
  }
}
