// RUN: mla-opt %s --convert-mla-to-linalg -split-input-file -verify-diagnostics

// fp8_ds_mla derives L from the workspace and cache row widths.
func.func @gather_ds_mla_dynamic_row(%cache: tensor<8x16x?xi8>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<64x320xf32>) -> tensor<64x320xf32> {
  // expected-error @+2 {{the CPU gather_cache lowering needs static workspace and cache row widths for fp8_ds_mla (they determine L)}}
  // expected-error @+1 {{failed to legalize operation 'mla.gather_cache'}}
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_ds_mla> into %ws
      : tensor<8x16x?xi8>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<64x320xf32>
  return %r : tensor<64x320xf32>
}
