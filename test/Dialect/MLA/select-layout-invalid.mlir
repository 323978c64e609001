// RUN: mla-opt %s -split-input-file -verify-diagnostics --mla-select-layout
// RUN: not mla-opt %s -split-input-file --mla-select-layout=target=sm80 2>&1 >/dev/null | FileCheck %s --check-prefix=BAD-TARGET
// RUN: not mla-opt %s -split-input-file --mla-select-layout=kv-format=fp8 2>&1 >/dev/null | FileCheck %s --check-prefix=BAD-FORMAT
// RUN: not mla-opt %s -split-input-file --mla-select-layout=target=cpu 2>&1 >/dev/null | FileCheck %s --check-prefix=CONFLICT
// RUN: not mla-opt %s -split-input-file --mla-select-layout=kv-format=fp8_ds_mla 2>&1 >/dev/null | FileCheck %s --check-prefix=DSMLA
// RUN: not mla-opt %s -split-input-file --mla-select-layout=kv-format=fp8_e4m3 2>&1 >/dev/null | FileCheck %s --check-prefix=FP8

// One case per mla-select-layout error. The first RUN line checks the errors
// that follow from the IR (each module names its target); the others give
// the pass options and check the errors those options cause. Every RUN line
// sees every case, so the option errors are matched with FileCheck in the
// stderr of a run where other cases fail too.

// BAD-TARGET: error: mla-select-layout: unknown target 'sm80'; expected sm90, sm100 or cpu
// BAD-FORMAT: error: mla-select-layout: unknown kv-format 'fp8'; expected bf16, f16, f32, fp8_e4m3, fp8_e4m3_token or fp8_ds_mla

// expected-error @+1 {{mla-select-layout needs a target: pass target=sm90|sm100|cpu or give the module an 'mla.target' attribute}}
module {
}

// -----

