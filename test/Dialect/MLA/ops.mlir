// RUN: mla-opt %s | FileCheck %s
// Round trip through the custom syntax twice and through the generic form:
// RUN: mla-opt %s | mla-opt | FileCheck %s
// RUN: mla-opt %s --mlir-print-op-generic | mla-opt | FileCheck %s

// CHECK: module attributes {mla.target = #mla.target<chip = sm90, num_sms = 132>}
module attributes {mla.target = #mla.target<chip = sm90, num_sms = 132>} {

// CHECK-LABEL: func @cache_write_bf16
// CHECK: mla.cache_write %{{.*}}, %{{.*}}, %{{.*}} layout #mla.cache_layout<format = bf16, page_size = 64> into %{{.*}} : tensor<4x512xbf16>, tensor<4x1x64xbf16>, tensor<4xi32> into tensor<16x64x576xbf16>
func.func @cache_write_bf16(%kv: tensor<4x512xbf16>, %pe: tensor<4x1x64xbf16>, %slots: tensor<4xi32>, %cache: tensor<16x64x576xbf16>) -> tensor<16x64x576xbf16> {
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = bf16, page_size = 64> into %cache
      : tensor<4x512xbf16>, tensor<4x1x64xbf16>, tensor<4xi32> into tensor<16x64x576xbf16>
  return %0 : tensor<16x64x576xbf16>
}

// CHECK-LABEL: func @cache_write_formats
// CHECK: layout #mla.cache_layout<format = f16> into %{{.*}} : tensor<4x512xf16>, tensor<4x64xf16>, tensor<4xi32> into tensor<8x16x576xf16>
// CHECK: layout #mla.cache_layout<format = f32, page_size = 128> into
// CHECK: layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 2.000000e-02 : f32> into %{{.*}} : {{.*}} into tensor<8x64x576xi8>
// CHECK: layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> into %{{.*}} : {{.*}} into tensor<8x64x584xi8>
// CHECK: layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %{{.*}} : {{.*}} into tensor<8x64x656xi8>
func.func @cache_write_formats(%kv16: tensor<4x512xf16>, %pe16: tensor<4x64xf16>, %kv: tensor<4x512xf32>, %pe: tensor<4x64xf32>, %slots: tensor<4xi32>,
                               %c16: tensor<8x16x576xf16>, %c32: tensor<8x128x576xf32>, %c8: tensor<8x64x576xi8>,
                               %ct: tensor<8x64x584xi8>, %cds: tensor<8x64x656xi8>) {
  %0 = mla.cache_write %kv16, %pe16, %slots layout #mla.cache_layout<format = f16> into %c16
      : tensor<4x512xf16>, tensor<4x64xf16>, tensor<4xi32> into tensor<8x16x576xf16>
  %1 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32, page_size = 128> into %c32
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x128x576xf32>
  %2 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3, page_size = 64, scale = 0.02 : f32> into %c8
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x64x576xi8>
  %3 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_e4m3_token, page_size = 64> into %ct
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x64x584xi8>
  %4 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %cds
      : tensor<4x512xf32>, tensor<4x64xf32>, tensor<4xi32> into tensor<8x64x656xi8>
  return
}

// Dynamic dimensions are accepted; their relations are checked once known.
// CHECK-LABEL: func @cache_write_dynamic
// CHECK: mla.cache_write {{.*}} : tensor<?x64xf32>, tensor<?x16xf32>, tensor<?xi32> into tensor<?x?x80xf32>
func.func @cache_write_dynamic(%kv: tensor<?x64xf32>, %pe: tensor<?x16xf32>, %slots: tensor<?xi32>, %cache: tensor<?x?x80xf32>) -> tensor<?x?x80xf32> {
  %0 = mla.cache_write %kv, %pe, %slots layout #mla.cache_layout<format = f32> into %cache
      : tensor<?x64xf32>, tensor<?x16xf32>, tensor<?xi32> into tensor<?x?x80xf32>
  return %0 : tensor<?x?x80xf32>
}

// CHECK-LABEL: func @gather_cache
// CHECK: mla.gather_cache %{{.*}}[%{{.*}}] starts %{{.*}} rows %{{.*}} layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %{{.*}} : tensor<8x64x656xi8>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<256x576xf32>
func.func @gather_cache(%cache: tensor<8x64x656xi8>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<256x576xf32>) -> tensor<256x576xf32> {
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_ds_mla, page_size = 64> into %ws
      : tensor<8x64x656xi8>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<256x576xf32>
  return %0 : tensor<256x576xf32>
}

// CHECK-LABEL: func @gather_cache_token
// CHECK: layout #mla.cache_layout<format = fp8_e4m3_token> latent_dim 512 into
func.func @gather_cache_token(%cache: tensor<8x64x584xi8>, %bt: tensor<2x4xi32>, %starts: tensor<2xi32>, %cu: tensor<3xi32>, %ws: tensor<256x576xf32>) -> tensor<256x576xf32> {
  %0 = mla.gather_cache %cache[%bt] starts %starts rows %cu layout #mla.cache_layout<format = fp8_e4m3_token> latent_dim 512 into %ws
      : tensor<8x64x584xi8>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32> into tensor<256x576xf32>
  return %0 : tensor<256x576xf32>
}

// CHECK-LABEL: func @projections
// CHECK: mla.split_kv_b_proj %{{.*}} : tensor<32768x512xbf16> -> tensor<128x128x512xbf16>, tensor<128x512x128xbf16>
// CHECK: mla.absorb_q %{{.*}}, %{{.*}} : tensor<8x128x192xbf16>, tensor<128x128x512xbf16> -> tensor<8x128x576xbf16>
// CHECK: mla.up_proj_out %{{.*}}, %{{.*}} : tensor<8x128x512xbf16>, tensor<128x512x128xbf16> -> tensor<8x16384xbf16>
// CHECK: mla.up_proj_kv %{{.*}}, %{{.*}} : tensor<100x512xbf16>, tensor<32768x512xbf16> -> tensor<100x128x128xbf16>, tensor<100x128x128xbf16>
func.func @projections(%w: tensor<32768x512xbf16>, %q: tensor<8x128x192xbf16>, %o: tensor<8x128x512xbf16>, %lat: tensor<100x512xbf16>) {
  %uk, %uv = mla.split_kv_b_proj %w : tensor<32768x512xbf16> -> tensor<128x128x512xbf16>, tensor<128x512x128xbf16>
  %qa = mla.absorb_q %q, %uk : tensor<8x128x192xbf16>, tensor<128x128x512xbf16> -> tensor<8x128x576xbf16>
  %out = mla.up_proj_out %o, %uv : tensor<8x128x512xbf16>, tensor<128x512x128xbf16> -> tensor<8x16384xbf16>
  %k, %v = mla.up_proj_kv %lat, %w : tensor<100x512xbf16>, tensor<32768x512xbf16> -> tensor<100x128x128xbf16>, tensor<100x128x128xbf16>
  return
}

// Small odd dims (N = 3, P = 8, V = 5, L = 64, R = 16) are as valid as DeepSeek-V3's.
// CHECK-LABEL: func @projections_odd
// CHECK: mla.split_kv_b_proj %{{.*}} : tensor<39x64xf32> -> tensor<3x8x64xf32>, tensor<3x64x5xf32>
func.func @projections_odd(%w: tensor<39x64xf32>) -> (tensor<3x8x64xf32>, tensor<3x64x5xf32>) {
  %uk, %uv = mla.split_kv_b_proj %w : tensor<39x64xf32> -> tensor<3x8x64xf32>, tensor<3x64x5xf32>
  return %uk, %uv : tensor<3x8x64xf32>, tensor<3x64x5xf32>
}

// CHECK-LABEL: func @decode
// CHECK: mla.decode %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
// CHECK: mla.decode {{.*}} layout #mla.cache_layout<format = fp8_e4m3_token> scale 0.0721687824 num_splits 8 :
func.func @decode(%q: tensor<4x2x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>,
                  %q1: tensor<4x1x16x576xf32>, %c8: tensor<64x64x584xi8>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal
      : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
  %o1, %lse1 = mla.decode %q1, %c8[%bt, %lens] layout #mla.cache_layout<format = fp8_e4m3_token> scale 0.0721687824 num_splits 8
      : (tensor<4x1x16x576xf32>, tensor<64x64x584xi8>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xf32>, tensor<4x16x1xf32>)
  return
}

// CHECK-LABEL: func @split_decode
// CHECK: %[[PO:.*]], %[[PL:.*]] = mla.decode_partial {{.*}} scale 0.0721687824 causal num_splits 4 : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x4x2x16x512xf32>, tensor<4x4x16x2xf32>)
// CHECK: mla.combine %[[PO]], %[[PL]] : (tensor<4x4x2x16x512xf32>, tensor<4x4x16x2xf32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
func.func @split_decode(%q: tensor<4x2x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>)
    -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>) {
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 causal num_splits 4
      : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x4x2x16x512xf32>, tensor<4x4x16x2xf32>)
  %o, %lse = mla.combine %po, %pl : (tensor<4x4x2x16x512xf32>, tensor<4x4x16x2xf32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
  return %o, %lse : tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>
}

