// RUN: quantir opt %s --split-input-file --verify-diagnostics
// ORACLE: none
// The instrumentation ops' verifiers (TensorFlow's fork of the quant dialect).

func.func @stats_scalar(%arg0: f32) {
  // expected-error @+1 {{'quant.stats' op arg needs to be tensor type.}}
  %0 = "quant.stats"(%arg0) {layerStats = dense<[-1.0, 1.0]> : tensor<2xf32>} : (f32) -> f32
  return
}

// -----

func.func @stats_layer_not_float(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.stats' op layerStats must have a floating point element type}}
  %0 = "quant.stats"(%arg0) {layerStats = dense<[-1, 1]> : tensor<2xi32>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @stats_layer_shape(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.stats' op layerStats must have shape [2]}}
  %0 = "quant.stats"(%arg0) {layerStats = dense<[-1.0, 0.0, 1.0]> : tensor<3xf32>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @stats_axis_missing(%arg0: tensor<3x2xf32>) {
  // expected-error @+1 {{'quant.stats' op axis must be specified for axisStats}}
  %0 = "quant.stats"(%arg0) {layerStats = dense<[-1.0, 1.0]> : tensor<2xf32>, axisStats = dense<1.0> : tensor<2x2xf32>} : (tensor<3x2xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @stats_axis_not_float(%arg0: tensor<3x2xf32>) {
  // expected-error @+1 {{'quant.stats' op axisStats must have a floating point element type}}
  %0 = "quant.stats"(%arg0) {layerStats = dense<[-1.0, 1.0]> : tensor<2xf32>, axisStats = dense<1> : tensor<2x2xi8>, axis = 1} : (tensor<3x2xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @stats_axis_shape(%arg0: tensor<3x2xf32>) {
  // expected-error @+1 {{'quant.stats' op axisStats must have shape [N,2] where N = the slice size defined by the axis dim}}
  %0 = "quant.stats"(%arg0) {layerStats = dense<[-1.0, 1.0]> : tensor<2xf32>, axisStats = dense<1.0> : tensor<3x2xf32>, axis = 1} : (tensor<3x2xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @stats_required(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.stats' op requires attribute 'layerStats'}}
  %0 = "quant.stats"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @stats_ref_types(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.stats_ref' op requires the same type for all operands and results}}
  %0 = "quant.stats_ref"(%arg0) {statsKey = "k"} : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @coupled_ref_integer(%arg0: tensor<4xi8>) {
  // expected-error @+1 {{'quant.coupled_ref' op operand #0 must be real valued primitive (float or quantized type), but got 'tensor<4xi8>'}}
  %0 = "quant.coupled_ref"(%arg0) {coupledKey = "k"} : (tensor<4xi8>) -> tensor<4xi8>
  return
}

// -----

func.func @fake_quant_f16(%arg0: tensor<4xf16>) {
  // expected-error @+1 {{'quant.const_fake_quant' op operand #0 must be tensor of 32-bit float values, but got 'tensor<4xf16>'}}
  %0 = "quant.const_fake_quant"(%arg0) {min = -1.0 : f32, max = 1.0 : f32} : (tensor<4xf16>) -> tensor<4xf16>
  return
}

// -----

func.func @fake_quant_attr_kind(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.const_fake_quant' op attribute 'min' failed to satisfy constraint: 32-bit float attribute}}
  %0 = "quant.const_fake_quant"(%arg0) {min = "low", max = 1.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @fake_quant_bits(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'quant.const_fake_quant' op num_bits must be in [2, 16], got 1}}
  %0 = "quant.const_fake_quant"(%arg0) {min = -1.0 : f32, max = 1.0 : f32, num_bits = 1} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @fake_quant_per_axis_count(%arg0: tensor<3x2xf32>) {
  // expected-error @+1 {{'quant.const_fake_quant_per_axis' op expected 2 min/max values along axis 1, got 3}}
  %0 = "quant.const_fake_quant_per_axis"(%arg0) {min = [-1.0 : f32, -1.0 : f32, -1.0 : f32], max = [1.0 : f32, 1.0 : f32, 1.0 : f32], axis = 1} : (tensor<3x2xf32>) -> tensor<3x2xf32>
  return
}
