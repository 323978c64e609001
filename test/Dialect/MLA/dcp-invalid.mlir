// RUN: mla-opt %s -split-input-file -verify-diagnostics --mla-dcp="world-size=2"
// RUN: not mla-opt %s -split-input-file --mla-dcp="world-size=2 interleave=1" 2>&1 | FileCheck %s --check-prefix=TOKENS
// RUN: not mla-opt %s -split-input-file --mla-dcp="world-size=2 rank=2" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not mla-opt %s -split-input-file --mla-dcp="world-size=2 rank=0" --convert-mla-to-linalg 2>&1 | FileCheck %s --check-prefix=TRANSPORT

// TOKENS: error: 'mla.decode' op mla-dcp without a rank views each rank's shard inside the global cache, which needs interleave = the page size (16), got 1; pass rank=R to build a rank program
// RANK: mla-dcp needs world-size >= 1 and rank in [-1, world-size), got world-size=2 rank=2
// TRANSPORT: 'mla.dcp_all_gather' op world_size 2 needs a collective transport, which the CPU lowering does not have: run multi-rank DCP through mla.dcp (Python, torch.distributed or multiprocessing), or lower the single-process form (mla-dcp without rank)

// Plans count global positions.
func.func @planned(%q: tensor<2x1x4x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{has a split_plan, whose pieces count global positions: run mla-dcp before mla-plan-splits}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 num_splits 2
      {split_plan = #mla.split_plan<policy = heuristic, num_sm_parts = 4>}
      : (tensor<2x1x4x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

// The single-process form views shards inside one cache: whole pages only.
func.func @dynamic_table(%q: tensor<2x1x4x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x?xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{mla-dcp without a rank needs a static block table column count to slice it per rank}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<2x1x4x80xf32>, tensor<8x16x80xf32>, tensor<2x?xi32>, tensor<2xi32>) -> (tensor<2x1x4x64xf32>, tensor<2x4x1xf32>)
  return
}

// -----

// A varlen decode's packed tokens are not sharded.
func.func @varlen(%q: tensor<3x4x80xf32>, %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %lens: tensor<2xi32>, %qsl: tensor<3xi32>) {
  // expected-error @+1 {{mla-dcp shards uniform decodes only; this decode has a query_start_loc (varlen)}}
  %o, %lse = mla.decode %q, %cache[%bt, %lens] query_start_loc %qsl layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125
      : (tensor<3x4x80xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<2xi32>, tensor<3xi32>) -> (tensor<3x4x64xf32>, tensor<3x4xf32>)
  return
}
