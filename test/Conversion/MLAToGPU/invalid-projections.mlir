// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_90a -split-input-file -verify-diagnostics

// The head count and widths are baked into the kernel; only T may vary.
func.func @absorb_dynamic_heads(%q: tensor<?x?x192xbf16>, %w: tensor<?x128x512xbf16>) -> tensor<?x?x576xbf16> {
  // expected-error @+1 {{GPU absorb_q needs static N and head widths (only T may be dynamic)}}
  %r = mla.absorb_q %q, %w : tensor<?x?x192xbf16>, tensor<?x128x512xbf16> -> tensor<?x?x576xbf16>
  return %r : tensor<?x?x576xbf16>
}

// -----

// mma.sync m16n8k16 needs K in steps of 16.
func.func @up_proj_k_not_16(%o: tensor<?x4x24xbf16>, %w: tensor<4x24x64xbf16>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{GPU up_proj_out cannot run N = 4, K = 24, width 64: bf16/f16 projections need K % 16 == 0}}
  %r = mla.up_proj_out %o, %w : tensor<?x4x24xbf16>, tensor<4x24x64xbf16> -> tensor<?x256xbf16>
  return %r : tensor<?x256xbf16>
}

// -----

func.func @up_proj_f64(%o: tensor<?x4x32xf64>, %w: tensor<4x32x64xf64>) -> tensor<?x256xf64> {
  // expected-error @+1 {{GPU up_proj_out supports bf16, f16 and f32, got 'f64'}}
  %r = mla.up_proj_out %o, %w : tensor<?x4x32xf64>, tensor<4x32x64xf64> -> tensor<?x256xf64>
  return %r : tensor<?x256xf64>
}

// -----

// cache_write bakes L and R into its kernel too.
func.func @cache_write_dynamic_latent(%kv: tensor<?x?xbf16>, %pe: tensor<?x64xbf16>, %s: tensor<?xi32>, %c: tensor<16x64x?xbf16>) -> tensor<16x64x?xbf16> {
  // expected-error @+1 {{GPU cache_write needs static L and R}}
  %r = mla.cache_write %kv, %pe, %s layout #mla.cache_layout<format = bf16, page_size = 64> into %c
     : tensor<?x?xbf16>, tensor<?x64xbf16>, tensor<?xi32> into tensor<16x64x?xbf16>
  return %r : tensor<16x64x?xbf16>
}
