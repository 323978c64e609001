// A function of upstream ops only: mla-run's plumbing without mla lowerings.
func.func @add(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %init = tensor.empty() : tensor<2x3xf32>
  %sum = linalg.add ins(%a, %b : tensor<2x3xf32>, tensor<2x3xf32>)
                    outs(%init : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %sum : tensor<2x3xf32>
}
