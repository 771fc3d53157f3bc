// RUN: quantir opt %s
// ORACLE: none
// The quant instrumentation ops of the original design (removed upstream; TensorFlow's fork
// keeps them) in MLIR's generic form.

// CHECK-LABEL: func.func @instrumentation
// CHECK-SAME: (%arg0: tensor<4xf32>, %arg1: tensor<3x2xf32>)
// CHECK-NEXT: %0 = "quant.const_fake_quant"(%arg0) {max = 1.000000e+00 : f32, min = -1.000000e+00 : f32, num_bits = 8 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %1 = "quant.const_fake_quant_per_axis"(%arg1) {axis = 1 : i64, is_signed = true, max = [1.000000e+00 : f32, 2.000000e+00 : f32], min = [-1.000000e+00 : f32, -2.000000e+00 : f32], narrow_range = true, num_bits = 8 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %2 = "quant.stats_ref"(%0) {statsKey = "conv1"} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %3 = "quant.stats"(%2) {layerStats = dense<[-1.000000e+00, 1.000000e+00]> : tensor<2xf32>} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %4 = "quant.stats"(%1) {axis = 1 : i64, axisStats = dense<{{\[\[}}-1.000000e+00, 1.000000e+00], [-2.000000e+00, 2.000000e+00]]> : tensor<2x2xf32>, layerStats = dense<[-2.000000e+00, 2.000000e+00]> : tensor<2xf32>} : (tensor<3x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %5 = "quant.coupled_ref"(%3) {coupledKey = "pair"} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %5, %4
func.func @instrumentation(%a: tensor<4xf32>, %b: tensor<3x2xf32>) -> (tensor<4xf32>, tensor<3x2xf32>) {
  %0 = "quant.const_fake_quant"(%a) {min = -1.0 : f32, max = 1.0 : f32, num_bits = 8} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "quant.const_fake_quant_per_axis"(%b) {min = [-1.0 : f32, -2.0 : f32], max = [1.0 : f32, 2.0 : f32], axis = 1, num_bits = 8, narrow_range = true, is_signed = true} : (tensor<3x2xf32>) -> tensor<3x2xf32>
  %2 = "quant.stats_ref"(%0) {statsKey = "conv1"} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "quant.stats"(%2) {layerStats = dense<[-1.0, 1.0]> : tensor<2xf32>} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "quant.stats"(%1) {layerStats = dense<[-2.0, 2.0]> : tensor<2xf32>, axisStats = dense<[[-1.0, 1.0], [-2.0, 2.0]]> : tensor<2x2xf32>, axis = 1} : (tensor<3x2xf32>) -> tensor<3x2xf32>
  %5 = "quant.coupled_ref"(%3) {coupledKey = "pair"} : (tensor<4xf32>) -> tensor<4xf32>
  return %5, %4 : tensor<4xf32>, tensor<3x2xf32>
}

// Stats on quantized values, and instrumentation ops are kept by --canonicalize only when used.
// CHECK-LABEL: func.func @stats_on_quantized
// CHECK-NEXT: "quant.stats"(%arg0) {layerStats = dense<[0.000000e+00, 6.000000e+00]> : tensor<2xf32>} : (tensor<8x!quant.uniform<u8:f32, 2.500000e-02>>) -> tensor<8x!quant.uniform<u8:f32, 2.500000e-02>>
func.func @stats_on_quantized(%q: tensor<8x!quant.uniform<u8:f32, 0.025>>) -> tensor<8x!quant.uniform<u8:f32, 0.025>> {
  %0 = "quant.stats"(%q) {layerStats = dense<[0.0, 6.0]> : tensor<2xf32>} : (tensor<8x!quant.uniform<u8:f32, 0.025>>) -> tensor<8x!quant.uniform<u8:f32, 0.025>>
  return %0 : tensor<8x!quant.uniform<u8:f32, 0.025>>
}
