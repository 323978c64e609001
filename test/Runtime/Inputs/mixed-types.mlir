// f16 and i32 arguments and results; @double also shows that a tensor
// argument is never written (the result must get its own buffer).
func.func @double(%x: tensor<4xf16>, %i: tensor<3xi32>) -> (tensor<4xf16>, tensor<3xi32>) {
  %x2 = linalg.add ins(%x, %x : tensor<4xf16>, tensor<4xf16>)
                   outs(%x : tensor<4xf16>) -> tensor<4xf16>
  %i2 = linalg.add ins(%i, %i : tensor<3xi32>, tensor<3xi32>)
                   outs(%i : tensor<3xi32>) -> tensor<3xi32>
  return %x2, %i2 : tensor<4xf16>, tensor<3xi32>
}

func.func @unused(%x: tensor<4xf16>) -> tensor<4xf16> {
  return %x : tensor<4xf16>
}
