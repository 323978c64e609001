// RUN: mla-opt %s --split-input-file --mla-plan-splits="policy=balanced" -verify-diagnostics

// The planner takes head and query-row counts in [1, 2^31 - 1]. A decode
// without query rows has nothing to plan: with run-time seq_lens the balanced
// part count divided by zero (found by fuzz_ir.py).
func.func @decode_no_query_rows(%q: tensor<?x0x16x576xbf16>, %cache: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{mla-plan-splits needs N and Sq in [1, 2147483647], got N = 16 and Sq = 0}}
  %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<?x0x16x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x0x16x512xbf16>, tensor<?x16x0xf32>)
  return
}

// -----

// Heads times rows past int64 wrapped to a zero CTA count the same way.
func.func @decode_huge_heads(%q: tensor<?x4x4611686018427387904x576xbf16>, %cache: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{mla-plan-splits needs N and Sq in [1, 2147483647], got N = 4611686018427387904 and Sq = 4}}
  %o, %l = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<?x4x4611686018427387904x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x4x4611686018427387904x512xbf16>, tensor<?x4611686018427387904x4xf32>)
  return
}
