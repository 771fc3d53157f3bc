// RUN: quantir opt %s --split-input-file --convert-fake-quant --verify-diagnostics
// ORACLE: none
// --convert-fake-quant (docs/mlir-quant-spec.md §8.2): each fake-quant op becomes a qcast/dcast
// pair whose type holds the grid TensorFlow's FakeQuantWithMinMaxArgs simulates: scale
// (max - min) / (qmax - qmin) as float32, zero point nudged so that 0 is on the grid, num_bits kept.

// [-1, 1] at 8 bits: the zero point 127.5 rounds to 128. Signed storage is the same grid shifted
// by 128 (zero point 0; the MLIR fork rounds -0.5 on the signed grid to -1, a different grid).
// CHECK-LABEL: func.func @per_tensor_signed_unsigned
// CHECK-NEXT: %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<u8:f32, 0.0078431377187371254:128>>
// CHECK-NEXT: %1 = quant.dcast %0 : tensor<4x!quant.uniform<u8:f32, 0.0078431377187371254:128>> to tensor<4xf32>
// CHECK-NEXT: %2 = quant.qcast %1 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.0078431377187371254>>
// CHECK-NEXT: %3 = quant.dcast %2 : tensor<4x!quant.uniform<i8:f32, 0.0078431377187371254>> to tensor<4xf32>
// CHECK-NEXT: return %3 : tensor<4xf32>
func.func @per_tensor_signed_unsigned(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "quant.const_fake_quant"(%arg0) {min = -1.0 : f32, max = 1.0 : f32, num_bits = 8} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "quant.const_fake_quant"(%0) {min = -1.0 : f32, max = 1.0 : f32, num_bits = 8, is_signed = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Narrow range: 254 steps (scale 1/127), the storage minimum raised by one; num_bits defaults to 8.
// CHECK-LABEL: func.func @narrow_range
// CHECK-NEXT: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8<-127:127>:f32, 0.0078740157186985015>>
// CHECK-NEXT: quant.dcast %0 : tensor<4x!quant.uniform<i8<-127:127>:f32, 0.0078740157186985015>> to tensor<4xf32>
// CHECK-NEXT: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<u8<1:255>:f32, 0.0078740157186985015:128>>
func.func @narrow_range(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "quant.const_fake_quant"(%arg0) {min = -1.0 : f32, max = 1.0 : f32, narrow_range = true, is_signed = true} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "quant.const_fake_quant"(%arg0) {min = -1.0 : f32, max = 1.0 : f32, narrow_range = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// num_bits 4, 6 and 16 keep their width: [-1, 2] on 15 steps (zero point 5), [0, 6.3] on 63, [-4, 4]
// on 65535 (signed: zero point 32768 - 32768 = 0).
// CHECK-LABEL: func.func @bit_widths
// CHECK-NEXT: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<u4:f32, 0.20000000298023224:5>>
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i4:f32, 0.20000000298023224:-3>>
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<u6:f32, 0.10000000149011612>>
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i16:f32, 1.2207217514514923E-4>>
func.func @bit_widths(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "quant.const_fake_quant"(%arg0) {min = -1.0 : f32, max = 2.0 : f32, num_bits = 4} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "quant.const_fake_quant"(%arg0) {min = -1.0 : f32, max = 2.0 : f32, num_bits = 4, is_signed = true} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "quant.const_fake_quant"(%arg0) {min = 0.0 : f32, max = 6.3 : f32, num_bits = 6} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "quant.const_fake_quant"(%arg0) {min = -4.0 : f32, max = 4.0 : f32, num_bits = 16, is_signed = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A range that does not contain 0 is moved to touch it, its width kept: [0.5, 2] -> [0, 1.5]
// (zero point qmin), [-3, -1] -> [-2, 0] (zero point qmax).
// CHECK-LABEL: func.func @range_without_zero
// CHECK-NEXT: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<u8:f32, 0.0058823530562222004>>
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<u8:f32, 0.0078431377187371254:255>>
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.0078431377187371254:127>>
func.func @range_without_zero(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "quant.const_fake_quant"(%arg0) {min = 0.5 : f32, max = 2.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "quant.const_fake_quant"(%arg0) {min = -3.0 : f32, max = -1.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "quant.const_fake_quant"(%arg0) {min = -3.0 : f32, max = -1.0 : f32, is_signed = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// min == max (the MLIR fork's special case, meant for a tensor of zeros): scale 1.0, zero point qmin.
// CHECK-LABEL: func.func @degenerate
// CHECK-NEXT: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<u8:f32, 1.000000e+00>>
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8<-127:127>:f32, 1.000000e+00:-127>>
func.func @degenerate(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "quant.const_fake_quant"(%arg0) {min = 0.0 : f32, max = 0.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "quant.const_fake_quant"(%arg0) {min = 0.25 : f32, max = 0.25 : f32, narrow_range = true, is_signed = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Per-axis (a conv weight's output channels, as a QAT tool writes them): one scale and zero point
// per channel, each nudged on its own; a channel whose range is one point gets the special case.
// CHECK-LABEL: func.func @per_axis
// CHECK-NEXT: quant.qcast %arg0 : tensor<3x1x1x2xf32> to tensor<3x1x1x2x!quant.uniform<i8<-127:127>:f32:0, {0.0078740157186985015,0.015748031437397003,1.000000e+00:-127}>>
// CHECK-NEXT: quant.dcast %0 : tensor<3x1x1x2x!quant.uniform<i8<-127:127>:f32:0, {0.0078740157186985015,0.015748031437397003,1.000000e+00:-127}>> to tensor<3x1x1x2xf32>
// CHECK-NEXT: quant.qcast %arg0 : tensor<3x1x1x2xf32> to tensor<3x1x1x2x!quant.uniform<u8:f32:3, {0.0039215688593685627,0.0039215688593685627:255}>>
func.func @per_axis(%arg0: tensor<3x1x1x2xf32>) -> (tensor<3x1x1x2xf32>, tensor<3x1x1x2xf32>) {
  %0 = "quant.const_fake_quant_per_axis"(%arg0) {min = [-1.0 : f32, -2.0 : f32, 0.0 : f32], max = [1.0 : f32, 2.0 : f32, 0.0 : f32], axis = 0, num_bits = 8, narrow_range = true, is_signed = true} : (tensor<3x1x1x2xf32>) -> tensor<3x1x1x2xf32>
  %1 = "quant.const_fake_quant_per_axis"(%arg0) {min = [0.0 : f32, -1.0 : f32], max = [1.0 : f32, 0.0 : f32], axis = 3, num_bits = 8} : (tensor<3x1x1x2xf32>) -> tensor<3x1x1x2xf32>
  return %0, %1 : tensor<3x1x1x2xf32>, tensor<3x1x1x2xf32>
}

// -----

// min > max is the verifier's (at parse time): nothing is converted.
func.func @min_above_max(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'quant.const_fake_quant' op illegal min and max: (1.0:-1.0)}}
  %0 = "quant.const_fake_quant"(%arg0) {min = 1.0 : f32, max = -1.0 : f32, num_bits = 8} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Ops other than fake quant are left alone; a function without fake quant is unchanged.
// CHECK-LABEL: func.func @untouched
// CHECK-NEXT: %0 = "quant.stats"(%arg0)
// CHECK-NEXT: return %0
func.func @untouched(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "quant.stats"(%arg0) {layerStats = dense<[-1.0, 1.0]> : tensor<2xf32>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
