// RUN: mla-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of the mla dialect: attributes, the mla.target
// module attribute, then every op in the order of MLAOps.td. Small dims
// (N = 3 or 4, P = 8, V = 5 or 8, L = 64, R = 16) and DeepSeek-V3 dims
// (N = 128, P = V = 128, L = 512, R = 64) are mixed.

//===----------------------------------------------------------------------===//
// #mla.cache_layout and #mla.target
//===----------------------------------------------------------------------===//

func.func @layout_page_size(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x80xf32>) {
  // expected-error @+1 {{page size 24 is not a positive multiple of 16}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32, page_size = 24> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<8x16x80xf32>
  return
}

// -----

func.func @layout_fp8_without_scale(%kv: tensor<4x512xf32>, %pe: tensor<4x64xf32>, %slots: tensor<4xi32>, %cache: tensor<8x64x576xi8>) {
  // expected-error @+1 {{format fp8_e4m3 needs a per-tensor 'scale'}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3, page_size = 64> into %cache
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x64x576xi8>
  return
}

// -----

func.func @layout_fp8_scale_not_positive(%kv: tensor<4x512xf32>, %pe: tensor<4x64xf32>, %slots: tensor<4xi32>, %cache: tensor<8x64x576xi8>) {
  // expected-error @+1 {{fp8 scale -2.000000e-02 must be positive and finite}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = -0.02 : f32> into %cache
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x64x576xi8>
  return
}

// -----

func.func @layout_scale_on_bf16(%kv: tensor<4x512xbf16>, %pe: tensor<4x64xbf16>, %slots: tensor<4xi32>, %cache: tensor<16x64x576xbf16>) {
  // expected-error @+1 {{'scale' is only meaningful for format fp8_e4m3, not bf16 (its scales are stored in the rows)}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16, page_size = 64, scale = 0.02 : f32> into %cache
      : tensor<4x512xbf16>, tensor<4x64xbf16>, tensor<4xi32> into tensor<16x64x576xbf16>
  return
}

// -----

// expected-error @+1 {{num_sms 0 must be positive}}
module attributes {mla.target = #mla.target<chip = sm90, num_sms = 0>} {
}

// -----

// expected-error @+1 {{unknown mla attribute 'mla.chip'; the known ones are 'mla.target', 'mla.padded_heads' and 'mla.gpu_tiling'}}
module attributes {mla.chip = #mla.target<chip = sm90>} {
}

// -----

// expected-error @+1 {{'mla.target' must be a #mla.target attribute, got "sm90"}}
module attributes {mla.target = "sm90"} {
}

// -----

// expected-error @+1 {{'mla.target' belongs on a builtin.module, not on 'func.func'}}
func.func @target_on_func() attributes {mla.target = #mla.target<chip = sm100>} {
  return
}

// -----

