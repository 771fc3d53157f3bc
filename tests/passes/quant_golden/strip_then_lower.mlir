// FLAGS: --split-input-file --strip-func-quant-types --lower-quant-ops
// Both passes in a row: integer signatures, then arithmetic (mlir-opt 22.1.8 wrote
// strip_then_lower.expected).

func.func @requantize(%arg0: tensor<?x4x!quant.uniform<i8:f32, 0.5:-3>>) -> tensor<?x4x!quant.uniform<u8<0:254>:f32:1, {0.25:128, 0.5:127, 1.0:126, 2.0:125}>> {
  %0 = quant.dcast %arg0 : tensor<?x4x!quant.uniform<i8:f32, 0.5:-3>> to tensor<?x4xf32>
  %1 = quant.qcast %0 : tensor<?x4xf32> to tensor<?x4x!quant.uniform<u8<0:254>:f32:1, {0.25:128, 0.5:127, 1.0:126, 2.0:125}>>
  return %1 : tensor<?x4x!quant.uniform<u8<0:254>:f32:1, {0.25:128, 0.5:127, 1.0:126, 2.0:125}>>
}

// -----

func.func @scalar_round_trip(%arg0: !quant.uniform<i16:f32, 1.0e-3>) -> (f32, !quant.uniform<i16:f32, 1.0e-3>) {
  %0 = quant.dcast %arg0 : !quant.uniform<i16:f32, 1.0e-3> to f32
  %1 = quant.qcast %0 : f32 to !quant.uniform<i16:f32, 1.0e-3>
  return %0, %1 : f32, !quant.uniform<i16:f32, 1.0e-3>
}
