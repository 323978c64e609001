// RUN: mla-opt %s --mla-select-layout=target=sm90 | FileCheck %s --check-prefix=SM90
// RUN: mla-opt %s --mla-select-layout=target=sm100 | FileCheck %s --check-prefix=SM100
// RUN: mla-opt %s --mla-select-layout=target=cpu | FileCheck %s --check-prefix=CPU
// A second run takes its target from the mla.target the first one stamped
// and changes nothing.
// RUN: mla-opt %s --mla-select-layout=target=sm100 | mla-opt --mla-select-layout | FileCheck %s --check-prefix=SM100
// RUN: mla-opt %s --mla-select-layout="target=cpu kv-format=fp8_ds_mla" | FileCheck %s --check-prefix=DSMLA
// RUN: mla-opt %s --mla-select-layout="target=cpu kv-format=fp8_e4m3_token" | FileCheck %s --check-prefix=TOKEN

// Planning options on caches whose types leave the page size and the row
// width open (tensor<?x?x?xi8>), so that every target and every fp8
// kv-format applies to every function: the page size is the target's
// (64 sm90, 128 sm100, 64 cpu), the formats are kept unless kv-format asks
// for another (fp8_e4m3's scale is dropped with its format), and on sm100
// the decode-kernel ops with N < 128 are padded to 128 heads. Static page
// sizes and module targets are in select-layout-module-target.mlir.
// Dims: L = 128 (fp8_ds_mla needs a multiple of 128), R = 64, P = V = 64.

// SM90: module attributes {mla.target = #mla.target<chip = sm90>}
// SM100: module attributes {mla.target = #mla.target<chip = sm100>}
// CPU: module attributes {mla.target = #mla.target<chip = cpu>}
// DSMLA: module attributes {mla.target = #mla.target<chip = cpu>}
// TOKEN: module attributes {mla.target = #mla.target<chip = cpu>}

