// RUN: mla-opt %s --mla-chunk-prefill --split-input-file | FileCheck %s
// RUN: mla-opt %s --mla-chunk-prefill=workspace-rows=24 --split-input-file | FileCheck %s --check-prefix=OPTION
// RUN: mla-opt %s --mla-chunk-prefill="max-model-len=100 max-num-seqs=4 page-size=16" --split-input-file | FileCheck %s --check-prefix=BUDGET
// RUN: mla-opt %s --mla-chunk-prefill="max-num-seqs=2048 page-size=64" --split-input-file | FileCheck %s --check-prefix=FLOOR

// The whole decomposition, with the workspace size from the op's attribute
// (which wins over the pass option).
// CHECK-LABEL: func.func @explicit_rows
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<5x3x24xf32>, %[[KV:[a-z0-9]+]]: tensor<5x64xf32>, %[[PE:[a-z0-9]+]]: tensor<5x1x16xf32>, %[[W:[a-z0-9]+]]: tensor<39x64xf32>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x80xf32>, %[[BT:[a-z0-9]+]]: tensor<2x4xi32>, %[[QSL:[a-z0-9]+]]: tensor<3xi32>, %[[LENS:[a-z0-9]+]]: tensor<2xi32>)
// New tokens: K = [k_nope | k_pe broadcast over the heads], causal mha.
// CHECK: %[[PE2:.*]] = tensor.collapse_shape %[[PE]] {{\[}}[0], [1, 2]] : tensor<5x1x16xf32> into tensor<5x16xf32>
// CHECK: %[[KN:.*]], %[[VN:.*]] = mla.up_proj_kv %[[KV]], %[[W]] : tensor<5x64xf32>, tensor<39x64xf32> -> tensor<5x3x8xf32>, tensor<5x3x5xf32>
// CHECK: %[[K0:.*]] = tensor.insert_slice %[[KN]] into %{{.*}}[0, 0, 0] [5, 3, 8] [1, 1, 1] : tensor<5x3x8xf32> into tensor<5x3x24xf32>
// CHECK: %[[KPE:.*]] = tensor.extract_slice %[[K0]][0, 0, 8] [5, 3, 16] [1, 1, 1]
// CHECK: %[[BC:.*]] = linalg.broadcast ins(%[[PE2]] : tensor<5x16xf32>) outs(%[[KPE]] : tensor<5x3x16xf32>) dimensions = [1]
// CHECK: %[[K:.*]] = tensor.insert_slice %[[BC]] into %[[K0]][0, 0, 8] [5, 3, 16] [1, 1, 1]
// CHECK: %[[ONEW:.*]], %[[LNEW:.*]] = mla.mha %[[Q]], %[[K]], %[[VN]], %[[QSL]], %[[QSL]] scale 2.000000e-01 causal
// Context lengths seq_lens[i] - q_len_i and the number of requests with
// context.
// CHECK: %[[PLAN:.*]]:2 = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<2xi32>, index)
// CHECK: tensor.extract %[[LENS]][%[[I]]]
// CHECK: arith.maxsi
// CHECK: tensor.insert
// The policy: share = W / n; a page multiple of it when a page fits per
// request, else one request at a time.
// CHECK: %[[N:.*]] = arith.maxsi %[[PLAN]]#1, %c1
// CHECK: %[[SHARE:.*]] = arith.divui %c40, %[[N]] : index
// CHECK: %[[TOGETHER:.*]] = arith.cmpi sge, %[[SHARE]], %c16 : index
// CHECK: %[[C:.*]] = arith.select %[[TOGETHER]], %{{.*}}, %{{.*}} : index
// CHECK: %[[G:.*]] = arith.select %[[TOGETHER]], %{{.*}}, %c1 : index
// Running context state (0, -inf) and the [W, L+R] workspace.
// CHECK: %[[OUT0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<5x3x5xf32>)
// CHECK: %[[LSE0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<3x5xf32>)
// CHECK: %[[WS0:.*]] = tensor.empty() : tensor<40x80xf32>
// CHECK: %[[GROUPS:.*]] = arith.ceildivui %c2, %[[G]] : index
// CHECK: %[[CTX:.*]]:3 = scf.for %{{.*}} = %{{.*}} to %[[GROUPS]] step %{{.*}} iter_args(%{{.*}} = %[[WS0]], %{{.*}} = %[[OUT0]], %{{.*}} = %[[LSE0]]) -> (tensor<40x80xf32>, tensor<5x3x5xf32>, tensor<3x5xf32>)
// CHECK: %[[LONGEST:.*]] = scf.for {{.*}} -> (index)
// CHECK: %[[CHUNKS:.*]] = arith.ceildivui %[[LONGEST]], %[[C]] : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[CHUNKS]] step %{{.*}} iter_args(%[[WS:.*]] = %{{.*}}, %[[OUT:.*]] = %{{.*}}, %[[LSE:.*]] = %{{.*}}) -> (tensor<40x80xf32>, tensor<5x3x5xf32>, tensor<3x5xf32>)
// cu_rows of this chunk, then gather, up-project the gathered rows only,
// attend (not causal) and merge.
// CHECK: %[[CU:.*]]:2 = scf.for {{.*}} -> (tensor<3xi32>, index)
// CHECK: arith.minsi %{{.*}}, %[[C]] : index
// CHECK: %[[STARTS:.*]] = linalg.fill ins(%{{.*}} : i32) outs(%{{.*}} : tensor<2xi32>)
// CHECK: %[[GATHERED:.*]] = mla.gather_cache %[[CACHE]][%[[BT]]] starts %[[STARTS]] rows %[[CU]]#0 layout #mla.cache_layout<format = f32, page_size = 16> latent_dim 64 into %[[WS]]
// CHECK: %[[LAT:.*]] = tensor.extract_slice %[[GATHERED]][0, 0] [%[[CU]]#1, 64] [1, 1] : tensor<40x80xf32> to tensor<?x64xf32>
// CHECK: %[[ROPE:.*]] = tensor.extract_slice %[[GATHERED]][0, 64] [%[[CU]]#1, 16] [1, 1] : tensor<40x80xf32> to tensor<?x16xf32>
// CHECK: %[[KC:.*]], %[[VC:.*]] = mla.up_proj_kv %[[LAT]], %[[W]] : tensor<?x64xf32>, tensor<39x64xf32> -> tensor<?x3x8xf32>, tensor<?x3x5xf32>
// CHECK: linalg.broadcast ins(%[[ROPE]] : tensor<?x16xf32>)
// CHECK: %[[KCTX:.*]] = tensor.insert_slice
// CHECK: %[[OC:.*]], %[[LC:.*]] = mla.mha %[[Q]], %[[KCTX]], %[[VC]], %[[QSL]], %[[CU]]#0 scale 2.000000e-01 :
// CHECK: %[[OM:.*]], %[[LM:.*]] = mla.merge_states %[[OUT]], %[[LSE]], %[[OC]], %[[LC]]
// CHECK: scf.yield %[[GATHERED]], %[[OM]], %[[LM]]
// Finally the context state merged with the new tokens' state.
// CHECK: %[[RES:.*]], %{{.*}} = mla.merge_states %[[CTX]]#1, %[[CTX]]#2, %[[ONEW]], %[[LNEW]]
// CHECK: return %[[RES]]
// OPTION-LABEL: func.func @explicit_rows
// OPTION: tensor.empty() : tensor<40x80xf32>
func.func @explicit_rows(%q: tensor<5x3x24xf32>, %kv: tensor<5x64xf32>, %pe: tensor<5x1x16xf32>, %w: tensor<39x64xf32>,
                         %cache: tensor<8x16x80xf32>, %bt: tensor<2x4xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<5x3x5xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.2 workspace_rows 40
      : (tensor<5x3x24xf32>, tensor<5x64xf32>, tensor<5x1x16xf32>, tensor<39x64xf32>, tensor<8x16x80xf32>, tensor<2x4xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<5x3x5xf32>
  return %o : tensor<5x3x5xf32>
}

// -----

// Without the attribute: the option's W, else the default budget
// min(max(8 * max-model-len, 4 * max-num-seqs * page-size), 64K), at least
// max-num-seqs * page-size. The pass defaults (4096, 128, 64) give 32768;
// (100, 4, 16) give max(800, 256) = 800; (4096, 2048, 64) give
// max(min(524288, 65536), 131072) = 131072.
// CHECK-LABEL: func.func @default_rows
// CHECK: tensor.empty() : tensor<32768x80xf32>
// OPTION-LABEL: func.func @default_rows
// OPTION: tensor.empty() : tensor<24x80xf32>
// BUDGET-LABEL: func.func @default_rows
// BUDGET: tensor.empty() : tensor<800x80xf32>
// FLOOR-LABEL: func.func @default_rows
// FLOOR: tensor.empty() : tensor<131072x80xf32>
func.func @default_rows(%q: tensor<5x3x24xf32>, %kv: tensor<5x64xf32>, %pe: tensor<5x16xf32>, %w: tensor<39x64xf32>,
                        %cache: tensor<2048x64x80xf32>, %bt: tensor<2x1024xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<5x3x5xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 64> scale 0.2
      : (tensor<5x3x24xf32>, tensor<5x64xf32>, tensor<5x16xf32>, tensor<39x64xf32>, tensor<2048x64x80xf32>, tensor<2x1024xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<5x3x5xf32>
  return %o : tensor<5x3x5xf32>
}

// -----

// A budget beyond what the block table can address (2 x 2 pages of 16) is
// clamped to it.
// CHECK-LABEL: func.func @clamped_to_table
// CHECK: tensor.empty() : tensor<64x80xf32>
// OPTION-LABEL: func.func @clamped_to_table
// OPTION: tensor.empty() : tensor<24x80xf32>
func.func @clamped_to_table(%q: tensor<5x3x24xf32>, %kv: tensor<5x64xf32>, %pe: tensor<5x16xf32>, %w: tensor<39x64xf32>,
                            %cache: tensor<8x16x80xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<5x3x5xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.2
      : (tensor<5x3x24xf32>, tensor<5x64xf32>, tensor<5x16xf32>, tensor<39x64xf32>, tensor<8x16x80xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<5x3x5xf32>
  return %o : tensor<5x3x5xf32>
}

// -----

// bf16 activations, a bf16 cache and a dynamic batch: the inputs are widened
// to f32 once, every mla op in between is f32, and the result is rounded
// once. The batch size comes from the block table.
// CHECK-LABEL: func.func @bf16_dynamic_batch
// CHECK-SAME: %[[BT:[a-z0-9]+]]: tensor<?x4xi32>
// CHECK: %[[B:.*]] = tensor.dim %[[BT]], %c0
// CHECK: %[[Q32:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<5x3x24xbf16>) outs(%{{.*}} : tensor<5x3x24xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<5x64xf32>)
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<5x16xf32>)
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<39x64xf32>)
// CHECK: mla.mha %[[Q32]], {{.*}} causal : (tensor<5x3x24xf32>, tensor<5x3x24xf32>, tensor<5x3x5xf32>, tensor<?xi32>, tensor<?xi32>)
// CHECK: scf.for %{{.*}} = %c0 to %[[B]]
// CHECK: tensor.empty() : tensor<40x80xf32>
// CHECK: mla.gather_cache {{.*}} layout #mla.cache_layout<format = bf16, page_size = 16> latent_dim 64 into %{{.*}} : tensor<8x16x80xbf16>, tensor<?x4xi32>, tensor<?xi32>, tensor<?xi32> into tensor<40x80xf32>
// CHECK: mla.mha %[[Q32]], {{.*}} : (tensor<5x3x24xf32>, tensor<?x3x24xf32>, tensor<?x3x5xf32>, tensor<?xi32>, tensor<?xi32>)
// CHECK: mla.merge_states
// CHECK: scf.yield
// CHECK: %[[RES:.*]], %{{.*}} = mla.merge_states
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[RES]] : tensor<5x3x5xf32>) outs(%{{.*}} : tensor<5x3x5xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[OUT]]
func.func @bf16_dynamic_batch(%q: tensor<5x3x24xbf16>, %kv: tensor<5x64xbf16>, %pe: tensor<5x16xbf16>, %w: tensor<39x64xbf16>,
                              %cache: tensor<8x16x80xbf16>, %bt: tensor<?x4xi32>, %qsl: tensor<?xi32>, %lens: tensor<?xi32>) -> tensor<5x3x5xbf16> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 16> scale 0.2 workspace_rows 40
      : (tensor<5x3x24xbf16>, tensor<5x64xbf16>, tensor<5x16xbf16>, tensor<39x64xbf16>, tensor<8x16x80xbf16>, tensor<?x4xi32>, tensor<?xi32>, tensor<?xi32>) -> tensor<5x3x5xbf16>
  return %o : tensor<5x3x5xbf16>
}
