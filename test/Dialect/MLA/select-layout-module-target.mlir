// RUN: mla-opt %s -split-input-file --mla-select-layout | FileCheck %s

// Without the target option each module plans for its own mla.target, which
// the pass keeps as written. Page sizes fixed by the IR (a static page
// dimension, a layout page_size) are kept when the target's kernels take
// them; formats are kept (no kv-format).

// sm90: a static page dimension of 64 is FlashMLA's and stays; FlashMLA runs
// any head count, so a stale padding attribute is removed.
// CHECK: module attributes {mla.target = #mla.target<chip = sm90, num_sms = 132>}
// CHECK-LABEL: func.func @sm90_static_page
// CHECK: mla.decode {{.*}} layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 : (tensor<2x1x16x576xbf16>, tensor<16x64x576xbf16>
module attributes {mla.target = #mla.target<chip = sm90, num_sms = 132>} {
  func.func @sm90_static_page(%q: tensor<2x1x16x576xbf16>, %cache: tensor<16x64x576xbf16>, %bt: tensor<2x8xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16> scale 0.0721687824 {mla.padded_heads = 128 : i64}
        : (tensor<2x1x16x576xbf16>, tensor<16x64x576xbf16>, tensor<2x8xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %lse : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// sm100: page size 128 kept whether the type or the layout fixes it; N = 16
// is padded to Cutlass MLA's 128 heads.
// CHECK: module attributes {mla.target = #mla.target<chip = sm100>}
// CHECK-LABEL: func.func @sm100_static_page
// CHECK: mla.cache_write {{.*}} layout #mla.cache_layout<format = bf16, page_size = 128> into
// CHECK: mla.decode {{.*}} layout #mla.cache_layout<format = bf16, page_size = 128> scale 0.0721687824 {mla.padded_heads = 128 : i64} : (tensor<2x1x16x576xbf16>, tensor<8x128x576xbf16>
// CHECK-LABEL: func.func @sm100_layout_page
// CHECK: mla.decode {{.*}} layout #mla.cache_layout<format = bf16, page_size = 128> scale 0.0721687824 {mla.padded_heads = 128 : i64} : (tensor<2x1x16x576xbf16>, tensor<?x?x576xbf16>
module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @sm100_static_page(%kv: tensor<2x512xbf16>, %pe: tensor<2x1x64xbf16>, %slots: tensor<2xi32>, %cache: tensor<8x128x576xbf16>,
                               %q: tensor<2x1x16x576xbf16>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %c = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16> into %cache
        : tensor<2x512xbf16>, tensor<2x1x64xbf16>, tensor<2xi32> into tensor<8x128x576xbf16>
    %o, %lse = mla.decode %q, %c[%bt, %lens] layout #mla.cache_layout<format = bf16> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<8x128x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %lse : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }

  func.func @sm100_layout_page(%q: tensor<2x1x16x576xbf16>, %cache: tensor<?x?x576xbf16>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 128> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<?x?x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %lse : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// cpu: any multiple of 16. A page size fixed by one op on a cache (here the
// write's layout) decides it for the ops that read the written cache; a
// cache nothing fixes gets 64. Small dims: L = 64, R = 16, N = 4.
// CHECK: module attributes {mla.target = #mla.target<chip = cpu>}
// CHECK-LABEL: func.func @cpu_fixed_by_write
// CHECK: mla.cache_write {{.*}} layout #mla.cache_layout<format = f32, page_size = 32> into
// CHECK: mla.decode {{.*}} layout #mla.cache_layout<format = f32, page_size = 32> scale 1.250000e-01 :
// CHECK-LABEL: func.func @cpu_static_page
// CHECK: mla.decode {{.*}} layout #mla.cache_layout<format = f32, page_size = 16> scale 1.250000e-01 :
// CHECK-LABEL: func.func @cpu_open
// CHECK: mla.decode {{.*}} layout #mla.cache_layout<format = f32, page_size = 64> scale 1.250000e-01 :
module attributes {mla.target = #mla.target<chip = cpu>} {
  func.func @cpu_fixed_by_write(%kv: tensor<2x64xf32>, %pe: tensor<2x16xf32>, %slots: tensor<2xi32>, %cache: tensor<?x?x80xf32>,
                                %q: tensor<2x1x4x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>) {
    %c = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32, page_size = 32> into %cache
        : tensor<2x64xf32>, tensor<2x16xf32>, tensor<2xi32> into tensor<?x?x80xf32>
    %o, %lse = mla.decode %q, %c[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
        : (tensor<2x1x4x80xf32>, tensor<?x?x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
    return %o, %lse : tensor<2x1x4x64xf32>, tensor<2x4x1xf32>
  }

  func.func @cpu_static_page(%q: tensor<2x1x4x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>) {
    %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
        : (tensor<2x1x4x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
    return %o, %lse : tensor<2x1x4x64xf32>, tensor<2x4x1xf32>
  }

  func.func @cpu_open(%q: tensor<2x1x4x80xf32>, %cache: tensor<?x?x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>) {
    %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
        : (tensor<2x1x4x80xf32>, tensor<?x?x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
    return %o, %lse : tensor<2x1x4x64xf32>, tensor<2x4x1xf32>
  }
}