// Split-KV plans: a static balanced plan on decode, run-time bounds from the
// host planner, and a partial decode that follows them.
// CHECK-LABEL: func @planned_decode
// CHECK: mla.decode {{.*}} num_splits 2 {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 4, bounds = [0, 64, 100, 0, 0, 0]>}
// CHECK: %[[B:.*]] = mla.plan_splits %{{.*}} heads 16 rows 1 {plan = #mla.split_plan<policy = heuristic, num_sm_parts = 132>} : tensor<2xi32> -> tensor<2x9xi32>
// CHECK: mla.decode_partial %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] bounds %[[B]] layout
func.func @planned_decode(%q: tensor<2x1x16x576xbf16>, %cache: tensor<8x64x576xbf16>, %bt: tensor<2x4xi32>, %dyn: tensor<2xi32>) {
  %lens = arith.constant dense<[100, 0]> : tensor<2xi32>
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 2
      {split_plan = #mla.split_plan<policy = balanced, num_sm_parts = 4, bounds = [0, 64, 100, 0, 0, 0]>}
      : (tensor<2x1x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x16x512xbf16>, tensor<2x16x1xf32>)
  %bounds = mla.plan_splits %dyn heads 16 rows 1 {plan = #mla.split_plan<policy = heuristic, num_sm_parts = 132>} : tensor<2xi32> -> tensor<2x9xi32>
  %po, %pl = mla.decode_partial %q, %cache[%bt, %dyn] bounds %bounds layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 8
      : (tensor<2x1x16x576xbf16>, tensor<8x64x576xbf16>, tensor<2x4xi32>, tensor<2xi32>, tensor<2x9xi32>) -> (tensor<8x2x1x16x512xf32>, tensor<8x2x16x1xf32>)
  return
}

// CHECK-LABEL: func @mixed_batch
// CHECK: mla.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.0721687824 workspace_rows 256 : (tensor<6x16x192xf32>
func.func @mixed_batch(%q: tensor<6x16x192xf32>, %kv: tensor<6x512xf32>, %pe: tensor<6x64xf32>, %w: tensor<4096x512xf32>,
                       %cache: tensor<64x16x576xf32>, %bt: tensor<3x16xi32>, %qsl: tensor<4xi32>, %lens: tensor<3xi32>) -> tensor<6x16x128xf32> {
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.0721687824 workspace_rows 256
      : (tensor<6x16x192xf32>, tensor<6x512xf32>, tensor<6x64xf32>, tensor<4096x512xf32>, tensor<64x16x576xf32>, tensor<3x16xi32>, tensor<4xi32>, tensor<3xi32>) -> tensor<6x16x128xf32>
  return %o : tensor<6x16x128xf32>
}

// CHECK-LABEL: func @prefill_parts
// CHECK: mla.mha %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale 0.0721687824 causal : (tensor<10x16x192xf32>, tensor<30x16x192xf32>, tensor<30x16x128xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x16x128xf32>, tensor<16x10xf32>)
// CHECK: mla.merge_states %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<10x16x128xf32>, tensor<16x10xf32>, tensor<10x16x128xf32>, tensor<16x10xf32>) -> (tensor<10x16x128xf32>, tensor<16x10xf32>)
func.func @prefill_parts(%q: tensor<10x16x192xf32>, %k: tensor<30x16x192xf32>, %v: tensor<30x16x128xf32>, %cuq: tensor<3xi32>, %cuk: tensor<3xi32>,
                         %oa: tensor<10x16x128xf32>, %la: tensor<16x10xf32>) -> (tensor<10x16x128xf32>, tensor<16x10xf32>) {
  %o, %lse = mla.mha %q, %k, %v, %cuq, %cuk scale 0.0721687824 causal
      : (tensor<10x16x192xf32>, tensor<30x16x192xf32>, tensor<30x16x128xf32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<10x16x128xf32>, tensor<16x10xf32>)
  %m, %ml = mla.merge_states %oa, %la, %o, %lse
      : (tensor<10x16x128xf32>, tensor<16x10xf32>, tensor<10x16x128xf32>, tensor<16x10xf32>) -> (tensor<10x16x128xf32>, tensor<16x10xf32>)
  return %m, %ml : tensor<10x16x128xf32>, tensor<16x10xf32>
}

// CHECK-LABEL: func @prefill
// CHECK: mla.prefill %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 workspace_rows 4096 : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x64xbf16>, tensor<32768x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xbf16>
func.func @prefill(%q: tensor<10x128x192xbf16>, %kv: tensor<10x512xbf16>, %pe: tensor<10x1x64xbf16>, %w: tensor<32768x512xbf16>,
                   %cache: tensor<64x64x576xbf16>, %bt: tensor<2x32xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<10x128x128xbf16> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 workspace_rows 4096
      : (tensor<10x128x192xbf16>, tensor<10x512xbf16>, tensor<10x1x64xbf16>, tensor<32768x512xbf16>, tensor<64x64x576xbf16>, tensor<2x32xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<10x128x128xbf16>
  return %o : tensor<10x128x128xbf16>
}

// Constant tables are checked against each other; these are consistent.
// CHECK-LABEL: func @constant_tables
// CHECK: mla.decode
func.func @constant_tables(%q: tensor<2x2x3x80xf32>, %cache: tensor<4x16x80xf32>) -> (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>) {
  %bt = arith.constant dense<[[0, 1], [2, 3]]> : tensor<2x2xi32>
  %lens = arith.constant dense<[0, 32]> : tensor<2xi32>
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 causal
      : (tensor<2x2x3x80xf32>, tensor<4x16x80xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>)
  return %o, %lse : tensor<2x2x3x64xf32>, tensor<2x3x2xf32>
}

// CHECK-LABEL: func @targets
// CHECK-SAME: t100 = #mla.target<chip = sm100>
// CHECK-SAME: tcpu = #mla.target<chip = cpu>
func.func @targets() attributes {t100 = #mla.target<chip = sm100>, tcpu = #mla.target<chip = cpu>} {
  return
}
}

// Decode context parallelism: rank 1 of 2's decode over its token shard,
// the all-gather of the rank states and their merge.
// CHECK-LABEL: func @dcp_rank
// CHECK: %[[PO:.*]], %[[PL:.*]] = mla.decode_partial {{.*}} layout #mla.cache_layout<format = bf16, page_size = 64> shard #mla.dcp_shard<world_size = 2, rank = 1, interleave = 1> scale 0.0721687824 causal num_splits 1 :
// CHECK: %[[GO:.*]], %[[GL:.*]] = mla.dcp_all_gather %{{.*}}, %{{.*}} world_size 2 : (tensor<4x2x16x512xf32>, tensor<4x16x2xf32>) -> (tensor<2x4x2x16x512xf32>, tensor<2x4x16x2xf32>)
// CHECK: mla.dcp_combine %[[GO]], %[[GL]] : (tensor<2x4x2x16x512xf32>, tensor<2x4x16x2xf32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
func.func @dcp_rank(%q: tensor<4x2x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>)
    -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>) {
  %po, %pl = mla.decode_partial %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> shard #mla.dcp_shard<world_size = 2, rank = 1, interleave = 1> scale 0.0721687824 causal num_splits 1
      : (tensor<4x2x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<1x4x2x16x512xf32>, tensor<1x4x16x2xf32>)
  %o, %l = mla.combine %po, %pl : (tensor<1x4x2x16x512xf32>, tensor<1x4x16x2xf32>) -> (tensor<4x2x16x512xf32>, tensor<4x16x2xf32>)
  %go, %gl = mla.dcp_all_gather %o, %l world_size 2 : (tensor<4x2x16x512xf32>, tensor<4x16x2xf32>) -> (tensor<2x4x2x16x512xf32>, tensor<2x4x16x2xf32>)
  %out, %lse = mla.dcp_combine %go, %gl : (tensor<2x4x2x16x512xf32>, tensor<2x4x16x2xf32>) -> (tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>)
  return %out, %lse : tensor<4x2x16x512xbf16>, tensor<4x16x2xf32>
}
