// RUN: mla-opt %s --mla-select-gpu-tiling -verify-diagnostics

// Rows far wider than any MLA head get no tiling: the shared-memory sums
// overflowed and the unrolled emitters never finished (a 2^62-wide row, found
// by fuzz_ir.py as a timeout of mla-to-nvvm).
module attributes {mla.target = #mla.target<chip = sm90>} {
func.func @decode_huge_row(%q: tensor<?x1x5x4611686018427387904xbf16>, %cache: tensor<?x64x4611686018427387904xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{no GPU decode tiling for this shape on sm_90a: L+R = 4611686018427387904, N = 5 and Sq = 1 must each be at most 4096}}
  %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<?x1x5x4611686018427387904xbf16>, tensor<?x64x4611686018427387904xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x1x5x512xbf16>, tensor<?x5x1xf32>)
  return
}
}
