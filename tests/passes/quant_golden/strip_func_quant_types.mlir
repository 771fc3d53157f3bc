// FLAGS: --split-input-file --strip-func-quant-types
// Function signatures in storage integers (mlir-opt 22.1.8 wrote strip_func_quant_types.expected).

func.func @only_returned(%arg0: !quant.uniform<i8:f32, 2.0:10>, %arg1: f32, %arg2: tensor<4x!quant.uniform<u8:f32:0, {1.0, 2.0, 3.0, 4.0}>>) -> (!quant.uniform<i8:f32, 2.0:10>, tensor<4x!quant.uniform<u8:f32:0, {1.0, 2.0, 3.0, 4.0}>>) {
  return %arg0, %arg2 : !quant.uniform<i8:f32, 2.0:10>, tensor<4x!quant.uniform<u8:f32:0, {1.0, 2.0, 3.0, 4.0}>>
}

// -----

func.func private @declaration(!quant.uniform<i8:f32, 2.0:10>, tensor<?x!quant.uniform<i16:f32, 1.0>>) -> tensor<*x!quant.uniform<u4:f32, 1.0>>

// -----

func.func @used_arguments(%arg0: !quant.uniform<i8:f32, 2.0:10>, %arg1: tensor<2x!quant.uniform<u8:f32, 1.0>>) -> (f32, tensor<2xf32>, !quant.uniform<i8:f32, 2.0:10>) {
  %0 = quant.dcast %arg0 : !quant.uniform<i8:f32, 2.0:10> to f32
  %1 = quant.dcast %arg1 : tensor<2x!quant.uniform<u8:f32, 1.0>> to tensor<2xf32>
  %2 = quant.dcast %arg0 : !quant.uniform<i8:f32, 2.0:10> to f32
  return %0, %1, %arg0 : f32, tensor<2xf32>, !quant.uniform<i8:f32, 2.0:10>
}

// -----

func.func @results(%arg0: tensor<3x4xf32>, %arg1: f32) -> (tensor<3x4x!quant.uniform<i8:f32:{0:1, 1:4}, {{2.0:10}, {3.0:20}, {4.0:30}}>>, f32, !quant.uniform<u8<1:254>:f32, 0.5:3>) {
  %0 = quant.qcast %arg0 : tensor<3x4xf32> to tensor<3x4x!quant.uniform<i8:f32:{0:1, 1:4}, {{2.0:10}, {3.0:20}, {4.0:30}}>>
  %1 = quant.qcast %arg1 : f32 to !quant.uniform<u8<1:254>:f32, 0.5:3>
  return %0, %arg1, %1 : tensor<3x4x!quant.uniform<i8:f32:{0:1, 1:4}, {{2.0:10}, {3.0:20}, {4.0:30}}>>, f32, !quant.uniform<u8<1:254>:f32, 0.5:3>
}

// -----

func.func @no_quant_types(%arg0: tensor<2xi8>) -> tensor<2xi8> {
  return %arg0 : tensor<2xi8>
}

// -----

func.func @returned_twice(%arg0: f32) -> (!quant.uniform<i8:f32, 1.0>, f32, !quant.uniform<i8:f32, 1.0>) {
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8:f32, 1.0>
  %1 = quant.dcast %0 : !quant.uniform<i8:f32, 1.0> to f32
  return %0, %1, %0 : !quant.uniform<i8:f32, 1.0>, f32, !quant.uniform<i8:f32, 1.0>
}

// -----

func.func @folds_everywhere(%arg0: f32) -> (f32, !quant.uniform<i8:f32, 1.0>) {
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8:f32, 1.0>
  %1 = quant.dcast %0 : !quant.uniform<i8:f32, 1.0> to f32
  %2 = "test.add"(%1, %1) : (f32, f32) -> f32
  return %2, %0 : f32, !quant.uniform<i8:f32, 1.0>
}
func.func @no_quant_signature(%arg0: f32) -> f32 {
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8:f32, 1.0>
  %1 = quant.dcast %0 : !quant.uniform<i8:f32, 1.0> to f32
  return %1 : f32
}
func.func @qcast_of_dcast(%arg0: !quant.uniform<i8:f32, 1.0>) -> !quant.uniform<i8:f32, 1.0> {
  %1 = quant.dcast %arg0 : !quant.uniform<i8:f32, 1.0> to f32
  %0 = quant.qcast %1 : f32 to !quant.uniform<i8:f32, 1.0>
  return %0 : !quant.uniform<i8:f32, 1.0>
}
func.func @scast_pair(%arg0: tensor<2xi8>) -> tensor<2xi8> {
  %0 = quant.scast %arg0 : tensor<2xi8> to tensor<2x!quant.uniform<i8:f32, 1.0>>
  %1 = quant.scast %0 : tensor<2x!quant.uniform<i8:f32, 1.0>> to tensor<2xi8>
  return %1 : tensor<2xi8>
}
