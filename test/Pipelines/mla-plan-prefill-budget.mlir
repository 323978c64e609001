// RUN: mla-opt %s --mla-plan="target=cpu" | FileCheck %s --check-prefix=DEFAULT
// RUN: mla-opt %s --mla-plan="target=cpu max-model-len=100 max-num-seqs=2" | FileCheck %s --check-prefix=SMALL
// RUN: mla-opt %s --mla-plan="target=cpu workspace-rows=48" | FileCheck %s --check-prefix=EXPLICIT

// mla-plan forwards the engine limits to mla-chunk-prefill's default budget
// (primer section 7): max(min(max(8 * max-model-len, 4 * max-num-seqs * 64),
// 64K), max-num-seqs * 64) rows, clamped to what the block table addresses
// (2 x 400 pages of 16 = 12800 rows). Defaults (4096, 128): 32768 -> 12800.
// max-model-len 100, max-num-seqs 2: max(800, 512) = 800. An explicit
// workspace-rows wins.
// DEFAULT: tensor.empty() : tensor<12800x80xf32>
// SMALL: tensor.empty() : tensor<800x80xf32>
// EXPLICIT: tensor.empty() : tensor<48x80xf32>
func.func @prefill(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>,
                   %cache: tensor<8x16x80xf32>, %bt: tensor<2x400xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<10x3x5xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32> scale 0.2
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<8x16x80xf32>, tensor<2x400xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return %o : tensor<10x3x5xf32>
}
