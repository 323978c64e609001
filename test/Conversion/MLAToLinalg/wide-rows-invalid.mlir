// RUN: mla-opt %s --convert-mla-to-linalg -split-input-file -verify-diagnostics

// The CPU lowerings hold whole rows in vectors; a row wider than 16384
// elements is reported instead of reaching LLVM's vector lowering, which
// aborts on widths it cannot count (found by fuzz_ir.py).
func.func @mha_huge_value_width(%q: tensor<2x16x192xf32>, %k: tensor<30x16x192xf32>, %v: tensor<30x16x4611686018427387904xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) {
  // expected-error @+2 {{the CPU mha lowering holds a q/k row (192) and a v row (4611686018427387904) in vectors of at most 16384 elements}}
  // expected-error @+1 {{failed to legalize operation 'mla.mha'}}
  %o, %l = mla.mha %q, %k, %v, %cq, %ck scale 0.0721687824
      : (tensor<2x16x192xf32>, tensor<30x16x192xf32>, tensor<30x16x4611686018427387904xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<2x16x4611686018427387904xf32>, tensor<16x2xf32>)
  return
}

// -----

func.func @decode_huge_row(%q: tensor<1x1x1x16400xf32>, %cache: tensor<2x16x16400xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  // expected-error @+2 {{the CPU decode lowering holds a row of L+R = 16400 in a vector of at most 16384 elements}}
  // expected-error @+1 {{failed to legalize operation}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
      : (tensor<1x1x1x16400xf32>, tensor<2x16x16400xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x1x16384xf32>, tensor<1x1x1xf32>)
  return
}
