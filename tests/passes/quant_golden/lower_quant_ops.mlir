// FLAGS: --split-input-file --lower-quant-ops
// Per-tensor quant.qcast / quant.dcast, lowered as upstream MLIR does (mlir-opt 22.1.8 wrote
// lower_quant_ops.expected from this file).

func.func @qcast_scalar(%arg0: f32) -> !quant.uniform<i8:f32, 2.0:10> {
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8:f32, 2.0:10>
  return %0 : !quant.uniform<i8:f32, 2.0:10>
}

// -----

func.func @qcast_scalar_bounds(%arg0: f32) -> !quant.uniform<i8<-5:10>:f32, 2.0> {
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i8<-5:10>:f32, 2.0>
  return %0 : !quant.uniform<i8<-5:10>:f32, 2.0>
}

// -----

func.func @qcast_scalar_unsigned_bounds(%arg0: f32) -> !quant.uniform<u8<2:250>:f32, 2.0:200> {
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<u8<2:250>:f32, 2.0:200>
  return %0 : !quant.uniform<u8<2:250>:f32, 2.0:200>
}

// -----

func.func @qcast_f16_full_range_spelled(%arg0: f16) -> !quant.uniform<i8<-128:127>:f16, 0.25:-3> {
  %0 = quant.qcast %arg0 : f16 to !quant.uniform<i8<-128:127>:f16, 0.25:-3>
  return %0 : !quant.uniform<i8<-128:127>:f16, 0.25:-3>
}

// -----

func.func @qcast_i4(%arg0: f32) -> !quant.uniform<i4:f32, 0.5> {
  %0 = quant.qcast %arg0 : f32 to !quant.uniform<i4:f32, 0.5>
  return %0 : !quant.uniform<i4:f32, 0.5>
}

// -----

func.func @qcast_narrow_symmetric(%arg0: tensor<4xf32>) -> tensor<4x!quant.uniform<i8<-127:127>:f32, 0.0125>> {
  %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8<-127:127>:f32, 0.0125>>
  return %0 : tensor<4x!quant.uniform<i8<-127:127>:f32, 0.0125>>
}

// -----

func.func @qcast_static(%arg0: tensor<3x5xf32>) -> tensor<3x5x!quant.uniform<i8<-100:100>:f32, 2.0:10>> {
  %0 = quant.qcast %arg0 : tensor<3x5xf32> to tensor<3x5x!quant.uniform<i8<-100:100>:f32, 2.0:10>>
  return %0 : tensor<3x5x!quant.uniform<i8<-100:100>:f32, 2.0:10>>
}

// -----

func.func @qcast_static_unsigned_no_zp(%arg0: tensor<3x5xf32>) -> tensor<3x5x!quant.uniform<u8:f32, 2.0>> {
  %0 = quant.qcast %arg0 : tensor<3x5xf32> to tensor<3x5x!quant.uniform<u8:f32, 2.0>>
  return %0 : tensor<3x5x!quant.uniform<u8:f32, 2.0>>
}

// -----

func.func @qcast_zero_rank(%arg0: tensor<f32>) -> tensor<!quant.uniform<i16:f32, 3.0e-4:-7>> {
  %0 = quant.qcast %arg0 : tensor<f32> to tensor<!quant.uniform<i16:f32, 3.0e-4:-7>>
  return %0 : tensor<!quant.uniform<i16:f32, 3.0e-4:-7>>
}

// -----

func.func @qcast_dynamic(%arg0: tensor<?x5xf32>) -> tensor<?x5x!quant.uniform<i8:f32, 2.0:10>> {
  %0 = quant.qcast %arg0 : tensor<?x5xf32> to tensor<?x5x!quant.uniform<i8:f32, 2.0:10>>
  return %0 : tensor<?x5x!quant.uniform<i8:f32, 2.0:10>>
}

// -----

func.func @qcast_dynamic_unsigned_bounds(%arg0: tensor<?x5x?xf32>) -> tensor<?x5x?x!quant.uniform<u16<10:60000>:f32, 0.5:30000>> {
  %0 = quant.qcast %arg0 : tensor<?x5x?xf32> to tensor<?x5x?x!quant.uniform<u16<10:60000>:f32, 0.5:30000>>
  return %0 : tensor<?x5x?x!quant.uniform<u16<10:60000>:f32, 0.5:30000>>
}

// -----

func.func @dcast_scalar(%arg0: !quant.uniform<i8:f32, 2.0:10>) -> f32 {
  %0 = quant.dcast %arg0 : !quant.uniform<i8:f32, 2.0:10> to f32
  return %0 : f32
}

// -----