// The write and the decode of its result share one cache.
// SM90-LABEL: func.func @write_then_decode
// SM90: mla.cache_write {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> into
// SM90: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824 :
// SM100-LABEL: func.func @write_then_decode
// SM100: mla.cache_write {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 128> into
// SM100: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 128> scale 0.0721687824 {mla.padded_heads = 128 : i64} :
// CPU-LABEL: func.func @write_then_decode
// CPU: mla.cache_write {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> into
// CPU: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824 :
// DSMLA-LABEL: func.func @write_then_decode
// DSMLA: mla.cache_write {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into
// DSMLA: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// TOKEN-LABEL: func.func @write_then_decode
// TOKEN: mla.cache_write {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> into
// TOKEN: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824 :
func.func @write_then_decode(%kv: tensor<4x128xbf16>, %pe: tensor<4x1x64xbf16>, %slots: tensor<4xi32>, %cache: tensor<?x?x?xi8>,
                             %q: tensor<2x1x16x192xbf16>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x16x128xbf16>, tensor<2x16x1xf32>) {
  %c = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3_token> into %cache
      : tensor<4x128xbf16>, tensor<4x1x64xbf16>, tensor<4xi32> into tensor<?x?x?xi8>
  %o, %lse = mla.decode %q, %c[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3_token> scale 0.0721687824
      : (tensor<2x1x16x192xbf16>, tensor<?x?x?xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x128xbf16>, tensor<2x16x1xf32>)
  return %o, %lse : tensor<2x1x16x128xbf16>, tensor<2x16x1xf32>
}

// N = 128 fills a Cutlass MLA CTA: no padding on any target.
// SM90-LABEL: func.func @decode_128_heads
// SM90: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// SM100-LABEL: func.func @decode_128_heads
// SM100: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 128> scale 0.0721687824 :
// CPU-LABEL: func.func @decode_128_heads
// CPU: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// DSMLA-LABEL: func.func @decode_128_heads
// DSMLA: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// TOKEN-LABEL: func.func @decode_128_heads
// TOKEN: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824 :
func.func @decode_128_heads(%q: tensor<1x1x128x192xbf16>, %cache: tensor<?x?x?xi8>, %bt: tensor<1x4xi32>, %lens: tensor<1xi32>) -> (tensor<1x1x128x128xbf16>, tensor<1x128x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_ds_mla> scale 0.0721687824
      : (tensor<1x1x128x192xbf16>, tensor<?x?x?xi8>, tensor<1x4xi32>, tensor<1xi32>) -> (tensor<1x1x128x128xbf16>, tensor<1x128x1xf32>)
  return %o, %lse : tensor<1x1x128x128xbf16>, tensor<1x128x1xf32>
}

// SM90-LABEL: func.func @decode_partial_16_heads
// SM90: mla.decode_partial {{.*}} layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 2.000000e-02 : f32> scale 0.0721687824 num_splits 2 :
// SM100-LABEL: func.func @decode_partial_16_heads
// SM100: mla.decode_partial {{.*}} layout #mla.cache_layout<format = fp8_e4m3, page_size = 128, scale = 2.000000e-02 : f32> scale 0.0721687824 num_splits 2 {mla.padded_heads = 128 : i64} :
// CPU-LABEL: func.func @decode_partial_16_heads
// CPU: mla.decode_partial {{.*}} layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 2.000000e-02 : f32> scale 0.0721687824 num_splits 2 :
// DSMLA-LABEL: func.func @decode_partial_16_heads
// DSMLA: mla.decode_partial {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 num_splits 2 :
// TOKEN-LABEL: func.func @decode_partial_16_heads
// TOKEN: mla.decode_partial {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824 num_splits 2 :
func.func @decode_partial_16_heads(%q: tensor<2x1x16x192xbf16>, %cache: tensor<?x?x?xi8>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x2x1x16x128xf32>, tensor<2x2x16x1xf32>) {
  %o, %lse = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3, scale = 2.0e-02 : f32> scale 0.0721687824 num_splits 2
      : (tensor<2x1x16x192xbf16>, tensor<?x?x?xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x2x1x16x128xf32>, tensor<2x2x16x1xf32>)
  return %o, %lse : tensor<2x2x1x16x128xf32>, tensor<2x2x16x1xf32>
}

// A mixed batch's decode requests run the padded kernel; prefill runs MHA
// and is never padded.
// SM90-LABEL: func.func @attention_and_prefill
// SM90: mla.attention {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// SM90: mla.prefill {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// SM100-LABEL: func.func @attention_and_prefill
// SM100: mla.attention {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 128> scale 0.0721687824 {mla.padded_heads = 128 : i64} :
// SM100: mla.prefill {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 128> scale 0.0721687824 :
// CPU-LABEL: func.func @attention_and_prefill
// CPU: mla.attention {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// CPU: mla.prefill {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// DSMLA-LABEL: func.func @attention_and_prefill
// DSMLA: mla.attention {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// DSMLA: mla.prefill {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824 :
// TOKEN-LABEL: func.func @attention_and_prefill
// TOKEN: mla.attention {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824 :
// TOKEN: mla.prefill {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824 :
func.func @attention_and_prefill(%q: tensor<4x16x128xbf16>, %kv: tensor<4x128xbf16>, %pe: tensor<4x1x64xbf16>, %w: tensor<2048x128xbf16>, %cache: tensor<?x?x?xi8>,
                                 %bt: tensor<2x4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> (tensor<4x16x64xbf16>, tensor<4x16x64xbf16>) {
  %a = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = fp8_ds_mla> scale 0.0721687824
      : (tensor<4x16x128xbf16>, tensor<4x128xbf16>, tensor<4x1x64xbf16>, tensor<2048x128xbf16>, tensor<?x?x?xi8>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<4x16x64xbf16>
  %p = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = fp8_ds_mla> scale 0.0721687824
      : (tensor<4x16x128xbf16>, tensor<4x128xbf16>, tensor<4x1x64xbf16>, tensor<2048x128xbf16>, tensor<?x?x?xi8>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<4x16x64xbf16>
  return %a, %p : tensor<4x16x64xbf16>, tensor<4x16x64xbf16>
}

// SM90-LABEL: func.func @gather
// SM90: mla.gather_cache {{.*}} layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 2.000000e-02 : f32> latent_dim 128 into
// SM100-LABEL: func.func @gather
// SM100: mla.gather_cache {{.*}} layout #mla.cache_layout<format = fp8_e4m3, page_size = 128, scale = 2.000000e-02 : f32> latent_dim 128 into
// CPU-LABEL: func.func @gather
// CPU: mla.gather_cache {{.*}} layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 2.000000e-02 : f32> latent_dim 128 into
// DSMLA-LABEL: func.func @gather
// DSMLA: mla.gather_cache {{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> latent_dim 128 into
// TOKEN-LABEL: func.func @gather
// TOKEN: mla.gather_cache {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> latent_dim 128 into
func.func @gather(%cache: tensor<?x?x?xi8>, %bt: tensor<2x8xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<256x192xf32>) -> tensor<256x192xf32> {
  %w = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_e4m3, scale = 2.0e-02 : f32> latent_dim 128 into %ws
      : tensor<?x?x?xi8>, tensor<2x8xi32>, tensor<2xi32>, tensor<3xi32> into tensor<256x192xf32>
  return %w : tensor<256x192xf32>
}
