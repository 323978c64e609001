// convert-mla-to-gpu reports what it cannot lower, naming the op and why.
// RUN: mla-opt %s --split-input-file --convert-mla-to-gpu --verify-diagnostics

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @no_tiling(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    // expected-error @+1 {{GPU decode needs 'mla.gpu_tiling': run mla-select-gpu-tiling (part of mla-plan for GPU targets) first}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        : (tensor<2x1x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @f32(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x576xf32>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    // expected-error @+1 {{GPU decode reads bf16, f16 and fp8 caches; the f32 format runs on the CPU path only}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = f32, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 16, warps_n = 4, kv_block = 64, stages = 2>}
        : (tensor<2x1x16x576xbf16>, tensor<8x64x576xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// The sm_100a (tcgen05) decode does not read fp8_e4m3_token caches (584-byte
// rows are not whole 16-byte chunks).
module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @fp8_token_sm100(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x128x584xi8>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>) {
    // expected-error @+1 {{the sm_100a (tcgen05) decode does not read fp8_e4m3_token caches: it stages each row with 16-byte cp.async copies, and a 584-byte row is not whole 16-byte chunks; it reads bf16, f16, fp8_e4m3 and fp8_ds_mla caches}}
    %o, %s = mla.decode %q, %c[%bt, %l] layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 128> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 1, kv_block = 64, stages = 2>}
        : (tensor<2x1x16x576xbf16>, tensor<8x128x584xi8>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
    return %o, %s : tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>
  }
}

// -----

// expected-error @+1 {{convert-mla-to-gpu: the module targets the CPU; use mla-to-llvm-cpu instead}}
module attributes {mla.target = #mla.target<chip = cpu>} {
}

// -----

// expected-error @+1 {{convert-mla-to-gpu needs a chip: pass chip=sm_90a|sm_100a or set the module's 'mla.target'}}
module {
}

// -----

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @split(%w: tensor<768x64xf32>) -> (tensor<3x128x64xf32>, tensor<3x64x128xf32>) {
    // expected-error @+1 {{'mla.split_kv_b_proj' has no GPU lowering yet; run it on the CPU path (mla-to-llvm-cpu)}}
    %uk, %uv = mla.split_kv_b_proj %w : tensor<768x64xf32> -> tensor<3x128x64xf32>, tensor<3x64x128xf32>
    return %uk, %uv : tensor<3x128x64xf32>, tensor<3x64x128xf32>
  }
}

// -----

// The kernel reads seq_lens as its cache's own lengths; a DCP shard's are global.
module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @dcp_shard(%q: tensor<2x1x16x576xbf16>, %c: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %l: tensor<2xi32>)
      -> (tensor<1x2x1x16x512xf32>, tensor<1x2x16x1xf32>) {
    // expected-error @+1 {{with a DCP shard (global seq_lens) has no GPU kernel: launch the decode per rank with local seq_lens (mla.dcp)}}
    %po, %pl = mla.decode_partial %q, %c[%bt, %l] layout #mla.cache_layout<format = bf16, page_size = 64> shard #mla.dcp_shard<world_size = 2, rank = 0, interleave = 1> scale 0.0721687824 num_splits 1
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 16, warps_n = 4, kv_block = 64, stages = 2>}
        : (tensor<2x1x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<1x2x1x16x512xf32>, tensor<1x2x16x1xf32>)
    return %po, %pl : tensor<1x2x1x16x512xf32>, tensor<1x2x16x1xf32>
  }
}
