module {
  func.func @main(%arg0: tensor<1x1x2x2xf32> {quantir.name = "x"}) -> (tensor<1x1x4x4xf32> {quantir.name = "up"}, tensor<1x1x4x4xf32> {quantir.name = "odd"}) {
    %0 = quant.qcast %arg0 : tensor<1x1x2x2xf32> to tensor<1x1x2x2x!quant.uniform<i8:f32, 0.015686275437474251:-64>>
    %1 = "qnn.resize_nearest"(%0) {align_corners = false, half_pixel_centers = false, sizes = array<i64: 4, 4>} : (tensor<1x1x2x2x!quant.uniform<i8:f32, 0.015686275437474251:-64>>) -> tensor<1x1x4x4x!quant.uniform<i8:f32, 0.015686275437474251:-64>>
    %2 = "nn.resize"(%arg0) {coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "round_prefer_ceil", scales = array<f32: 1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32>
    %3 = quant.dcast %1 : tensor<1x1x4x4x!quant.uniform<i8:f32, 0.015686275437474251:-64>> to tensor<1x1x4x4xf32>
    return %3, %2 : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
  }
}