// CONFLICT: error: mla-select-layout: target=cpu disagrees with the module's 'mla.target' #mla.target<chip = sm90>; drop the option or the attribute
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @sm90_page_16(%q: tensor<2x1x16x576xbf16>, %cache: tensor<16x16x576xbf16>, %bt: tensor<2x8xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    // expected-error @+1 {{'mla.decode' op sm90 kernels need page size 64 (FlashMLA's layout), but the cache has page size 16 (from its type 'tensor<16x16x576xbf16>'); allocate the cache with 64-token pages, or compile for target=cpu, which takes any multiple of 16}}
    %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<16x16x576xbf16>, tensor<2x8xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %lse : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @sm100_layout_page_64(%kv: tensor<2x512xbf16>, %pe: tensor<2x64xbf16>, %slots: tensor<2xi32>, %cache: tensor<?x?x576xbf16>) -> tensor<?x?x576xbf16> {
    // expected-error @+1 {{'mla.cache_write' op sm100 kernels need page size 128 (Cutlass MLA's layout), but the cache has page size 64 (the layout's page_size); allocate the cache with 128-token pages, or compile for target=cpu, which takes any multiple of 16}}
    %c = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16, page_size = 64> into %cache
        : tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi32> into tensor<?x?x576xbf16>
    return %c : tensor<?x?x576xbf16>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = cpu>} {
  func.func @cpu_two_page_sizes(%kv: tensor<2x64xf32>, %pe: tensor<2x16xf32>, %slots: tensor<2xi32>, %cache: tensor<?x?x80xf32>,
                                %q: tensor<2x1x4x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>) {
    // expected-note @+1 {{page size 32 fixed here}}
    %c = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32, page_size = 32> into %cache
        : tensor<2x64xf32>, tensor<2x16xf32>, tensor<2xi32> into tensor<?x?x80xf32>
    // expected-error @+1 {{'mla.decode' op uses page size 16, but another op on the same cache uses page size 32; a cache has one page size}}
    %o, %lse = mla.decode %q, %c[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
        : (tensor<2x1x4x80xf32>, tensor<?x?x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
    return %o, %lse : tensor<2x1x4x64xf32>, tensor<2x4x1xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @sm100_256_heads(%q: tensor<1x1x256x576xbf16>, %cache: tensor<8x128x576xbf16>, %bt: tensor<1x4xi32>, %lens: tensor<1xi32>) -> (tensor<1x1x256x512xbf16>, tensor<1x256x1xf32>) {
    // expected-error @+1 {{'mla.decode' op sm100 decode pads heads to 128; N = 256 does not fit (Cutlass MLA runs at most 128 query heads per CTA): split the heads over several decodes or compile for sm90}}
    %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16> scale 0.0721687824
        : (tensor<1x1x256x576xbf16>, tensor<8x128x576xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> (tensor<1x1x256x512xbf16>, tensor<1x256x1xf32>)
    return %o, %lse : tensor<1x1x256x512xbf16>, tensor<1x256x1xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @sm100_dynamic_heads(%q: tensor<1x1x?x576xbf16>, %cache: tensor<8x128x576xbf16>, %bt: tensor<1x4xi32>, %lens: tensor<1xi32>) -> (tensor<1x1x?x512xbf16>, tensor<1x?x1xf32>) {
    // expected-error @+1 {{'mla.decode_partial' op sm100 decode pads heads to 128, so the head count N (q dim 2) must be static, but q is 'tensor<1x1x?x576xbf16>'}}
    %o, %lse = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16> scale 0.0721687824 num_splits 2
        : (tensor<1x1x?x576xbf16>, tensor<8x128x576xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> (tensor<2x1x1x?x512xf32>, tensor<2x1x?x1xf32>)
    %c, %l = mla.combine %o, %lse : (tensor<2x1x1x?x512xf32>, tensor<2x1x?x1xf32>) -> (tensor<1x1x?x512xbf16>, tensor<1x?x1xf32>)
    return %c, %l : tensor<1x1x?x512xbf16>, tensor<1x?x1xf32>
  }
}

// -----

// Valid as written; kv-format=fp8_ds_mla asks for i8 rows a bf16 cache
// cannot hold.
// DSMLA: error: 'mla.cache_write' op kv-format=fp8_ds_mla needs a cache of 'i8' with rows 656 wide (L = 512, R = 64), but the cache is 'tensor<?x?x576xbf16>'; allocate the cache in that format or leave kv-format unset
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @format_element_type(%kv: tensor<2x512xbf16>, %pe: tensor<2x64xbf16>, %slots: tensor<2xi32>, %cache: tensor<?x?x576xbf16>) -> tensor<?x?x576xbf16> {
    %c = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16> into %cache
        : tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi32> into tensor<?x?x576xbf16>
    return %c : tensor<?x?x576xbf16>
  }
}

// -----

// Valid as written; the 584-wide rows are fp8_e4m3_token's, not
// fp8_ds_mla's. Under kv-format=fp8_e4m3 the missing scale is the error.
// DSMLA: error: 'mla.cache_write' op kv-format=fp8_ds_mla needs a cache of 'i8' with rows 656 wide (L = 512, R = 64), but the cache is 'tensor<?x?x584xi8>'; allocate the cache in that format or leave kv-format unset
// FP8: error: 'mla.cache_write' op kv-format=fp8_e4m3 needs a per-tensor scale, but the layout #mla.cache_layout<format = fp8_e4m3_token> has none and the pass cannot invent one (it comes from calibration): write the layout as #mla.cache_layout<format = fp8_e4m3, scale = ...>, or use kv-format=fp8_e4m3_token, which stores a scale per token
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @format_row_width(%kv: tensor<2x512xbf16>, %pe: tensor<2x64xbf16>, %slots: tensor<2xi32>, %cache: tensor<?x?x584xi8>) -> tensor<?x?x584xi8> {
    %c = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3_token> into %cache
        : tensor<2x512xbf16>, tensor<2x64xbf16>, tensor<2xi32> into tensor<?x?x584xi8>
    return %c : tensor<?x?x584xi8>
  }
}