func.func @dcast_static_unsigned(%arg0: tensor<3x5x!quant.uniform<u8:f32, 2.0:200>>) -> tensor<3x5xf32> {
  %0 = quant.dcast %arg0 : tensor<3x5x!quant.uniform<u8:f32, 2.0:200>> to tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

func.func @dcast_no_zp(%arg0: tensor<3x!quant.uniform<i32:f32, 2.0>>) -> tensor<3xf32> {
  %0 = quant.dcast %arg0 : tensor<3x!quant.uniform<i32:f32, 2.0>> to tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @dcast_dynamic(%arg0: tensor<?x5x?x!quant.uniform<i8<-8:7>:f32, 2.0:-10>>) -> tensor<?x5x?xf32> {
  %0 = quant.dcast %arg0 : tensor<?x5x?x!quant.uniform<i8<-8:7>:f32, 2.0:-10>> to tensor<?x5x?xf32>
  return %0 : tensor<?x5x?xf32>
}

// -----

func.func @round_trip(%arg0: tensor<2x3xf32>, %arg1: f32) -> (tensor<2x3xf32>, f32, tensor<2x3x!quant.uniform<i8:f32, 0.1:-1>>) {
  %0 = quant.qcast %arg0 : tensor<2x3xf32> to tensor<2x3x!quant.uniform<i8:f32, 0.1:-1>>
  %1 = quant.dcast %0 : tensor<2x3x!quant.uniform<i8:f32, 0.1:-1>> to tensor<2x3xf32>
  %2 = quant.qcast %arg1 : f32 to !quant.uniform<u8:f32, 0.5:128>
  %3 = quant.dcast %2 : !quant.uniform<u8:f32, 0.5:128> to f32
  return %1, %3, %0 : tensor<2x3xf32>, f32, tensor<2x3x!quant.uniform<i8:f32, 0.1:-1>>
}

// -----

func.func @qcast_of_dcast_folds(%arg0: tensor<4x!quant.uniform<i8:f32, 0.5:1>>) -> (tensor<4x!quant.uniform<i8:f32, 0.5:1>>, tensor<4x!quant.uniform<i8:f32, 0.25:1>>) {
  %0 = quant.dcast %arg0 : tensor<4x!quant.uniform<i8:f32, 0.5:1>> to tensor<4xf32>
  %1 = quant.qcast %0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.5:1>>
  %2 = quant.qcast %0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 0.25:1>>
  return %1, %2 : tensor<4x!quant.uniform<i8:f32, 0.5:1>>, tensor<4x!quant.uniform<i8:f32, 0.25:1>>
}

// -----

func.func @other_ops_kept(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "test.before"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
  %1 = quant.qcast %0 : tensor<2xf32> to tensor<2x!quant.uniform<i8:f32, 4.0:-128>>
  %2 = "test.between"(%1) : (tensor<2x!quant.uniform<i8:f32, 4.0:-128>>) -> tensor<2x!quant.uniform<i8:f32, 4.0:-128>>
  %3 = quant.dcast %2 : tensor<2x!quant.uniform<i8:f32, 4.0:-128>> to tensor<2xf32>
  return %3 : tensor<2xf32>
}

// -----

func.func @scast_pair_kept(%arg0: tensor<2xi8>) -> tensor<2xi8> {
  %0 = quant.scast %arg0 : tensor<2xi8> to tensor<2x!quant.uniform<i8:f32, 1.0>>
  %1 = quant.scast %0 : tensor<2x!quant.uniform<i8:f32, 1.0>> to tensor<2xi8>
  return %1 : tensor<2xi8>
}

// -----

func.func @qcast_unranked_bounds(%arg0: tensor<*xf32>) -> tensor<*x!quant.uniform<i8<-100:100>:f32, 2.0:10>> {
  %0 = quant.qcast %arg0 : tensor<*xf32> to tensor<*x!quant.uniform<i8<-100:100>:f32, 2.0:10>>
  return %0 : tensor<*x!quant.uniform<i8<-100:100>:f32, 2.0:10>>
}

// -----

func.func @dcast_unranked_unsigned(%arg0: tensor<*x!quant.uniform<u8:f32, 2.0>>) -> tensor<*xf32> {
  %0 = quant.dcast %arg0 : tensor<*x!quant.uniform<u8:f32, 2.0>> to tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @unranked_both_ways(%arg0: tensor<*xf16>) -> tensor<*xf16> {
  %0 = quant.qcast %arg0 : tensor<*xf16> to tensor<*x!quant.uniform<u16:f16, 0.125:32768>>
  %1 = "test.use"(%0) : (tensor<*x!quant.uniform<u16:f16, 0.125:32768>>) -> tensor<*x!quant.uniform<u16:f16, 0.125:32768>>
  %2 = quant.dcast %1 : tensor<*x!quant.uniform<u16:f16, 0.125:32768>> to tensor<*xf16>
  return %2 : tensor<*xf16>
}
