// RUN: quantir opt %s --split-input-file
// Valid quant.qcast / quant.dcast / quant.scast (docs/mlir-quant-spec.md §8), printed back in
// their custom form whatever form they were written in.

// CHECK-LABEL: func.func @per_layer_scalar
// CHECK-SAME: (%[[X:.*]]: f32) -> f32
// CHECK-NEXT: %[[Q:.*]] = quant.qcast %[[X]] : f32 to !quant.uniform<i8:f32, 5.000000e-02:-3>
// CHECK-NEXT: %[[D:.*]] = quant.dcast %[[Q]] : !quant.uniform<i8:f32, 5.000000e-02:-3> to f32
// CHECK-NEXT: return %[[D]] : f32
func.func @per_layer_scalar(%x: f32) -> f32 {
  %q = quant.qcast %x : f32 to !quant.uniform<i8:f32, 0.05:-3>
  %d = quant.dcast %q : !quant.uniform<i8:f32, 0.05:-3> to f32
  return %d : f32
}

// -----

// CHECK-LABEL: func.func @tensors
// CHECK: quant.qcast %arg0 : tensor<2x3xf32> to tensor<2x3x!quant.uniform<u8:f32, 1.000000e-01:128>>
// CHECK: quant.qcast %arg1 : tensor<?x3xf16> to tensor<?x3x!quant.uniform<i8<-127:127>:f16, 2.500000e-01>>
// CHECK: quant.dcast %arg2 : tensor<*x!quant.uniform<i16:f32, 1.000000e+00>> to tensor<*xf32>
// CHECK: quant.qcast %arg3 : tensor<f32> to tensor<!quant.uniform<i8:f32, 2.000000e+00>>
func.func @tensors(%a: tensor<2x3xf32>, %b: tensor<?x3xf16>, %c: tensor<*x!quant.uniform<i16:f32, 1.0>>, %d: tensor<f32>) {
  %0 = quant.qcast %a : tensor<2x3xf32> to tensor<2x3x!quant.uniform<u8:f32, 0.1:128>>
  %1 = quant.qcast %b : tensor<?x3xf16> to tensor<?x3x!quant.uniform<i8<-127:127>:f16, 0.25>>
  %2 = quant.dcast %c : tensor<*x!quant.uniform<i16:f32, 1.0>> to tensor<*xf32>
  %3 = quant.qcast %d : tensor<f32> to tensor<!quant.uniform<i8:f32, 2.0>>
  return
}

// -----

// The generic form parses and prints back in the custom form, attributes kept.
// CHECK-LABEL: func.func @generic_input
// CHECK-NEXT: %[[Q:.*]] = quant.qcast %arg0 {tag = "in"} : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-NEXT: %[[S:.*]] = quant.scast %[[Q]] : tensor<4x!quant.uniform<i8:f32, 5.000000e-01>> to tensor<4xi8>
// CHECK-NEXT: %[[B:.*]] = quant.scast %[[S]] : tensor<4xi8> to tensor<4x!quant.uniform<i8:f32, 5.000000e-01>>
// CHECK-NEXT: %[[D:.*]] = quant.dcast %[[B]] : tensor<4x!quant.uniform<i8:f32, 5.000000e-01>> to tensor<4xf32>
// CHECK-NEXT: return %[[D]]
func.func @generic_input(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "quant.qcast"(%arg0) {tag = "in"} : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.5>>
  %1 = "quant.scast"(%0) : (tensor<4x!quant.uniform<i8:f32, 0.5>>) -> tensor<4xi8>
  %2 = "quant.scast"(%1) : (tensor<4xi8>) -> tensor<4x!quant.uniform<i8:f32, 0.5>>
  %3 = "quant.dcast"(%2) : (tensor<4x!quant.uniform<i8:f32, 0.5>>) -> tensor<4xf32>
  "func.return"(%3) : (tensor<4xf32>) -> ()
}

// -----

// u8 storage is the signless i8 for scast; per-axis with a static, a dynamic or an unranked
// container, and sub-channel types.
// CHECK-LABEL: func.func @containers
// CHECK: quant.scast %arg0 : tensor<4x!quant.uniform<u8:f32, 1.000000e+00>> to tensor<4xi8>
// CHECK: quant.dcast %arg1 : tensor<2x3x!quant.uniform<i8:f32:1, {1.000000e+00,2.000000e+00:1,3.000000e+00:-1}>> to tensor<2x3xf32>
// CHECK: quant.dcast %arg2 : tensor<2x?x!quant.uniform<i8:f32:1, {1.000000e+00,2.000000e+00}>> to tensor<2x?xf32>
// CHECK: quant.dcast %arg3 : tensor<*x!quant.uniform<i8:f32:3, {1.000000e+00,2.000000e+00}>> to tensor<*xf32>
// CHECK: quant.scast %arg4 : tensor<4x6x!quant.uniform<i8:f32:{0:2, 1:3}, {{\{\{}}1.000000e+00, 2.000000e+00}, {3.000000e+00:1, 4.000000e+00}}>> to tensor<4x6xi8>
func.func @containers(%a: tensor<4x!quant.uniform<u8:f32, 1.0>>,
                      %b: tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0:1, 3.0:-1}>>,
                      %c: tensor<2x?x!quant.uniform<i8:f32:1, {1.0, 2.0}>>,
                      %d: tensor<*x!quant.uniform<i8:f32:3, {1.0, 2.0}>>,
                      %e: tensor<4x6x!quant.uniform<i8:f32:{0:2, 1:3}, {{1.0, 2.0}, {3.0:1, 4.0}}>>) {
  %0 = quant.scast %a : tensor<4x!quant.uniform<u8:f32, 1.0>> to tensor<4xi8>
  %1 = quant.dcast %b : tensor<2x3x!quant.uniform<i8:f32:1, {1.0, 2.0:1, 3.0:-1}>> to tensor<2x3xf32>
  %2 = quant.dcast %c : tensor<2x?x!quant.uniform<i8:f32:1, {1.0, 2.0}>> to tensor<2x?xf32>
  %3 = quant.dcast %d : tensor<*x!quant.uniform<i8:f32:3, {1.0, 2.0}>> to tensor<*xf32>
  %4 = quant.scast %e : tensor<4x6x!quant.uniform<i8:f32:{0:2, 1:3}, {{1.0, 2.0}, {3.0:1, 4.0}}>> to tensor<4x6xi8>
  return
}

// -----

// !quant.any with an expressed type and !quant.calibrated are quantized types too; the
// storage-range and zero-point spellings print canonically.
// CHECK-LABEL: func.func @other_quant_types
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.any<i8:f32>>
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.calibrated<f32<-1.000000e+00:1.000000e+00>>>
// CHECK: quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 5.000000e-01:200>>
func.func @other_quant_types(%x: tensor<4xf32>) {
  %0 = quant.qcast %x : tensor<4xf32> to tensor<4x!quant.any<i8:f32>>
  %1 = quant.qcast %x : tensor<4xf32> to tensor<4x!quant<calibrated<f32<-1.0:1.0>>>>
  %2 = quant.qcast %x : tensor<4xf32> to tensor<4x!quant.uniform<i8<-128:127>:f32, 0.5:200>>
  return
}
