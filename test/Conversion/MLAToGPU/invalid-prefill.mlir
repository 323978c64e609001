// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_90a -split-input-file -verify-diagnostics

// The page size and row widths are baked into the gather kernel.
func.func @gather_dynamic_page(%c: tensor<?x?x576xbf16>, %bt: tensor<?x?xi32>, %st: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<?x576xbf16>) -> tensor<?x576xbf16> {
  // expected-error @+1 {{GPU gather_cache needs a static page size and static row widths}}
  %r = mla.gather_cache %c[%bt] starts %st rows %cu layout #mla.cache_layout<format = bf16> into %ws
     : tensor<?x?x576xbf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<?x576xbf16>
  return %r : tensor<?x576xbf16>
}

// -----

func.func @gather_f64(%c: tensor<?x64x576xbf16>, %bt: tensor<?x?xi32>, %st: tensor<?xi32>, %cu: tensor<?xi32>, %ws: tensor<?x576xf64>) -> tensor<?x576xf64> {
  // expected-error @+1 {{GPU gather_cache writes a bf16, f16 or f32 workspace, got 'f64'}}
  %r = mla.gather_cache %c[%bt] starts %st rows %cu layout #mla.cache_layout<format = bf16, page_size = 64> into %ws
     : tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> into tensor<?x576xf64>
  return %r : tensor<?x576xf64>
}

// -----

func.func @merge_dynamic_heads(%oa: tensor<?x?x128xbf16>, %la: tensor<?x?xf32>, %ob: tensor<?x?x128xbf16>, %lb: tensor<?x?xf32>) -> (tensor<?x?x128xbf16>, tensor<?x?xf32>) {
  // expected-error @+1 {{GPU merge_states needs out [T, N, H] with static N and H}}
  %o, %l = mla.merge_states %oa, %la, %ob, %lb : (tensor<?x?x128xbf16>, tensor<?x?xf32>, tensor<?x?x128xbf16>, tensor<?x?xf32>) -> (tensor<?x?x128xbf16>, tensor<?x?xf32>)
  return %o, %l : tensor<?x?x128xbf16>, tensor<?x?xf32>
}

// -----

// The tensor-core kernel stages 64-deep K slices.
func.func @up_kv_latent_not_64(%lat: tensor<?x96xbf16>, %w: tensor<512x96xbf16>) -> (tensor<?x2x128xbf16>, tensor<?x2x128xbf16>) {
  // expected-error @+1 {{GPU up_proj_kv cannot run N = 2, L = 96, P = 128, V = 128: L must be a multiple of 64}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<?x96xbf16>, tensor<512x96xbf16> -> tensor<?x2x128xbf16>, tensor<?x2x128xbf16>
  return %k, %v : tensor<?x2x128xbf16>, tensor<?x2x128xbf16>
}

// -----

func.func @up_kv_f32(%lat: tensor<?x64xf32>, %w: tensor<512x64xf32>) -> (tensor<?x2x128xf32>, tensor<?x2x128xf32>) {
  // expected-error @+1 {{GPU up_proj_kv needs latent, kv_b_proj, k_nope and v all bf16 or all f16}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x2x128xf32>, tensor<?x2x128xf32>
  return %k, %v : tensor<?x2x128xf32>, tensor<?x2x128xf32>
}

// -----

// mha bakes the head count and widths into its kernel.
func.func @mha_dynamic_width(%q: tensor<?x16x?xbf16>, %k: tensor<?x16x?xbf16>, %v: tensor<?x16x128xbf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>) -> (tensor<?x16x128xbf16>, tensor<16x?xf32>) {
  // expected-error @+1 {{GPU mha needs static N and head widths (only the token counts may be dynamic)}}
  %o, %l = mla.mha %q, %k, %v, %cq, %ck scale 0.125 : (tensor<?x16x?xbf16>, tensor<?x16x?xbf16>, tensor<?x16x128xbf16>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x16x128xbf16>, tensor<16x?xf32>)
  return %o, %l : tensor<?x16x128xbf16>, tensor<16x?xf32>
}