func.func @padded_heads_on_prefill(%q: tensor<6x4x24xf32>, %kv: tensor<6x64xf32>, %pe: tensor<6x16xf32>, %w: tensor<52x64xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{'mla.padded_heads' belongs on mla.decode, mla.decode_partial or mla.attention, not on 'mla.prefill'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32> scale 0.2 {mla.padded_heads = 128 : i64}
      : (tensor<6x4x24xf32>, tensor<6x64xf32>, tensor<6x16xf32>, tensor<52x64xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<6x4x5xf32>
  return
}

// -----

func.func @padded_heads_not_i64(%q: tensor<2x1x4x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{'mla.padded_heads' must be an i64, got 128 : i32}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 {mla.padded_heads = 128 : i32}
      : (tensor<2x1x4x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @padded_heads_below_n(%q: tensor<2x1x4x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{'mla.padded_heads' 2 must be at least the query head count N = 4}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 {mla.padded_heads = 2 : i64}
      : (tensor<2x1x4x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

//===----------------------------------------------------------------------===//
// mla.cache_write
//===----------------------------------------------------------------------===//

// -----

func.func @cache_write_kv_c_rank(%kv: tensor<4x1x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x80xf32>) {
  // expected-error @+1 {{'mla.cache_write' op kv_c must have rank 2 ([T, L]), got 'tensor<4x1x64xf32>'}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x1x64xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<8x16x80xf32>
  return
}

// -----

func.func @cache_write_slot_mapping_rank(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4x1xi32>, %cache: tensor<8x16x80xf32>) {
  // expected-error @+1 {{slot_mapping must have rank 1 ([T]), got 'tensor<4x1xi32>'}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4x1xi32> into tensor<8x16x80xf32>
  return
}

// -----

// ODS type constraint: slot_mapping is i32.
func.func @cache_write_slot_mapping_i64(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi64>, %cache: tensor<8x16x80xf32>) {
  // expected-error @+1 {{operand #2 must be ranked tensor of 32-bit signless integer values, but got 'tensor<4xi64>'}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4xi64> into tensor<8x16x80xf32>
  return
}

// -----

// ODS type constraint: the cache holds bf16, f16, f32 or i8.
func.func @cache_write_cache_i32(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x80xi32>) {
  // expected-error @+1 {{operand #3 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float or 8-bit signless integer values, but got 'tensor<8x16x80xi32>'}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<8x16x80xi32>
  return
}

// -----

func.func @cache_write_k_pe_rank(%kv: tensor<4x64xf32>, %pe: tensor<4xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x80xf32>) {
  // expected-error @+1 {{k_pe must have rank 2 ([T, R]) or 3 ([T, 1, R]), got 'tensor<4xf32>'}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4xf32>, tensor<4xi32> into tensor<8x16x80xf32>
  return
}

// -----

func.func @cache_write_k_pe_heads(%kv: tensor<4x512xbf16>, %pe: tensor<4x2x64xbf16>, %slots: tensor<4xi32>, %cache: tensor<16x64x576xbf16>) {
  // expected-error @+1 {{k_pe dim 1 2 must equal the single KV head count 1}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16, page_size = 64> into %cache
      : tensor<4x512xbf16>, tensor<4x2x64xbf16>, tensor<4xi32> into tensor<16x64x576xbf16>
  return
}

// -----

func.func @cache_write_k_pe_tokens(%kv: tensor<4x64xf32>, %pe: tensor<3x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x80xf32>) {
  // expected-error @+1 {{k_pe dim 0 3 must equal the token count 4}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<3x16xf32>, tensor<4xi32> into tensor<8x16x80xf32>
  return
}

// -----

func.func @cache_write_slot_mapping_tokens(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<5xi32>, %cache: tensor<8x16x80xf32>) {
  // expected-error @+1 {{slot_mapping dim 0 5 must equal the token count 4}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<5xi32> into tensor<8x16x80xf32>
  return
}

// -----

func.func @cache_write_k_pe_element_type(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf16>, %slots: tensor<4xi32>, %cache: tensor<8x16x80xf32>) {
  // expected-error @+1 {{k_pe element type 'f16' must match kv_c element type 'f32'}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x16xf16>, tensor<4xi32> into tensor<8x16x80xf32>
  return
}

// -----

func.func @cache_write_cache_rank(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<128x80xf32>) {
  // expected-error @+1 {{cache must have rank 3 ([pages, page_size, row]), got 'tensor<128x80xf32>'}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<128x80xf32>
  return
}

// -----

func.func @cache_write_cache_element_type(%kv: tensor<4x512xbf16>, %pe: tensor<4x1x64xbf16>, %slots: tensor<4xi32>, %cache: tensor<16x64x576xf32>) {
  // expected-error @+1 {{cache element type 'f32' does not match layout format bf16 (expects 'bf16')}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16, page_size = 64> into %cache
      : tensor<4x512xbf16>, tensor<4x1x64xbf16>, tensor<4xi32> into tensor<16x64x576xf32>
  return
}

// -----

func.func @cache_write_cache_page_size(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x8x80xf32>) {
  // expected-error @+1 {{'mla.cache_write' op page size 8 is not a positive multiple of 16}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<8x8x80xf32>
  return
}

// -----

func.func @cache_write_cache_page_size_vs_layout(%kv: tensor<4x512xbf16>, %pe: tensor<4x1x64xbf16>, %slots: tensor<4xi32>, %cache: tensor<64x16x576xbf16>) {
  // expected-error @+1 {{cache page size 16 must equal the layout page_size 64}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16, page_size = 64> into %cache
      : tensor<4x512xbf16>, tensor<4x1x64xbf16>, tensor<4xi32> into tensor<64x16x576xbf16>
  return
}

// -----

func.func @cache_write_row_float(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x96xf32>) {
  // expected-error @+1 {{kv_c width + k_pe width 80 must equal the cache row width 96}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<8x16x96xf32>
  return
}

// -----

// fp8_e4m3 rows are D bytes wide; 584 is the fp8_e4m3_token width.
func.func @cache_write_row_fp8_e4m3(%kv: tensor<4x512xf32>, %pe: tensor<4x64xf32>, %slots: tensor<4xi32>, %cache: tensor<8x64x584xi8>) {
  // expected-error @+1 {{kv_c width + k_pe width 576 must equal the cache row width 584}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.02 : f32> into %cache
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x64x584xi8>
  return
}

// -----

func.func @cache_write_row_fp8_e4m3_token(%kv: tensor<4x512xf32>, %pe: tensor<4x64xf32>, %slots: tensor<4xi32>, %cache: tensor<8x64x576xi8>) {
  // expected-error @+1 {{kv_c width + k_pe width + 8 bytes of scales = 584 must equal the cache row width 576}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> into %cache
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x64x576xi8>
  return
}

// -----

// fp8_ds_mla stores the latent in 128-wide tiles; L = 64 has none.
func.func @cache_write_ds_mla_latent(%kv: tensor<4x64xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x96xi8>) {
  // expected-error @+1 {{format fp8_ds_mla needs a latent width that is a multiple of 128 and below 80, got 64}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_ds_mla> into %cache
      : tensor<4x64xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<8x16x96xi8>
  return
}

// -----

func.func @cache_write_row_ds_mla(%kv: tensor<4x512xf32>, %pe: tensor<4x64xf32>, %slots: tensor<4xi32>, %cache: tensor<8x64x576xi8>) {
  // expected-error @+1 {{the fp8_ds_mla row width for L = 512, R = 64 is 656 must equal the cache row width 576}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %cache
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x64x576xi8>
  return
}

//===----------------------------------------------------------------------===//
// mla.gather_cache
//===----------------------------------------------------------------------===//

// -----

func.func @gather_cache_workspace_rank(%cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<64x1x80xf32>) {
  // expected-error @+1 {{workspace must have rank 2 ([W, L+R]), got 'tensor<64x1x80xf32>'}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32, page_size = 16> into %ws
      : tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<64x1x80xf32>
  return
}

// -----

func.func @gather_cache_block_table_rank(%cache: tensor<8x16x80xf32>, %bt: tensor<8xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<64x80xf32>) {
  // expected-error @+1 {{block_table must have rank 2 ([B, maxPages]), got 'tensor<8xi32>'}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32, page_size = 16> into %ws
      : tensor<8x16x80xf32>, tensor<8xi32>, tensor<2xi32>, tensor<3xi32> into tensor<64x80xf32>
  return
}

// -----

func.func @gather_cache_starts_rank(%cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %starts: tensor<2x1xi32>, %cu: tensor<3xi32>, %ws: tensor<64x80xf32>) {
  // expected-error @+1 {{starts must have rank 1 ([B]), got 'tensor<2x1xi32>'}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32, page_size = 16> into %ws
      : tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2x1xi32>, tensor<3xi32> into tensor<64x80xf32>
  return
}

// -----

func.func @gather_cache_cu_rows_rank(%cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3x1xi32>, %ws: tensor<64x80xf32>) {
  // expected-error @+1 {{cu_rows must have rank 1 ([B+1]), got 'tensor<3x1xi32>'}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32, page_size = 16> into %ws
      : tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>, tensor<3x1xi32> into tensor<64x80xf32>
  return
}

// -----

func.func @gather_cache_starts_batch(%cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %starts: tensor<3xi32>, %cu: tensor<3xi32>, %ws: tensor<64x80xf32>) {
  // expected-error @+1 {{starts dim 0 3 must equal block_table dim 0 2}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32, page_size = 16> into %ws
      : tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<3xi32> into tensor<64x80xf32>
  return
}

// -----

func.func @gather_cache_cu_rows_batch(%cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<2xi32>, %ws: tensor<64x80xf32>) {
  // expected-error @+1 {{cu_rows dim 0 2 must equal block_table dim 0 + 1 = 3}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32, page_size = 16> into %ws
      : tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>, tensor<2xi32> into tensor<64x80xf32>
  return
}

// -----

func.func @gather_cache_row_float(%cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<64x64xf32>) {
  // expected-error @+1 {{workspace row width 64 must equal the cache row width 80}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32, page_size = 16> into %ws
      : tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<64x64xf32>
  return
}

// -----

// Without kv_c the latent width is inferred from the row: 600 fits no L.
func.func @gather_cache_not_a_ds_mla_row(%cache: tensor<8x64x600xi8>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<256x576xf32>) {
  // expected-error @+1 {{cache row width 600 is not an fp8_ds_mla row for workspace row width 576}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %ws
      : tensor<8x64x600xi8>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<256x576xf32>
  return
}

// -----

// A row of 1121 bytes would mean L = 32, which is not a whole number of tiles.
func.func @gather_cache_ds_mla_latent(%cache: tensor<8x64x1121xi8>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<256x576xf32>) {
  // expected-error @+1 {{format fp8_ds_mla needs a latent width that is a multiple of 128 and below 576, got 32}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %ws
      : tensor<8x64x1121xi8>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<256x576xf32>
  return
}

//===----------------------------------------------------------------------===//
// mla.split_kv_b_proj
//===----------------------------------------------------------------------===//

// -----

func.func @split_kv_b_proj_rank(%w: tensor<39x64x1xf32>) {
  // expected-error @+1 {{kv_b_proj must have rank 2 ([N*(P+V), L]), got 'tensor<39x64x1xf32>'}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64x1xf32> -> tensor<3x8x64xf32>, tensor<3x64x5xf32>
  return
}

// -----

func.func @split_kv_b_proj_w_uk_t_rank(%w: tensor<39x64xf32>) {
  // expected-error @+1 {{w_uk_t must have rank 3 ([N, P, L]), got 'tensor<24x64xf32>'}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64xf32> -> tensor<24x64xf32>, tensor<3x64x5xf32>
  return
}

// -----

func.func @split_kv_b_proj_w_uv_rank(%w: tensor<39x64xf32>) {
  // expected-error @+1 {{w_uv must have rank 3 ([N, L, V]), got 'tensor<3x320xf32>'}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64xf32> -> tensor<3x8x64xf32>, tensor<3x320xf32>
  return
}

// -----

func.func @split_kv_b_proj_w_uk_t_element_type(%w: tensor<39x64xf32>) {
  // expected-error @+1 {{w_uk_t element type 'f16' must match kv_b_proj element type 'f32'}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64xf32> -> tensor<3x8x64xf16>, tensor<3x64x5xf32>
  return
}

// -----

func.func @split_kv_b_proj_w_uv_element_type(%w: tensor<32768x512xbf16>) {
  // expected-error @+1 {{w_uv element type 'f32' must match kv_b_proj element type 'bf16'}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<32768x512xbf16> -> tensor<128x128x512xbf16>, tensor<128x512x128xf32>
  return
}

// -----

func.func @split_kv_b_proj_heads(%w: tensor<39x64xf32>) {
  // expected-error @+1 {{w_uv dim 0 4 must equal w_uk_t dim 0 (N) 3}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64xf32> -> tensor<3x8x64xf32>, tensor<4x64x5xf32>
  return
}

// -----

func.func @split_kv_b_proj_w_uk_t_latent(%w: tensor<39x64xf32>) {
  // expected-error @+1 {{w_uk_t dim 2 32 must equal kv_b_proj dim 1 (L) 64}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64xf32> -> tensor<3x8x32xf32>, tensor<3x64x5xf32>
  return
}

// -----

func.func @split_kv_b_proj_w_uv_latent(%w: tensor<39x64xf32>) {
  // expected-error @+1 {{w_uv dim 1 32 must equal kv_b_proj dim 1 (L) 64}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64xf32> -> tensor<3x8x64xf32>, tensor<3x32x5xf32>
  return
}

// -----

// V = 64 instead of 128: 128 * (128 + 64) rows.
func.func @split_kv_b_proj_rows(%w: tensor<32768x512xbf16>) {
  // expected-error @+1 {{kv_b_proj dim 0 32768 must equal N*(P+V) = 24576}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<32768x512xbf16> -> tensor<128x128x512xbf16>, tensor<128x512x64xbf16>
  return
}

//===----------------------------------------------------------------------===//
// mla.absorb_q
//===----------------------------------------------------------------------===//

// -----

func.func @absorb_q_q_rank(%q: tensor<4x72xf32>, %uk: tensor<3x8x64xf32>) {
  // expected-error @+1 {{q must have rank 3 ([T, N, P+R]), got 'tensor<4x72xf32>'}}
  %0 = mla.absorb_q %q, %uk : tensor<4x72xf32>, tensor<3x8x64xf32> -> tensor<4x3x80xf32>
  return
}

// -----

func.func @absorb_q_w_uk_t_rank(%q: tensor<4x3x24xf32>, %uk: tensor<24x64xf32>) {
  // expected-error @+1 {{w_uk_t must have rank 3 ([N, P, L]), got 'tensor<24x64xf32>'}}
  %0 = mla.absorb_q %q, %uk : tensor<4x3x24xf32>, tensor<24x64xf32> -> tensor<4x3x80xf32>
  return
}

// -----

func.func @absorb_q_result_rank(%q: tensor<4x3x24xf32>, %uk: tensor<3x8x64xf32>) {
  // expected-error @+1 {{result must have rank 3 ([T, N, L+R]), got 'tensor<4x240xf32>'}}
  %0 = mla.absorb_q %q, %uk : tensor<4x3x24xf32>, tensor<3x8x64xf32> -> tensor<4x240xf32>
  return
}

// -----

func.func @absorb_q_result_element_type(%q: tensor<8x128x192xbf16>, %uk: tensor<128x128x512xbf16>) {
  // expected-error @+1 {{result element type 'f32' must match q element type 'bf16'}}
  %0 = mla.absorb_q %q, %uk : tensor<8x128x192xbf16>, tensor<128x128x512xbf16> -> tensor<8x128x576xf32>
  return
}

// -----

func.func @absorb_q_heads(%q: tensor<4x3x24xf32>, %uk: tensor<4x8x64xf32>) {
  // expected-error @+1 {{w_uk_t dim 0 4 must equal q dim 1 (N) 3}}
  %0 = mla.absorb_q %q, %uk : tensor<4x3x24xf32>, tensor<4x8x64xf32> -> tensor<4x3x80xf32>
  return
}

// -----

// q carries only the nope part (P = 8), no RoPE part.
func.func @absorb_q_no_rope(%q: tensor<4x3x8xf32>, %uk: tensor<3x8x64xf32>) {
  // expected-error @+1 {{q last dim - P (the RoPE width R) 0 must be positive}}
  %0 = mla.absorb_q %q, %uk : tensor<4x3x8xf32>, tensor<3x8x64xf32> -> tensor<4x3x64xf32>
  return
}

// -----

func.func @absorb_q_result_tokens(%q: tensor<4x3x24xf32>, %uk: tensor<3x8x64xf32>) {
  // expected-error @+1 {{result dim 0 5 must equal q dim 0 (T) 4}}
  %0 = mla.absorb_q %q, %uk : tensor<4x3x24xf32>, tensor<3x8x64xf32> -> tensor<5x3x80xf32>
  return
}

// -----

func.func @absorb_q_result_heads(%q: tensor<4x3x24xf32>, %uk: tensor<3x8x64xf32>) {
  // expected-error @+1 {{result dim 1 2 must equal q dim 1 (N) 3}}
  %0 = mla.absorb_q %q, %uk : tensor<4x3x24xf32>, tensor<3x8x64xf32> -> tensor<4x2x80xf32>
  return
}

// -----

// The RoPE part passes through: the result is L + R = 576 wide, not L.
func.func @absorb_q_result_width(%q: tensor<8x128x192xbf16>, %uk: tensor<128x128x512xbf16>) {
  // expected-error @+1 {{result dim 2 512 must equal L + R = 576}}
  %0 = mla.absorb_q %q, %uk : tensor<8x128x192xbf16>, tensor<128x128x512xbf16> -> tensor<8x128x512xbf16>
  return
}

//===----------------------------------------------------------------------===//
// mla.up_proj_out
//===----------------------------------------------------------------------===//

// -----

func.func @up_proj_out_o_rank(%o: tensor<4x192xf32>, %uv: tensor<3x64x5xf32>) {
  // expected-error @+1 {{o must have rank 3 ([T, N, L]), got 'tensor<4x192xf32>'}}
  %0 = mla.up_proj_out %o, %uv : tensor<4x192xf32>, tensor<3x64x5xf32> -> tensor<4x15xf32>
  return
}

// -----

func.func @up_proj_out_w_uv_rank(%o: tensor<4x3x64xf32>, %uv: tensor<192x5xf32>) {
  // expected-error @+1 {{w_uv must have rank 3 ([N, L, V]), got 'tensor<192x5xf32>'}}
  %0 = mla.up_proj_out %o, %uv : tensor<4x3x64xf32>, tensor<192x5xf32> -> tensor<4x15xf32>
  return
}

// -----

func.func @up_proj_out_result_rank(%o: tensor<4x3x64xf32>, %uv: tensor<3x64x5xf32>) {
  // expected-error @+1 {{result must have rank 2 ([T, N*V]), got 'tensor<4x3x5xf32>'}}
  %0 = mla.up_proj_out %o, %uv : tensor<4x3x64xf32>, tensor<3x64x5xf32> -> tensor<4x3x5xf32>
  return
}

// -----

func.func @up_proj_out_result_element_type(%o: tensor<4x3x64xf32>, %uv: tensor<3x64x5xf32>) {
  // expected-error @+1 {{result element type 'f16' must match o element type 'f32'}}
  %0 = mla.up_proj_out %o, %uv : tensor<4x3x64xf32>, tensor<3x64x5xf32> -> tensor<4x15xf16>
  return
}

// -----

func.func @up_proj_out_heads(%o: tensor<4x3x64xf32>, %uv: tensor<2x64x5xf32>) {
  // expected-error @+1 {{w_uv dim 0 2 must equal o dim 1 (N) 3}}
  %0 = mla.up_proj_out %o, %uv : tensor<4x3x64xf32>, tensor<2x64x5xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @up_proj_out_latent(%o: tensor<4x3x64xf32>, %uv: tensor<3x32x5xf32>) {
  // expected-error @+1 {{w_uv dim 1 32 must equal o dim 2 (L) 64}}
  %0 = mla.up_proj_out %o, %uv : tensor<4x3x64xf32>, tensor<3x32x5xf32> -> tensor<4x15xf32>
  return
}

// -----

func.func @up_proj_out_result_tokens(%o: tensor<4x3x64xf32>, %uv: tensor<3x64x5xf32>) {
  // expected-error @+1 {{result dim 0 5 must equal o dim 0 (T) 4}}
  %0 = mla.up_proj_out %o, %uv : tensor<4x3x64xf32>, tensor<3x64x5xf32> -> tensor<5x15xf32>
  return
}

// -----

func.func @up_proj_out_result_width(%o: tensor<8x128x512xbf16>, %uv: tensor<128x512x128xbf16>) {
  // expected-error @+1 {{result dim 1 128 must equal N*V = 16384}}
  %0 = mla.up_proj_out %o, %uv : tensor<8x128x512xbf16>, tensor<128x512x128xbf16> -> tensor<8x128xbf16>
  return
}

//===----------------------------------------------------------------------===//
// mla.up_proj_kv
//===----------------------------------------------------------------------===//

// -----

func.func @up_proj_kv_latent_rank(%lat: tensor<10x1x64xf32>, %w: tensor<39x64xf32>) {
  // expected-error @+1 {{latent must have rank 2 ([S, L]), got 'tensor<10x1x64xf32>'}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x1x64xf32>, tensor<39x64xf32> -> tensor<10x3x8xf32>, tensor<10x3x5xf32>
  return
}

// -----

func.func @up_proj_kv_k_nope_rank(%lat: tensor<10x64xf32>, %w: tensor<39x64xf32>) {
  // expected-error @+1 {{k_nope must have rank 3 ([S, N, P]), got 'tensor<10x24xf32>'}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<39x64xf32> -> tensor<10x24xf32>, tensor<10x3x5xf32>
  return
}

// -----

func.func @up_proj_kv_v_rank(%lat: tensor<10x64xf32>, %w: tensor<39x64xf32>) {
  // expected-error @+1 {{v must have rank 3 ([S, N, V]), got 'tensor<10x15xf32>'}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<39x64xf32> -> tensor<10x3x8xf32>, tensor<10x15xf32>
  return
}

// -----

func.func @up_proj_kv_k_nope_rows(%lat: tensor<10x64xf32>, %w: tensor<39x64xf32>) {
  // expected-error @+1 {{k_nope dim 0 9 must equal latent dim 0 (S) 10}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<39x64xf32> -> tensor<9x3x8xf32>, tensor<10x3x5xf32>
  return
}

// -----

func.func @up_proj_kv_v_rows(%lat: tensor<10x64xf32>, %w: tensor<39x64xf32>) {
  // expected-error @+1 {{v dim 0 9 must equal latent dim 0 (S) 10}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<39x64xf32> -> tensor<10x3x8xf32>, tensor<9x3x5xf32>
  return
}

// -----

func.func @up_proj_kv_v_heads(%lat: tensor<10x64xf32>, %w: tensor<39x64xf32>) {
  // expected-error @+1 {{v dim 1 2 must equal k_nope dim 1 (N) 3}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<39x64xf32> -> tensor<10x3x8xf32>, tensor<10x2x5xf32>
  return
}

// -----

func.func @up_proj_kv_kv_b_proj_rank(%lat: tensor<10x64xf32>, %w: tensor<3x13x64xf32>) {
  // expected-error @+1 {{kv_b_proj must have rank 2 ([N*(P+V), L]), got 'tensor<3x13x64xf32>'}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<3x13x64xf32> -> tensor<10x3x8xf32>, tensor<10x3x5xf32>
  return
}

// -----

func.func @up_proj_kv_kv_b_proj_latent(%lat: tensor<10x64xf32>, %w: tensor<39x32xf32>) {
  // expected-error @+1 {{kv_b_proj dim 1 32 must equal latent dim 1 (L) 64}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<39x32xf32> -> tensor<10x3x8xf32>, tensor<10x3x5xf32>
  return
}

// -----

func.func @up_proj_kv_kv_b_proj_rows(%lat: tensor<100x512xbf16>, %w: tensor<24576x512xbf16>) {
  // expected-error @+1 {{kv_b_proj dim 0 24576 must equal N*(P+V) = 32768}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<100x512xbf16>, tensor<24576x512xbf16> -> tensor<100x128x128xbf16>, tensor<100x128x128xbf16>
  return
}

//===----------------------------------------------------------------------===//
// mla.decode
//===----------------------------------------------------------------------===//

// -----

func.func @decode_out_rank(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{out must have rank 4 ([B, Sq, N, L]), got 'tensor<2x4x64xf32>'}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_lse_rank(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{lse must have rank 3 ([B, N, Sq]), got 'tensor<2x4xf32>'}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4xf32>)
  return
}

// -----

// ODS type constraint: the LSE is f32 whatever the query type.
func.func @decode_lse_bf16(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{result #1 must be ranked tensor of 32-bit float values, but got 'tensor<4x16x1xbf16>'}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xbf16>)
  return
}

// -----

func.func @decode_out_element_type(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{out element type 'f32' must match q element type 'bf16'}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xf32>, tensor<4x16x1xf32>)
  return
}

// -----

func.func @decode_num_splits_zero(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{num_splits 0 must be positive}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 0
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

// A negative count must not wrap around to a huge unsigned one.
func.func @decode_num_splits_negative(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{num_splits -1 must be positive}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits -1
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_q_rank(%q: tensor<2x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{q must have rank 4 ([B, Sq, N, L+R]), got 'tensor<2x4x80xf32>'}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_scale(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{softmax scale 0.000000e+00 must be positive and finite}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.0
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

// out is as wide as q (L + R) instead of L: nothing is left for RoPE.
func.func @decode_no_rope(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{q last dim - L (the RoPE width R) 0 must be positive}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x80xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_cache_row_fp8_e4m3_token(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x64x576xi8>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{q last dim + 8 bytes of scales = 584 must equal the cache row width 576}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3_token> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<64x64x576xi8>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return
}

// -----

// An fp8_e4m3_token-wide row (584) under the fp8_ds_mla layout.
func.func @decode_cache_row_ds_mla(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x64x584xi8>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{the fp8_ds_mla row width for L = 512, R = 64 is 656 must equal the cache row width 584}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<64x64x584xi8>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return
}

// -----

func.func @decode_block_table_rank(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<4xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{block_table must have rank 2 ([B, maxPages]), got 'tensor<4xi32>'}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<4xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_seq_lens_rank(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2x1xi32>) {
  // expected-error @+1 {{seq_lens must have rank 1 ([B]), got 'tensor<2x1xi32>'}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2x1xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_block_table_batch(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<3x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{block_table dim 0 3 must equal q dim 0 (B) 2}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<3x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_seq_lens_batch(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<3xi32>) {
  // expected-error @+1 {{seq_lens dim 0 3 must equal q dim 0 (B) 4}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<3xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return
}

// -----

func.func @decode_seq_len_negative(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>) {
  %lens = arith.constant dense<[16, -1]> : tensor<2xi32>
  // expected-error @+1 {{seq_lens[1] = -1 must not be negative}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_seq_len_beyond_capacity(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>) {
  %lens = arith.constant dense<[0, 33]> : tensor<2xi32>
  // expected-error @+1 {{seq_lens[1] = 33 exceeds the block_table capacity 32 (2 pages of 16)}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

// Causal with Sq = 2 query rows needs at least 2 cache rows (0 = empty is fine).
func.func @decode_causal_short_seq_len(%q: tensor<2x2x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>) {
  %lens = arith.constant dense<[0, 1]> : tensor<2xi32>
  // expected-error @+1 {{causal decode needs seq_lens[1] = 1 >= Sq 2 (the query rows are the last Sq cache rows)}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 causal
      : (tensor<2x2x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x4x64xf32>, tensor<2x4x2xf32>)
  return
}

// -----

func.func @decode_out_batch(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{out dim 0 3 must equal q dim 0 2}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<3x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_out_query_rows(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{out dim 1 2 must equal q dim 1 1}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @decode_out_heads(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{out dim 2 128 must equal q dim 2 16}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
      : (tensor<4x1x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x1x128x512xbf16>, tensor<4x16x1xf32>)
  return
}

// -----

func.func @decode_lse_batch(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{lse dim 0 3 must equal q dim 0 (B) 2}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<3x4x1xf32>)
  return
}

// -----

// lse is [B, N, Sq], not [B, Sq, N].
func.func @decode_lse_heads(%q: tensor<4x2x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{lse dim 1 2 must equal q dim 2 (N) 16}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
      : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x2x16x512xbf16>, tensor<4x2x16xf32>)
  return
}

// -----

func.func @decode_lse_query_rows(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{lse dim 2 2 must equal q dim 1 (Sq) 1}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x2xf32>)
  return
}

//===----------------------------------------------------------------------===//
// mla.decode_partial
//===----------------------------------------------------------------------===//

// -----

func.func @decode_partial_partial_out_rank(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_out must have rank 5 ([num_splits, B, Sq, N, L]), got 'tensor<2x1x4x64xf32>'}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x2x4x1xf32>)
  return
}

// -----

func.func @decode_partial_partial_lse_rank(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_lse must have rank 4 ([num_splits, B, N, Sq]), got 'tensor<2x4x1xf32>'}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

// ODS type constraint: partial states are f32.
func.func @decode_partial_partial_out_bf16(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit float values, but got 'tensor<4x4x1x16x512xbf16>'}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 4
      : (tensor<4x1x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x4x1x16x512xbf16>, tensor<4x4x16x1xf32>)
  return
}

// -----

func.func @decode_partial_num_splits(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{num_splits -2 must be positive}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits -2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>)
  return
}

// -----

// decode_partial shares decode's input checks (scale, cache, tables, causal).
func.func @decode_partial_scale(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{softmax scale -1.250000e-01 must be positive and finite}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale -0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>)
  return
}

// -----

func.func @decode_partial_causal_short_seq_len(%q: tensor<4x2x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>) {
  %lens = arith.constant dense<[100, 1, 2, 0]> : tensor<4xi32>
  // expected-error @+1 {{causal decode needs seq_lens[1] = 1 >= Sq 2}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal num_splits 4
      : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x4x2x16x512xf32>, tensor<4x4x16x2xf32>)
  return
}

// -----

func.func @decode_partial_partial_out_splits(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_out dim 0 2 must equal num_splits 4}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 4
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x1x4x64xf32>, tensor<4x2x4x1xf32>)
  return
}

// -----

func.func @decode_partial_partial_lse_splits(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_lse dim 0 4 must equal num_splits 2}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x1x4x64xf32>, tensor<4x2x4x1xf32>)
  return
}

// -----

func.func @decode_partial_partial_out_batch(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_out dim 1 3 must equal q dim 0 2}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x3x1x4x64xf32>, tensor<2x2x4x1xf32>)
  return
}

// -----

func.func @decode_partial_partial_out_query_rows(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_out dim 2 2 must equal q dim 1 1}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x2x4x64xf32>, tensor<2x2x4x1xf32>)
  return
}

