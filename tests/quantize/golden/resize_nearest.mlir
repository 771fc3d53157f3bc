// Resize nearest x2 with asymmetric coordinates and floor (PyTorch's nearest) copies the pixels LiteRT's
// RESIZE_NEAREST_NEIGHBOR copies, so it is quantized, with its input's parameters (same scale).
// With round_prefer_ceil instead, output pixel 1 reads input pixel 1 (0.5 rounds up) where every LiteRT
// mode reads pixel 0: that Resize stays float, and its reason names the first index that differs.
// RANGES: %arg0 = [-1.0, 3.0]
// RANGES: %0 = [-1.0, 3.0]
module {
  func.func @main(%arg0: tensor<1x1x2x2xf32> {quantir.name = "x"}) -> (tensor<1x1x4x4xf32> {quantir.name = "up"}, tensor<1x1x4x4xf32> {quantir.name = "odd"}) {
    %0 = "nn.resize"(%arg0) {coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "floor", scales = array<f32: 1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32>
    %1 = "nn.resize"(%arg0) {coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "round_prefer_ceil", scales = array<f32: 1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00>} : (tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32>
    return %0, %1 : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
  }
}
