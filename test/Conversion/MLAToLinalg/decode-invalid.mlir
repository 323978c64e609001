// RUN: mla-opt %s --convert-mla-to-linalg -verify-diagnostics

// The CPU decode lowering keeps whole rows in vectors, so L, L+R, Sq, N and
// the page size must be static; a dynamic one is reported, not miscompiled.
func.func @decode_dynamic_heads(%q: tensor<2x1x?x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x?x64xf32>, tensor<2x?x1xf32>) {
  // expected-error @+2 {{the CPU decode lowering needs static Sq, N, L, L+R and a page size (from the cache type or the layout)}}
  // expected-error @+1 {{failed to legalize operation 'mla.decode'}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
      : (tensor<2x1x?x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x?x64xf32>, tensor<2x?x1xf32>)
  return %o, %lse : tensor<2x1x?x64xf32>, tensor<2x?x1xf32>
}