// -----

func.func @decode_partial_partial_out_heads(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_out dim 3 8 must equal q dim 2 4}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x1x8x64xf32>, tensor<2x2x4x1xf32>)
  return
}

// -----

func.func @decode_partial_partial_lse_batch(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_lse dim 1 3 must equal q dim 0 (B) 2}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x1x4x64xf32>, tensor<2x3x4x1xf32>)
  return
}

// -----

func.func @decode_partial_partial_lse_heads(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{partial_lse dim 2 8 must equal q dim 2 (N) 4}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x1x4x64xf32>, tensor<2x2x8x1xf32>)
  return
}

// -----

func.func @decode_partial_partial_lse_sq(%q: tensor<4x2x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{partial_lse dim 3 1 must equal q dim 1 (Sq) 2}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal num_splits 4
      : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x4x2x16x512xf32>, tensor<4x4x16x1xf32>)
  return
}

//===----------------------------------------------------------------------===//
// mla.combine
//===----------------------------------------------------------------------===//

// -----

func.func @combine_partial_out_rank(%po: tensor<2x2x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{partial_out must have rank 5 ([num_splits, B, Sq, N, L]), got 'tensor<2x2x4x64xf32>'}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @combine_partial_lse_rank(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4xf32>) {
  // expected-error @+1 {{partial_lse must have rank 4 ([num_splits, B, N, Sq]), got 'tensor<2x2x4xf32>'}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4xf32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @combine_out_rank(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{out must have rank 4 ([B, Sq, N, L]), got 'tensor<2x4x64xf32>'}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<2x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @combine_lse_rank(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{lse must have rank 3 ([B, N, Sq]), got 'tensor<2x4xf32>'}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<2x1x4x64xf32>, tensor<2x4xf32>)
  return
}

// -----

// ODS type constraint: partial states are f32.
func.func @combine_partial_out_bf16(%po: tensor<4x4x1x16x512xbf16>, %pl: tensor<4x4x16x1xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float values, but got 'tensor<4x4x1x16x512xbf16>'}}
  %o, %lse = mla.combine %po, %pl : (tensor<4x4x1x16x512xbf16>, tensor<4x4x16x1xf32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return
}

