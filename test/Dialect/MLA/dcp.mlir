// RUN: mla-opt %s --split-input-file --mla-dcp="world-size=2" | FileCheck %s --check-prefix=SIM2
// RUN: mla-opt %s --split-input-file --mla-dcp="world-size=4" | FileCheck %s --check-prefix=SIM4
// RUN: mla-opt %s --split-input-file --mla-dcp="world-size=4 rank=3 interleave=1" | FileCheck %s --check-prefix=RANK
// RUN: mla-opt %s --split-input-file --mla-dcp="world-size=2 rank=1" | FileCheck %s --check-prefix=RANKPAGE
// RUN: mla-opt %s --split-input-file --mla-dcp="world-size=2" --convert-mla-to-linalg | FileCheck %s --check-prefix=LOWERED

// All ranks in one program: rank r reads block-table columns r, r + W, ...
// of the global cache (whole-page runs), its state gets a rank axis, and
// dcp_combine merges the concatenated states. The decode's one piece per
// request needs no combine per rank.
// SIM2-LABEL: func.func @causal
// SIM2: %[[T0:.*]] = tensor.extract_slice %arg2[0, 0] [2, 3] [1, 2] : tensor<2x5xi32> to tensor<2x3xi32>
// SIM2: %[[P0:.*]], %[[L0:.*]] = mla.decode_partial %arg0, %arg1[%[[T0]], %arg3] layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 2, rank = 0, interleave = 16> scale 1.250000e-01 causal num_splits 1
// SIM2-NOT: mla.combine
// SIM2: %[[T1:.*]] = tensor.extract_slice %arg2[0, 1] [2, 2] [1, 2] : tensor<2x5xi32> to tensor<2x2xi32>
// SIM2: mla.decode_partial %arg0, %arg1[%[[T1]], %arg3] layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 2, rank = 1, interleave = 16> scale 1.250000e-01 causal num_splits 1
// SIM2: %[[GO:.*]] = tensor.concat dim(0) %{{.*}}, %{{.*}} : (tensor<1x2x2x3x64xf32>, tensor<1x2x2x3x64xf32>) -> tensor<2x2x2x3x64xf32>
// SIM2: %[[GL:.*]] = tensor.concat dim(0) %{{.*}}, %{{.*}} : (tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> tensor<2x2x3x2xf32>
// SIM2: %[[O:.*]], %[[L:.*]] = mla.dcp_combine %[[GO]], %[[GL]] : (tensor<2x2x2x3x64xf32>, tensor<2x2x3x2xf32>) -> (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>)
// SIM2: return %[[O]], %[[L]]
// A rank past the table's last column still runs (an empty table: lse -inf).
// SIM4-LABEL: func.func @causal
// SIM4: tensor.extract_slice %arg2[0, 3] [2, 1] [1, 4] : tensor<2x5xi32> to tensor<2x1xi32>
// SIM4: mla.dcp_shard<world_size = 4, rank = 3, interleave = 16>
// SIM4: tensor.concat dim(0) {{.*}} -> tensor<4x2x2x3x64xf32>
// The rank program keeps the function's (now local) cache and table, gathers
// the rank's state and combines the gathered states.
// RANK-LABEL: func.func @causal
// RANK: %[[P:.*]], %[[PL:.*]] = mla.decode_partial %arg0, %arg1[%arg2, %arg3] layout #mla.cache_layout<format = f32, page_size = 16> shard #mla.dcp_shard<world_size = 4, rank = 3, interleave = 1> scale 1.250000e-01 causal num_splits 1
// RANK: %[[O:.*]] = tensor.collapse_shape %[[P]] {{\[\[}}0, 1], [2], [3], [4]] : tensor<1x2x2x3x64xf32> into tensor<2x2x3x64xf32>
// RANK: %[[L:.*]] = tensor.collapse_shape %[[PL]]
// RANK: %[[GO:.*]], %[[GL:.*]] = mla.dcp_all_gather %[[O]], %[[L]] world_size 4 : (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>) -> (tensor<4x2x2x3x64xf32>, tensor<4x2x3x2xf32>)
// RANK: mla.dcp_combine %[[GO]], %[[GL]]
// RANKPAGE-LABEL: func.func @causal
// RANKPAGE: shard #mla.dcp_shard<world_size = 2, rank = 1, interleave = 16>
// RANKPAGE: mla.dcp_all_gather {{.*}} world_size 2
// The CPU lowering takes the whole single-process form.
// LOWERED-LABEL: func.func @causal
// LOWERED-NOT: mla.
// LOWERED: return
func.func @causal(%q: tensor<2x2x3x80xf32>, %cache: tensor<12x16x80xf32>, %bt: tensor<2x5xi32>, %lens: tensor<2xi32>) -> (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.125 causal
      : (tensor<2x2x3x80xf32>, tensor<12x16x80xf32>, tensor<2x5xi32>, tensor<2xi32>) -> (tensor<2x2x3x64xf32>, tensor<2x3x2xf32>)
  return %o, %lse : tensor<2x2x3x64xf32>, tensor<2x3x2xf32>
}

// -----

// num_splits cuts each rank's local positions; a rank's pieces are merged by
// combine before its state joins the others. Output stays bf16, the rank
// states are f32.
// SIM2-LABEL: func.func @splits
// SIM2: %[[P:.*]], %[[PL:.*]] = mla.decode_partial {{.*}} shard #mla.dcp_shard<world_size = 2, rank = 0, interleave = 64> scale 0.0721687824 num_splits 4 : {{.*}} -> (tensor<4x4x1x16x512xf32>, tensor<4x4x16x1xf32>)
// SIM2: mla.combine %[[P]], %[[PL]] : (tensor<4x4x1x16x512xf32>, tensor<4x4x16x1xf32>) -> (tensor<4x1x16x512xf32>, tensor<4x16x1xf32>)
// SIM2: mla.dcp_combine {{.*}} -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
func.func @splits(%q: tensor<4x1x16x576xbf16>, %cache: tensor<64x64x576xbf16>, %bt: tensor<4x16xi32>, %lens: tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>) {
  %o, %lse = mla.decode %q, %cache[%bt, %lens] layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824 num_splits 4
      : (tensor<4x1x16x576xbf16>, tensor<64x64x576xbf16>, tensor<4x16xi32>, tensor<4xi32>) -> (tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>)
  return %o, %lse : tensor<4x1x16x512xbf16>, tensor<4x16x1xf32>
}