// -----

func.func @combine_partial_lse_splits(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<3x2x4x1xf32>) {
  // expected-error @+1 {{partial_lse dim 0 3 must equal partial_out dim 0 (splits) 2}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<3x2x4x1xf32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @combine_partial_lse_batch(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x3x4x1xf32>) {
  // expected-error @+1 {{partial_lse dim 1 3 must equal partial_out dim 1 (B) 2}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x3x4x1xf32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

// partial_lse in the out order [S, B, Sq, N] instead of [S, B, N, Sq].
func.func @combine_partial_lse_heads(%po: tensor<4x4x2x16x512xf32>, %pl: tensor<4x4x2x16xf32>) {
  // expected-error @+1 {{partial_lse dim 2 2 must equal partial_out dim 3 (N) 16}}
  %o, %lse = mla.combine %po, %pl : (tensor<4x4x2x16x512xf32>, tensor<4x4x2x16xf32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
  return
}

// -----

func.func @combine_partial_lse_query_rows(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x2xf32>) {
  // expected-error @+1 {{partial_lse dim 3 2 must equal partial_out dim 2 (Sq) 1}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x2xf32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @combine_out_batch(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{out dim 0 3 must equal partial_out dim 1 2}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<3x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @combine_out_query_rows(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{out dim 1 2 must equal partial_out dim 2 1}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<2x2x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @combine_out_heads(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{out dim 2 8 must equal partial_out dim 3 4}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<2x1x8x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

// The combined output is L wide, not L + R.
func.func @combine_out_latent(%po: tensor<4x4x1x16x512xf32>, %pl: tensor<4x4x16x1xf32>) {
  // expected-error @+1 {{out dim 3 576 must equal partial_out dim 4 512}}
  %o, %lse = mla.combine %po, %pl : (tensor<4x4x1x16x512xf32>, tensor<4x4x16x1xf32>) -> (tensor<4x1x16x576xbf16>, tensor<4x16x1xf32>)
  return
}

// -----

func.func @combine_lse_batch(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{lse dim 0 3 must equal partial_lse dim 1 2}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<2x1x4x64xf32>, tensor<3x4x1xf32>)
  return
}

// -----

func.func @combine_lse_heads(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{lse dim 1 8 must equal partial_lse dim 2 4}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<2x1x4x64xf32>, tensor<2x8x1xf32>)
  return
}

// -----

func.func @combine_lse_query_rows(%po: tensor<2x2x1x4x64xf32>, %pl: tensor<2x2x4x1xf32>) {
  // expected-error @+1 {{lse dim 2 2 must equal partial_lse dim 3 1}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x2x1x4x64xf32>, tensor<2x2x4x1xf32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x2xf32>)
  return
}

//===----------------------------------------------------------------------===//
// mla.mha
//===----------------------------------------------------------------------===//

// -----

func.func @mha_q_rank(%q: tensor<10x96xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{q must have rank 3 ([T, N, P+R]), got 'tensor<10x96xf32>'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x96xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_k_rank(%q: tensor<10x4x24xf32>, %k: tensor<30x96xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{k must have rank 3 ([S, N, P+R]), got 'tensor<30x96xf32>'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x96xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_v_rank(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x32xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{v must have rank 3 ([S, N, V]), got 'tensor<30x32xf32>'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x32xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_out_rank(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{out must have rank 3 ([T, N, V]), got 'tensor<10x32xf32>'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x32xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_lse_rank(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{lse must have rank 2 ([N, T]), got 'tensor<10x4x1xf32>'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<10x4x1xf32>)
  return
}

// -----

// 0x7F800000 is +inf.
func.func @mha_scale(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{softmax scale INF must be positive and finite}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0x7F800000
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_out_element_type(%q: tensor<10x128x192xbf16>, %k: tensor<30x128x192xbf16>, %v: tensor<30x128x128xbf16>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{out element type 'f32' must match q element type 'bf16'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.0721687824 causal
      : (tensor<10x128x192xbf16>, tensor<30x128x192xbf16>, tensor<30x128x128xbf16>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x128x128xf32>, tensor<128x10xf32>)
  return
}

// -----

func.func @mha_k_heads(%q: tensor<10x4x24xf32>, %k: tensor<30x2x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{k dim 1 2 must equal q dim 1 (N) 4}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x2x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_v_heads(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x2x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{v dim 1 2 must equal q dim 1 (N) 4}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x2x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_k_width(%q: tensor<10x4x24xf32>, %k: tensor<30x4x16xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{k dim 2 16 must equal q dim 2 (P+R) 24}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x16xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_v_rows(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<20x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{v dim 0 20 must equal k dim 0 (S) 30}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<20x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_out_tokens(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{out dim 0 9 must equal q dim 0 (T) 10}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<9x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_out_heads(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{out dim 1 2 must equal q dim 1 (N) 4}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x2x8xf32>, tensor<4x10xf32>)
  return
}

// -----

// out is V wide, not P+R.
func.func @mha_out_width(%q: tensor<10x128x192xbf16>, %k: tensor<30x128x192xbf16>, %v: tensor<30x128x128xbf16>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{out dim 2 192 must equal v dim 2 (V) 128}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.0721687824 causal
      : (tensor<10x128x192xbf16>, tensor<30x128x192xbf16>, tensor<30x128x128xbf16>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x128x192xbf16>, tensor<128x10xf32>)
  return
}

// -----

// lse is [N, T], not [T, N].
func.func @mha_lse_heads(%q: tensor<10x128x192xbf16>, %k: tensor<30x128x192xbf16>, %v: tensor<30x128x128xbf16>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{lse dim 0 10 must equal q dim 1 (N) 128}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.0721687824 causal
      : (tensor<10x128x192xbf16>, tensor<30x128x192xbf16>, tensor<30x128x128xbf16>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x128x128xbf16>, tensor<10x128xf32>)
  return
}

// -----

func.func @mha_lse_tokens(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{lse dim 1 9 must equal q dim 0 (T) 10}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x9xf32>)
  return
}

// -----

func.func @mha_cu_seqlens_q_rank(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3x1xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{cu_seqlens_q must have rank 1 ([B+1]), got 'tensor<3x1xi32>'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3x1xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_cu_seqlens_q_empty(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<0xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{cu_seqlens_q dim 0 0 must be positive}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<0xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_cu_seqlens_q_start(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuk: tensor<3xi32>) {
  %cuq = arith.constant dense<[1, 5, 10]> : tensor<3xi32>
  // expected-error @+1 {{cu_seqlens_q must start at 0 and never decrease, but cu_seqlens_q[0] = 1}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_cu_seqlens_k_decreasing(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>) {
  %cuk = arith.constant dense<[0, 20, 10]> : tensor<3xi32>
  // expected-error @+1 {{cu_seqlens_k must start at 0 and never decrease, but cu_seqlens_k[2] = 10}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_cu_seqlens_q_beyond_tokens(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuk: tensor<3xi32>) {
  %cuq = arith.constant dense<[0, 5, 11]> : tensor<3xi32>
  // expected-error @+1 {{cu_seqlens_q ends at 11 beyond q dim 0 (T) 10}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_cu_seqlens_k_beyond_rows(%q: tensor<10x128x192xbf16>, %k: tensor<30x128x192xbf16>, %v: tensor<30x128x128xbf16>, %cuq: tensor<3xi32>) {
  %cuk = arith.constant dense<[0, 10, 31]> : tensor<3xi32>
  // expected-error @+1 {{cu_seqlens_k ends at 31 beyond k dim 0 (S) 30}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.0721687824 causal
      : (tensor<10x128x192xbf16>, tensor<30x128x192xbf16>, tensor<30x128x128xbf16>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x128x128xbf16>, tensor<128x10xf32>)
  return
}

// -----

func.func @mha_cu_seqlens_batch(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<4xi32>) {
  // expected-error @+1 {{cu_seqlens_k dim 0 4 must equal cu_seqlens_q dim 0 3}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.125
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<4xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

//===----------------------------------------------------------------------===//
// mla.merge_states
//===----------------------------------------------------------------------===//

// -----

func.func @merge_states_out_a_rank(%oa: tensor<10x32xf32>, %la: tensor<4x10xf32>, %ob: tensor<10x32xf32>, %lb: tensor<4x10xf32>) {
  // expected-error @+1 {{out_a must have rank 3 ([T, N, H]), got 'tensor<10x32xf32>'}}
  %o, %lse = mla.merge_states %oa, %la, %ob, %lb
      : (tensor<10x32xf32>, tensor<4x10xf32>, tensor<10x32xf32>, tensor<4x10xf32>) -> (tensor<10x32xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @merge_states_lse_a_rank(%oa: tensor<10x4x8xf32>, %la: tensor<40xf32>, %ob: tensor<10x4x8xf32>, %lb: tensor<40xf32>) {
  // expected-error @+1 {{lse_a must have rank 2 ([N, T]), got 'tensor<40xf32>'}}
  %o, %lse = mla.merge_states %oa, %la, %ob, %lb
      : (tensor<10x4x8xf32>, tensor<40xf32>, tensor<10x4x8xf32>, tensor<40xf32>) -> (tensor<10x4x8xf32>, tensor<40xf32>)
  return
}

// -----

func.func @merge_states_out_b_type(%oa: tensor<10x128x128xbf16>, %la: tensor<128x10xf32>, %ob: tensor<10x128x128xf32>, %lb: tensor<128x10xf32>) {
  // expected-error @+1 {{out_b and out must have out_a's type 'tensor<10x128x128xbf16>'}}
  %o, %lse = mla.merge_states %oa, %la, %ob, %lb
      : (tensor<10x128x128xbf16>, tensor<128x10xf32>, tensor<10x128x128xf32>, tensor<128x10xf32>) -> (tensor<10x128x128xbf16>, tensor<128x10xf32>)
  return
}

// -----

func.func @merge_states_out_type(%oa: tensor<10x4x8xf32>, %la: tensor<4x10xf32>, %ob: tensor<10x4x8xf32>, %lb: tensor<4x10xf32>) {
  // expected-error @+1 {{out_b and out must have out_a's type 'tensor<10x4x8xf32>'}}
  %o, %lse = mla.merge_states %oa, %la, %ob, %lb
      : (tensor<10x4x8xf32>, tensor<4x10xf32>, tensor<10x4x8xf32>, tensor<4x10xf32>) -> (tensor<10x4x16xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @merge_states_lse_b_type(%oa: tensor<10x4x8xf32>, %la: tensor<4x10xf32>, %ob: tensor<10x4x8xf32>, %lb: tensor<4x9xf32>) {
  // expected-error @+1 {{lse_b and lse must have lse_a's type 'tensor<4x10xf32>'}}
  %o, %lse = mla.merge_states %oa, %la, %ob, %lb
      : (tensor<10x4x8xf32>, tensor<4x10xf32>, tensor<10x4x8xf32>, tensor<4x9xf32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

// lse is [N, T], not [T, N].
func.func @merge_states_lse_heads(%oa: tensor<10x128x128xbf16>, %la: tensor<10x128xf32>, %ob: tensor<10x128x128xbf16>, %lb: tensor<10x128xf32>) {
  // expected-error @+1 {{lse_a dim 0 10 must equal out_a dim 1 (N) 128}}
  %o, %lse = mla.merge_states %oa, %la, %ob, %lb
      : (tensor<10x128x128xbf16>, tensor<10x128xf32>, tensor<10x128x128xbf16>, tensor<10x128xf32>) -> (tensor<10x128x128xbf16>, tensor<10x128xf32>)
  return
}

// -----

func.func @merge_states_lse_tokens(%oa: tensor<10x4x8xf32>, %la: tensor<4x9xf32>, %ob: tensor<10x4x8xf32>, %lb: tensor<4x9xf32>) {
  // expected-error @+1 {{lse_a dim 1 9 must equal out_a dim 0 (T) 10}}
  %o, %lse = mla.merge_states %oa, %la, %ob, %lb
      : (tensor<10x4x8xf32>, tensor<4x9xf32>, tensor<10x4x8xf32>, tensor<4x9xf32>) -> (tensor<10x4x8xf32>, tensor<4x9xf32>)
  return
}

//===----------------------------------------------------------------------===//
// mla.prefill
//===----------------------------------------------------------------------===//

// -----

func.func @prefill_q_rank(%q: tensor<10x72xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{q must have rank 3 ([T, N, P+R]), got 'tensor<10x72xf32>'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x72xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_kv_c_rank(%q: tensor<10x3x24xf32>, %kv: tensor<10x1x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_c must have rank 2 ([T, L]), got 'tensor<10x1x64xf32>'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x1x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_out_rank(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{out must have rank 3 ([T, N, V]), got 'tensor<10x15xf32>'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x15xf32>
  return
}

// -----

func.func @prefill_scale(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{softmax scale -1.250000e-01 must be positive and finite}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale -0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_out_element_type(%q: tensor<10x128x192xbf16>, %kv: tensor<10x512xbf16>, %pe: tensor<10x1x64xbf16>, %w: tensor<32768x512xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{out element type 'f32' must match q element type 'bf16'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 workspace_rows 4096
      : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x64xbf16>, tensor<32768x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xf32>
  return
}

// -----

func.func @prefill_workspace_rows_zero(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{workspace_rows 0 must be positive}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 workspace_rows 0
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

// A negative budget must not wrap around to a huge unsigned one.
func.func @prefill_workspace_rows_negative(%q: tensor<10x128x192xbf16>, %kv: tensor<10x512xbf16>, %pe: tensor<10x1x64xbf16>, %w: tensor<32768x512xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{workspace_rows -4096 must be positive}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 workspace_rows -4096
      : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x64xbf16>, tensor<32768x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xbf16>
  return
}

// -----

func.func @prefill_k_pe_rank(%q: tensor<10x128x192xbf16>, %kv: tensor<10x512xbf16>, %pe: tensor<10x1x1x64xbf16>, %w: tensor<32768x512xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{k_pe must have rank 2 ([T, R]) or 3 ([T, 1, R]), got 'tensor<10x1x1x64xbf16>'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 workspace_rows 4096
      : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x1x64xbf16>, tensor<32768x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xbf16>
  return
}

// -----

func.func @prefill_k_pe_heads(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x3x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{k_pe dim 1 3 must equal the single KV head count 1}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x3x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_k_pe_tokens(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<9x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{k_pe dim 0 9 must equal the token count 10}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<9x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_kv_c_tokens(%q: tensor<10x3x24xf32>, %kv: tensor<9x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_c dim 0 9 must equal q dim 0 (T) 10}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<9x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_out_tokens(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{out dim 0 9 must equal q dim 0 (T) 10}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<9x3x5xf32>
  return
}

// -----

func.func @prefill_out_heads(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{out dim 1 2 must equal q dim 1 (N) 3}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x2x5xf32>
  return
}

// -----

// q holds only the RoPE part (R = 16).
func.func @prefill_no_nope(%q: tensor<10x3x16xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{q last dim - R (the nope width P) 0 must be positive}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x16xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_kv_b_proj_rank(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<3x13x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_b_proj must have rank 2 ([N*(P+V), L]), got 'tensor<3x13x64xf32>'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<3x13x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_kv_b_proj_latent(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x32xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_b_proj dim 1 32 must equal kv_c dim 1 (L) 64}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x32xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_kv_b_proj_rows(%q: tensor<10x128x192xbf16>, %kv: tensor<10x512xbf16>, %pe: tensor<10x1x64xbf16>, %w: tensor<24576x512xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_b_proj dim 0 24576 must equal N*(P+V) = 32768}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 workspace_rows 4096
      : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x64xbf16>, tensor<24576x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xbf16>
  return
}

// -----

func.func @prefill_cache_element_type(%q: tensor<10x128x192xbf16>, %kv: tensor<10x512xbf16>, %pe: tensor<10x1x64xbf16>, %w: tensor<32768x512xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{cache element type 'bf16' does not match layout format fp8_e4m3_token (expects 'i8')}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> scale 0.0721687824 workspace_rows 4096
      : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x64xbf16>, tensor<32768x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xbf16>
  return
}

// -----

func.func @prefill_cache_row(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x64xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_c width + k_pe width 80 must equal the cache row width 64}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x64xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_block_table_rank(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{block_table must have rank 2 ([B, maxPages]), got 'tensor<4xi32>'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_seq_lens_rank(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2x1xi32>) {
  // expected-error @+1 {{seq_lens must have rank 1 ([B]), got 'tensor<2x1xi32>'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2x1xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_seq_lens_batch(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<3xi32>) {
  // expected-error @+1 {{seq_lens dim 0 3 must equal block_table dim 0 (B) 2}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<3xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_seq_len_negative(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>) {
  %lens = arith.constant dense<[-5, 5]> : tensor<2xi32>
  // expected-error @+1 {{seq_lens[0] = -5 must not be negative}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_seq_len_beyond_capacity(%q: tensor<10x128x192xbf16>, %kv: tensor<10x512xbf16>, %pe: tensor<10x1x64xbf16>, %w: tensor<32768x512xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>, %qsl: tensor<3xi32>) {
  %lens = arith.constant dense<[100, 2049]> : tensor<2xi32>
  // expected-error @+1 {{seq_lens[1] = 2049 exceeds the block_table capacity 2048 (32 pages of 64)}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 workspace_rows 4096
      : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x64xbf16>, tensor<32768x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xbf16>
  return
}

// -----

func.func @prefill_query_start_loc_rank(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3x1xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{query_start_loc must have rank 1 ([B+1]), got 'tensor<3x1xi32>'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3x1xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_query_start_loc_empty(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<0xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{query_start_loc dim 0 0 must be positive}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<0xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_query_start_loc_start(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  %qsl = arith.constant dense<[2, 5, 10]> : tensor<3xi32>
  // expected-error @+1 {{query_start_loc must start at 0 and never decrease, but query_start_loc[0] = 2}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_query_start_loc_decreasing(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  %qsl = arith.constant dense<[0, 5, 4]> : tensor<3xi32>
  // expected-error @+1 {{query_start_loc must start at 0 and never decrease, but query_start_loc[2] = 4}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_query_start_loc_beyond_tokens(%q: tensor<10x128x192xbf16>, %kv: tensor<10x512xbf16>, %pe: tensor<10x1x64xbf16>, %w: tensor<32768x512xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>, %lens: tensor<2xi32>) {
  %qsl = arith.constant dense<[0, 5, 12]> : tensor<3xi32>
  // expected-error @+1 {{query_start_loc ends at 12 beyond q dim 0 (T) 10}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 workspace_rows 4096
      : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x64xbf16>, tensor<32768x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xbf16>
  return
}

// -----

func.func @prefill_query_start_loc_batch(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{query_start_loc dim 0 2 must equal B + 1 = 3}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Element types of weights and operands must match the activations.
//===----------------------------------------------------------------------===//

func.func @absorb_q_weight_type(%q: tensor<8x3x24xf32>, %w: tensor<3x8x64xbf16>) {
  // expected-error @+1 {{w_uk_t element type 'bf16' must match q element type 'f32'}}
  %0 = mla.absorb_q %q, %w : tensor<8x3x24xf32>, tensor<3x8x64xbf16> -> tensor<8x3x80xf32>
  return
}

// -----

func.func @up_proj_out_weight_type(%o: tensor<8x3x64xf32>, %w: tensor<3x64x5xf16>) {
  // expected-error @+1 {{w_uv element type 'f16' must match o element type 'f32'}}
  %0 = mla.up_proj_out %o, %w : tensor<8x3x64xf32>, tensor<3x64x5xf16> -> tensor<8x15xf32>
  return
}

// -----

func.func @up_proj_kv_weight_type(%lat: tensor<10x64xf32>, %w: tensor<39x64xbf16>) {
  // expected-error @+1 {{kv_b_proj element type 'bf16' must match latent element type 'f32'}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<39x64xbf16> -> tensor<10x3x8xf32>, tensor<10x3x5xf32>
  return
}

// -----

func.func @up_proj_kv_result_type(%lat: tensor<10x64xf32>, %w: tensor<39x64xf32>) {
  // expected-error @+1 {{v element type 'bf16' must match latent element type 'f32'}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<39x64xf32> -> tensor<10x3x8xf32>, tensor<10x3x5xbf16>
  return
}

// -----

func.func @mha_k_type(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xbf16>, %v: tensor<30x4x8xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{k element type 'bf16' must match q element type 'f32'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.2
      : (tensor<10x4x24xf32>, tensor<30x4x24xbf16>, tensor<30x4x8xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @mha_v_type(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x8xf16>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{v element type 'f16' must match q element type 'f32'}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.2
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x8xf16>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x8xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @prefill_kv_b_proj_type(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<39x64xbf16>,
                                  %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_b_proj element type 'bf16' must match q element type 'f32'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32> scale 0.2
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<39x64xbf16>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_kv_c_type(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf16>, %pe: tensor<10x16xf32>, %w: tensor<39x64xf32>,
                             %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_c element type 'f16' must match q element type 'f32'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32> scale 0.2
      : (tensor<10x3x24xf32>, tensor<10x64xf16>, tensor<10x16xf32>, tensor<39x64xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @prefill_k_pe_type(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xbf16>, %w: tensor<39x64xf32>,
                             %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{k_pe element type 'bf16' must match q element type 'f32'}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32> scale 0.2
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xbf16>, tensor<39x64xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

// -----

func.func @gather_fp8_token_needs_latent_dim(%cache: tensor<8x16x88xi8>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<64x80xf32>) {
  // expected-error @+1 {{format fp8_e4m3_token needs 'latent_dim' (L): an element's scale depends on whether it is latent or RoPE}}
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_e4m3_token> into %ws
      : tensor<8x16x88xi8>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<64x80xf32>
  return
}

// -----

func.func @gather_latent_dim_range(%cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<64x80xf32>) {
  // expected-error @+1 {{latent_dim 80 must be positive and below the workspace row width 80}}
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32> latent_dim 80 into %ws
      : tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<64x80xf32>
  return
}

// -----

func.func @gather_ds_mla_latent_dim_mismatch(%cache: tensor<8x64x656xi8>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<64x576xf32>) {
  // expected-error @+1 {{the fp8_ds_mla row width for L = 384, R = 192 is 780 must equal the cache row width 656}}
  %r = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_ds_mla> latent_dim 384 into %ws
      : tensor<8x64x656xi8>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<64x576xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Split plans, plan_splits and attention
//===----------------------------------------------------------------------===//

func.func @split_plan_parts(%q: tensor<1x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  // expected-error @+1 {{num_sm_parts 0 must be positive}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 0>}
      : (tensor<1x1x3x80xf32>, tensor<4x16x80xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x3x64xf32>, tensor<1x3x1xf32>)
  return
}

// -----

func.func @split_plan_negative_bound(%q: tensor<1x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  // expected-error @+1 {{split bound 1 is negative (-3)}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 num_splits 1 {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 2, bounds = [0, -3]>}
      : (tensor<1x1x3x80xf32>, tensor<4x16x80xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x3x64xf32>, tensor<1x3x1xf32>)
  return
}

// -----

func.func @split_plan_needs_num_splits(%q: tensor<1x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  // expected-error @+1 {{a split_plan with bounds needs num_splits}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 2, bounds = [0, 20]>}
      : (tensor<1x1x3x80xf32>, tensor<4x16x80xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x3x64xf32>, tensor<1x3x1xf32>)
  return
}

// -----

func.func @split_plan_bounds_size(%q: tensor<2x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{split_plan bounds hold 3 values, expected B * (num_splits + 1) = 6}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 num_splits 2 {split_plan = #mla.split_plan<policy = heuristic, num_sm_parts = 2, bounds = [0, 10, 20]>}
      : (tensor<2x1x3x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x3x64xf32>, tensor<2x3x1xf32>)
  return
}

// -----

func.func @split_plan_start(%q: tensor<1x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  // expected-error @+1 {{split_plan bounds of request 0 must start at 0, got 4}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 num_splits 1 {split_plan = #mla.split_plan<policy = heuristic, num_sm_parts = 2, bounds = [4, 20]>}
      : (tensor<1x1x3x80xf32>, tensor<4x16x80xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x3x64xf32>, tensor<1x3x1xf32>)
  return
}

// -----

func.func @split_plan_decreasing(%q: tensor<1x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  // expected-error @+1 {{split_plan bounds of request 0 decrease at piece 1}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 num_splits 2 {split_plan = #mla.split_plan<policy = heuristic, num_sm_parts = 2, bounds = [0, 20, 10]>}
      : (tensor<1x1x3x80xf32>, tensor<4x16x80xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x3x64xf32>, tensor<1x3x1xf32>)
  return
}

// -----

func.func @split_plan_end(%q: tensor<1x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x2xi32>) {
  %lens = arith.constant dense<25> : tensor<1xi32>
  // expected-error @+1 {{split_plan bounds of request 0 end at 20, not at seq_lens[0] = 25}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 num_splits 2 {split_plan = #mla.split_plan<policy = heuristic, num_sm_parts = 2, bounds = [0, 10, 20]>}
      : (tensor<1x1x3x80xf32>, tensor<4x16x80xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x3x64xf32>, tensor<1x3x1xf32>)
  return
}

// -----

func.func @partial_bounds_rank(%q: tensor<2x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>, %bounds: tensor<6xi32>) {
  // expected-error @+1 {{split_bounds must have rank 2 ([B, num_splits + 1]), got 'tensor<6xi32>'}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = f32> scale 0.125 num_splits 2
      : (tensor<2x1x3x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<6xi32>) -> (tensor<2x2x1x3x64xf32>, tensor<2x2x3x1xf32>)
  return
}

// -----

func.func @partial_bounds_batch(%q: tensor<2x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>, %bounds: tensor<3x3xi32>) {
  // expected-error @+1 {{split_bounds dim 0 3 must equal q dim 0 (B) 2}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = f32> scale 0.125 num_splits 2
      : (tensor<2x1x3x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<3x3xi32>) -> (tensor<2x2x1x3x64xf32>, tensor<2x2x3x1xf32>)
  return
}

// -----

func.func @partial_bounds_splits(%q: tensor<2x1x3x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>, %bounds: tensor<2x2xi32>) {
  // expected-error @+1 {{split_bounds dim 1 2 must equal num_splits + 1 = 3}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] bounds %bounds layout #mla.cache_layout<format = f32> scale 0.125 num_splits 2
      : (tensor<2x1x3x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<2x2xi32>) -> (tensor<2x2x1x3x64xf32>, tensor<2x2x3x1xf32>)
  return
}

// -----

func.func @plan_splits_rank(%lens: tensor<2x1xi32>) {
  // expected-error @+1 {{seq_lens must have rank 1 ([B]), got 'tensor<2x1xi32>'}}
  %b = mla.plan_splits %lens heads 16 rows 1 {plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>} : tensor<2x1xi32> -> tensor<2x9xi32>
  return
}

// -----

func.func @plan_splits_bounds_rank(%lens: tensor<2xi32>) {
  // expected-error @+1 {{bounds must have rank 2 ([B, S+1]), got 'tensor<18xi32>'}}
  %b = mla.plan_splits %lens heads 16 rows 1 {plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>} : tensor<2xi32> -> tensor<18xi32>
  return
}

// -----

func.func @plan_splits_heads(%lens: tensor<2xi32>) {
  // expected-error @+1 {{num_heads 0 must be positive}}
  %b = mla.plan_splits %lens heads 0 rows 1 {plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>} : tensor<2xi32> -> tensor<2x9xi32>
  return
}

// -----

func.func @plan_splits_rows(%lens: tensor<2xi32>) {
  // expected-error @+1 {{query_rows -1 must be positive}}
  %b = mla.plan_splits %lens heads 16 rows -1 {plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>} : tensor<2xi32> -> tensor<2x9xi32>
  return
}

// -----

func.func @plan_splits_batch(%lens: tensor<2xi32>) {
  // expected-error @+1 {{bounds dim 0 3 must equal seq_lens dim 0 (B) 2}}
  %b = mla.plan_splits %lens heads 16 rows 1 {plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>} : tensor<2xi32> -> tensor<3x9xi32>
  return
}

// -----

func.func @plan_splits_capacity(%lens: tensor<2xi32>) {
  // expected-error @+1 {{bounds dim 1 1 must hold at least one piece (S+1 >= 2)}}
  %b = mla.plan_splits %lens heads 16 rows 1 {plan = #mla.split_plan<policy = balanced, num_sm_parts = 8>} : tensor<2xi32> -> tensor<2x1xi32>
  return
}

// -----

func.func @attention_shares_prefill_rules(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<40x64xf32>,
                                          %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{kv_b_proj dim 0 40 must equal N*(P+V) = 39}}
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32> scale 0.2
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<40x64xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x5xf32>
  return
}

//===----------------------------------------------------------------------===//
// Zero head counts and feature widths (nothing to attend over or produce;
// the lowerings would build zero-length vectors)
//===----------------------------------------------------------------------===//

// -----

func.func @zero_cache_write_latent(%kv: tensor<4x0xf32>, %pe: tensor<4x16xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x16xf32>) {
  // expected-error @+1 {{kv_c dim 1 (L) is 0; head counts and feature widths must be at least 1}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x0xf32>, tensor<4x16xf32>, tensor<4xi32> into tensor<8x16x16xf32>
  return
}

// -----

func.func @zero_cache_write_rope(%kv: tensor<4x64xf32>, %pe: tensor<4x1x0xf32>, %slots: tensor<4xi32>, %cache: tensor<8x16x64xf32>) {
  // expected-error @+1 {{k_pe dim 2 (R) is 0; head counts and feature widths must be at least 1}}
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<4x64xf32>, tensor<4x1x0xf32>, tensor<4xi32> into tensor<8x16x64xf32>
  return
}

// -----

func.func @zero_gather_cache_row(%cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<64x0xf32>) {
  // expected-error @+1 {{workspace dim 1 (L+R) is 0; head counts and feature widths must be at least 1}}
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = f32> into %ws
      : tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<64x0xf32>
  return
}

// -----

func.func @zero_split_kv_b_proj_value(%w: tensor<24x64xf32>) {
  // expected-error @+1 {{w_uv dim 2 (V) is 0; head counts and feature widths must be at least 1}}
  %uk, %uv = mla.split_kv_b_proj %w : tensor<24x64xf32> -> tensor<3x8x64xf32>, tensor<3x64x0xf32>
  return
}

// -----

func.func @zero_absorb_q_heads(%q: tensor<4x0x24xf32>, %uk: tensor<0x8x64xf32>) {
  // expected-error @+1 {{q dim 1 (N) is 0; head counts and feature widths must be at least 1}}
  %0 = mla.absorb_q %q, %uk : tensor<4x0x24xf32>, tensor<0x8x64xf32> -> tensor<4x0x80xf32>
  return
}

// -----

func.func @zero_up_proj_out_latent(%o: tensor<4x3x0xf32>, %uv: tensor<3x0x5xf32>) {
  // expected-error @+1 {{o dim 2 (L) is 0; head counts and feature widths must be at least 1}}
  %0 = mla.up_proj_out %o, %uv : tensor<4x3x0xf32>, tensor<3x0x5xf32> -> tensor<4x15xf32>
  return
}

// -----

func.func @zero_up_proj_kv_nope(%lat: tensor<10x64xf32>, %w: tensor<15x64xf32>) {
  // expected-error @+1 {{k_nope dim 2 (P) is 0; head counts and feature widths must be at least 1}}
  %k, %v = mla.up_proj_kv %lat, %w : tensor<10x64xf32>, tensor<15x64xf32> -> tensor<10x3x0xf32>, tensor<10x3x5xf32>
  return
}

// -----

func.func @zero_decode_out_width(%q: tensor<1x1x1x0xf32>, %cache: tensor<4x16x0xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  // expected-error @+1 {{out dim 3 (L) is 0; head counts and feature widths must be at least 1}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
      : (tensor<1x1x1x0xf32>, tensor<4x16x0xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x1x1x0xf32>, tensor<1x1x1xf32>)
  return
}

// -----

func.func @zero_decode_heads(%q: tensor<2x1x0x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{q dim 2 (N) is 0; head counts and feature widths must be at least 1}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125
      : (tensor<2x1x0x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x0x64xf32>, tensor<2x0x1xf32>)
  return
}

// -----

func.func @zero_decode_partial_width(%q: tensor<1x1x1x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  // expected-error @+1 {{partial_out dim 4 (L) is 0; head counts and feature widths must be at least 1}}
  %o, %lse = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32> scale 0.125 num_splits 2
      : (tensor<1x1x1x80xf32>, tensor<4x16x80xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<2x1x1x1x0xf32>, tensor<2x1x1x1xf32>)
  return
}

// -----

func.func @zero_combine_width(%po: tensor<2x1x1x4x0xf32>, %pl: tensor<2x1x4x1xf32>) {
  // expected-error @+1 {{partial_out dim 4 (L) is 0; head counts and feature widths must be at least 1}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x1x1x4x0xf32>, tensor<2x1x4x1xf32>) -> (tensor<1x1x4x0xf32>, tensor<1x4x1xf32>)
  return
}

// -----

func.func @zero_mha_value(%q: tensor<10x4x24xf32>, %k: tensor<30x4x24xf32>, %v: tensor<30x4x0xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>) {
  // expected-error @+1 {{v dim 2 (V) is 0; head counts and feature widths must be at least 1}}
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.2
      : (tensor<10x4x24xf32>, tensor<30x4x24xf32>, tensor<30x4x0xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x4x0xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @zero_merge_states_width(%o: tensor<10x4x0xf32>, %l: tensor<4x10xf32>) {
  // expected-error @+1 {{out_a dim 2 (H) is 0; head counts and feature widths must be at least 1}}
  %m, %ml = mla.merge_states %o, %l, %o, %l
      : (tensor<10x4x0xf32>, tensor<4x10xf32>, tensor<10x4x0xf32>, tensor<4x10xf32>) -> (tensor<10x4x0xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @zero_prefill_value(%q: tensor<10x3x24xf32>, %kv: tensor<10x64xf32>, %pe: tensor<10x16xf32>, %w: tensor<24x64xf32>,
                              %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{out dim 2 (V) is 0; head counts and feature widths must be at least 1}}
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32> scale 0.2
      : (tensor<10x3x24xf32>, tensor<10x64xf32>, tensor<10x16xf32>, tensor<24x64xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x3x0xf32>
  return
}

//===----------------------------------------------------------------------===//
// Decode context parallelism: #mla.dcp_shard, dcp_all_gather, dcp_combine
//===----------------------------------------------------------------------===//

// -----

func.func @dcp_shard_rank(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{rank 2 must be in [0, world_size = 2)}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 2, rank = 2, interleave = 1> scale 0.125 num_splits 1
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<1x2x1x4x64xf32>, tensor<1x2x4x1xf32>)
  return
}

// -----

func.func @dcp_shard_world(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{world_size 0 must be positive}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 0, rank = 0, interleave = 1> scale 0.125 num_splits 1
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<1x2x1x4x64xf32>, tensor<1x2x4x1xf32>)
  return
}

// -----

func.func @dcp_shard_interleave(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{interleave 0 must be positive (tokens per run; vLLM's default is 1)}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 2, rank = 0, interleave = 0> scale 0.125 num_splits 1
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<1x2x1x4x64xf32>, tensor<1x2x4x1xf32>)
  return
}

// -----

// 33 global tokens put 17 on rank 0 of 2 (token interleave), more than one
// local page of 16 holds; without the shard they would not fit 2 pages either.
func.func @dcp_shard_capacity(%q: tensor<1x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x1xi32>) {
  %lens = arith.constant dense<[33]> : tensor<1xi32>
  // expected-error @+1 {{seq_lens[0] = 33 puts 17 tokens on DCP rank 0 of 2, which exceeds the block_table capacity 16 (1 pages of 16)}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 2, rank = 0, interleave = 1> scale 0.125 num_splits 1
      : (tensor<1x1x4x80xf32>, tensor<4x16x80xf32>, tensor<1x1xi32>, tensor<1xi32>) -> (tensor<1x1x1x4x64xf32>, tensor<1x1x4x1xf32>)
  return
}

// -----

func.func @dcp_combine_ranks(%go: tensor<2x3x1x4x64xf32>, %gl: tensor<4x3x4x1xf32>) {
  // expected-error @+1 {{gathered_lse dim 0 4 must equal gathered_out dim 0 (ranks) 2}}
  %o, %l = mla.dcp_combine %go, %gl : (tensor<2x3x1x4x64xf32>, tensor<4x3x4x1xf32>) -> (tensor<3x1x4x64xf32>, tensor<3x4x1xf32>)
  return
}

// -----

func.func @dcp_combine_rank_axis(%go: tensor<3x1x4x64xf32>, %gl: tensor<2x3x4x1xf32>) {
  // expected-error @+1 {{gathered_out must have rank 5 ([world_size, B, Sq, N, L])}}
  %o, %l = mla.dcp_combine %go, %gl : (tensor<3x1x4x64xf32>, tensor<2x3x4x1xf32>) -> (tensor<3x1x4x64xf32>, tensor<3x4x1xf32>)
  return
}

// -----

func.func @dcp_combine_out(%go: tensor<2x3x1x4x64xf32>, %gl: tensor<2x3x4x1xf32>) {
  // expected-error @+1 {{out dim 3 32 must equal gathered_out dim 4 64}}
  %o, %l = mla.dcp_combine %go, %gl : (tensor<2x3x1x4x64xf32>, tensor<2x3x4x1xf32>) -> (tensor<3x1x4x32xf32>, tensor<3x4x1xf32>)
  return
}

// -----

func.func @dcp_all_gather_world(%o: tensor<3x1x4x64xf32>, %l: tensor<3x4x1xf32>) {
  // expected-error @+1 {{gathered_out dim 0 2 must equal world_size 4}}
  %go, %gl = mla.dcp_all_gather %o, %l world_size 4 : (tensor<3x1x4x64xf32>, tensor<3x4x1xf32>) -> (tensor<2x3x1x4x64xf32>, tensor<2x3x4x1xf32>)
  return
}

// -----

func.func @dcp_all_gather_positive(%o: tensor<3x1x4x64xf32>, %l: tensor<3x4x1xf32>) {
  // expected-error @+1 {{world_size 0 must be positive}}
  %go, %gl = mla.dcp_all_gather %o, %l world_size 0 : (tensor<3x1x4x64xf32>, tensor<3x4x1xf32>) -> (tensor<0x3x1x4x64xf32>, tensor<0x3x4x1xf32>)
  return
}

// -----

// Varlen decode: q [T, N, L+R] with query_start_loc [B+1].
func.func @decode_varlen_q_rank(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>, %qsl: tensor<3xi32>) {
  // expected-error @+1 {{q must have rank 3 ([T, N, L+R])}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<3xi32>) -> (tensor<2x4x64xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @decode_varlen_qsl_size(%q: tensor<3x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>, %qsl: tensor<2xi32>) {
  // expected-error @+1 {{query_start_loc dim 0 2 must equal block_table dim 0 (B) + 1 = 3}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<3x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<2xi32>) -> (tensor<3x4x64xf32>, tensor<3x4xf32>)
  return
}

// -----

// q_len > seq_len is an input error: seq_len 0 only takes q_b = 0.
func.func @decode_varlen_q_len_over_seq_len(%q: tensor<3x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>) {
  %lens = arith.constant dense<[2, 0]> : tensor<2xi32>
  %qsl = arith.constant dense<[0, 2, 3]> : tensor<3xi32>
  // expected-error @+1 {{request 1 has 1 query tokens but seq_lens[1] = 0 (seq_lens counts the query tokens)}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 causal
      : (tensor<3x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<3xi32>) -> (tensor<3x4x64xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @decode_varlen_too_many_tokens(%q: tensor<9x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<1x2xi32>, %lens: tensor<1xi32>) {
  %qsl = arith.constant dense<[0, 9]> : tensor<2xi32>
  // expected-error @+1 {{request 0 has 9 query tokens, more than max_query_len 8}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<9x4x80xf32>, tensor<4x16x80xf32>, tensor<1x2xi32>, tensor<1xi32>, tensor<2xi32>) -> (tensor<9x4x64xf32>, tensor<9x4xf32>)
  return
}

// -----

func.func @decode_varlen_decreasing(%q: tensor<3x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  %qsl = arith.constant dense<[0, 3, 2]> : tensor<3xi32>
  // expected-error @+1 {{query_start_loc decreases at request 1}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<3x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<3xi32>) -> (tensor<3x4x64xf32>, tensor<3x4xf32>)
  return
}

// -----

func.func @decode_varlen_lse_layout(%q: tensor<3x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>, %qsl: tensor<3xi32>) {
  // expected-error @+1 {{lse dim 0 4 must equal q dim 0 3}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<3x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<3xi32>) -> (tensor<3x4x64xf32>, tensor<4x3xf32>)
  return
}

// -----

func.func @decode_max_query_len_uniform(%q: tensor<2x1x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{max_query_len needs query_start_loc}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 {max_query_len = 2 : i64}
      : (tensor<2x1x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @combine_packed_lse(%po: tensor<2x3x4x64xf32>, %pl: tensor<2x4x3xf32>) {
  // expected-error @+1 {{partial_lse dim 1 4 must equal partial_out dim 1 3}}
  %o, %lse = mla.combine %po, %pl : (tensor<2x3x4x64xf32>, tensor<2x4x3xf32>) -> (tensor<3x4x64xbf16>, tensor<3x4xf32>)
  return
}

// -----

// Decode context parallelism shards uniform decodes only.
func.func @decode_partial_varlen_shard(%q: tensor<3x4x80xf32>, %cache: tensor<4x16x80xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>, %qsl: tensor<3xi32>) {
  // expected-error @+1 {{a varlen decode_partial (query_start_loc) takes no dcp shard}}
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] query_start_loc %qsl layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 2, rank = 0, interleave = 1> scale 0.125 num_splits 1
      : (tensor<3x4x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>, tensor<3xi32>) -> (tensor<1x3x4x64xf32>, tensor<1x3x4xf32>)
  return
}
