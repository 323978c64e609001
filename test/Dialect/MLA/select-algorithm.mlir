// RUN: mla-opt %s --mla-select-algorithm --split-input-file | FileCheck %s --check-prefixes=CHECK,ANY
// RUN: not mla-opt %s --mla-select-algorithm=decode-threshold=4 --split-input-file 2>/dev/null | FileCheck %s --check-prefixes=FOUR,ANY
// RUN: mla-opt %s --mla-select-algorithm=decode-threshold=0 --split-input-file | FileCheck %s --check-prefixes=ZERO,ANY
//
// The threshold-4 run fails on purpose: it rejects the run-time batch of
// @dynamic (select-algorithm-invalid.mlir checks the message) and prints
// every other function.

// Widths throughout: N = 2, P = 8, R = 4, L = 16, V = 4 (q rows of 12, cache
// rows of 20).

// Decode requests first, as engines order them: with threshold 1 (and 4) the
// two single-token requests are one slice of q, block_table and seq_lens and
// take the absorbed path; the 5-token request takes mla.prefill with
// query_start_loc rebased to 0. The two outputs cover every token.
// CHECK-LABEL: func.func @decode_first
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<7x2x12xf32>, %[[KV:[a-z0-9]+]]: tensor<7x16xf32>, %[[PE:[a-z0-9]+]]: tensor<7x1x4xf32>, %[[W:[a-z0-9]+]]: tensor<24x16xf32>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x20xf32>, %[[BT:[a-z0-9]+]]: tensor<3x2xi32>)
// CHECK: %[[LENS:.*]] = arith.constant dense<[10, 20, 9]>
// CHECK: %[[DQ:.*]] = tensor.extract_slice %[[Q]][0, 0, 0] [2, 2, 12] [1, 1, 1]
// CHECK: %[[DBT:.*]] = tensor.extract_slice %[[BT]][0, 0] [2, 2] [1, 1]
// CHECK: %[[DLENS:.*]] = tensor.extract_slice %[[LENS]][0] [2] [1]
// CHECK: %[[UK:.*]], %[[UV:.*]] = mla.split_kv_b_proj %[[W]] : tensor<24x16xf32> -> tensor<2x8x16xf32>, tensor<2x16x4xf32>
// CHECK: %[[QA:.*]] = mla.absorb_q %[[DQ]], %[[UK]] : tensor<2x2x12xf32>, tensor<2x8x16xf32> -> tensor<2x2x20xf32>
// CHECK: %[[Q4:.*]] = tensor.expand_shape %[[QA]] {{\[}}[0, 1], [2], [3]] output_shape [2, 1, 2, 20]
// CHECK: %[[OL:.*]], %{{.*}} = mla.decode %[[Q4]], %[[CACHE]][%[[DBT]], %[[DLENS]]] layout #mla.cache_layout<format = f32, page_size = 16> scale 2.500000e-01 causal : (tensor<2x1x2x20xf32>, tensor<8x16x20xf32>, tensor<2x2xi32>, tensor<2xi32>) -> (tensor<2x1x2x16xf32>, tensor<2x2x1xf32>)
// CHECK: %[[OL3:.*]] = tensor.collapse_shape %[[OL]] {{\[}}[0, 1], [2], [3]] : tensor<2x1x2x16xf32> into tensor<2x2x16xf32>
// CHECK: %[[UP:.*]] = mla.up_proj_out %[[OL3]], %[[UV]] : tensor<2x2x16xf32>, tensor<2x16x4xf32> -> tensor<2x8xf32>
// CHECK: %[[DOUT:.*]] = tensor.expand_shape %[[UP]] {{\[}}[0], [1, 2]] output_shape [2, 2, 4]
// CHECK: %[[PQ:.*]] = tensor.extract_slice %[[Q]][2, 0, 0] [5, 2, 12] [1, 1, 1]
// CHECK: %[[PKV:.*]] = tensor.extract_slice %[[KV]][2, 0] [5, 16] [1, 1]
// CHECK: %[[PPE:.*]] = tensor.extract_slice %[[PE]][2, 0, 0] [5, 1, 4] [1, 1, 1]
// CHECK: %[[PBT:.*]] = tensor.extract_slice %[[BT]][2, 0] [1, 2] [1, 1]
// CHECK: %[[PLENS:.*]] = tensor.extract_slice %[[LENS]][2] [1] [1]
// CHECK: %[[PQSL:.*]] = arith.constant dense<[0, 5]> : tensor<2xi32>
// CHECK: %[[POUT:.*]] = mla.prefill %[[PQ]], %[[PKV]], %[[PPE]], %[[W]], %[[CACHE]][%[[PBT]], %[[PQSL]], %[[PLENS]]] layout #mla.cache_layout<format = f32, page_size = 16> scale 2.500000e-01 workspace_rows 64 : {{.*}} -> tensor<5x2x4xf32>
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<7x2x4xf32>
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[DOUT]] into %[[EMPTY]][0, 0, 0] [2, 2, 4] [1, 1, 1]
// CHECK: %[[R1:.*]] = tensor.insert_slice %[[POUT]] into %[[R0]][2, 0, 0] [5, 2, 4] [1, 1, 1]
// CHECK: return %[[R1]]
// FOUR-LABEL: func.func @decode_first
// FOUR: mla.decode {{.*}} : (tensor<2x1x2x20xf32>
// FOUR: mla.prefill {{.*}} -> tensor<5x2x4xf32>
// Threshold 0: everything prefill, with the op's own operands.
// ZERO-LABEL: func.func @decode_first
// ZERO-SAME: (%[[Q:[a-z0-9]+]]: tensor<7x2x12xf32>, %[[KV:[a-z0-9]+]]: tensor<7x16xf32>, %[[PE:[a-z0-9]+]]: tensor<7x1x4xf32>, %[[W:[a-z0-9]+]]: tensor<24x16xf32>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x20xf32>, %[[BT:[a-z0-9]+]]: tensor<3x2xi32>)
// ZERO: %[[QSL:.*]] = arith.constant dense<[0, 1, 2, 7]>
// ZERO: %[[LENS:.*]] = arith.constant dense<[10, 20, 9]>
// ZERO-NOT: mla.decode
// ZERO: %[[OUT:.*]] = mla.prefill %[[Q]], %[[KV]], %[[PE]], %[[W]], %[[CACHE]][%[[BT]], %[[QSL]], %[[LENS]]] {{.*}} workspace_rows 64 : {{.*}} -> tensor<7x2x4xf32>
// ZERO-NEXT: return %[[OUT]]
func.func @decode_first(%q: tensor<7x2x12xf32>, %kv: tensor<7x16xf32>, %pe: tensor<7x1x4xf32>, %w: tensor<24x16xf32>,
                        %cache: tensor<8x16x20xf32>, %bt: tensor<3x2xi32>) -> tensor<7x2x4xf32> {
  %qsl = arith.constant dense<[0, 1, 2, 7]> : tensor<4xi32>
  %lens = arith.constant dense<[10, 20, 9]> : tensor<3xi32>
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25 workspace_rows 64
      : (tensor<7x2x12xf32>, tensor<7x16xf32>, tensor<7x1x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> tensor<7x2x4xf32>
  return %o : tensor<7x2x4xf32>
}

// -----

// q_len 1, 3, 1, 2, 8 and a padding token (15). Threshold 1: requests 0 and 2
// are one decode, gathered by concatenation because they are not adjacent;
// requests 1, 3 and 4 one prefill. Threshold 4: one decode per q_len, in
// order of first appearance, and a prefill of request 4 alone. The padding
// row belongs to no path and stays 0.
// CHECK-LABEL: func.func @grouped
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<16x2x12xf32>, %[[KV:[a-z0-9]+]]: tensor<16x16xf32>, %[[PE:[a-z0-9]+]]: tensor<16x1x4xf32>, %[[W:[a-z0-9]+]]: tensor<24x16xf32>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x20xf32>, %[[BT:[a-z0-9]+]]: tensor<5x2xi32>)
// CHECK: %[[LENS:.*]] = arith.constant dense<[3, 7, 1, 9, 20]>
// CHECK: %[[Q0:.*]] = tensor.extract_slice %[[Q]][0, 0, 0] [1, 2, 12]
// CHECK: %[[Q2:.*]] = tensor.extract_slice %[[Q]][4, 0, 0] [1, 2, 12]
// CHECK: %[[DQ:.*]] = tensor.concat dim(0) %[[Q0]], %[[Q2]] : (tensor<1x2x12xf32>, tensor<1x2x12xf32>) -> tensor<2x2x12xf32>
// CHECK: %[[BT0:.*]] = tensor.extract_slice %[[BT]][0, 0] [1, 2]
// CHECK: %[[BT2:.*]] = tensor.extract_slice %[[BT]][2, 0] [1, 2]
// CHECK: %[[DBT:.*]] = tensor.concat dim(0) %[[BT0]], %[[BT2]]
// CHECK: %[[L0:.*]] = tensor.extract_slice %[[LENS]][0] [1] [1]
// CHECK: %[[L2:.*]] = tensor.extract_slice %[[LENS]][2] [1] [1]
// CHECK: %[[DLENS:.*]] = tensor.concat dim(0) %[[L0]], %[[L2]]
// CHECK: %[[UK:.*]], %[[UV:.*]] = mla.split_kv_b_proj %[[W]]
// CHECK: %[[QA:.*]] = mla.absorb_q %[[DQ]], %[[UK]]
// CHECK: %[[Q4:.*]] = tensor.expand_shape %[[QA]]
// CHECK: %[[OL:.*]], %{{.*}} = mla.decode %[[Q4]], %[[CACHE]][%[[DBT]], %[[DLENS]]] {{.*}} causal : (tensor<2x1x2x20xf32>
// CHECK: %[[OL3:.*]] = tensor.collapse_shape %[[OL]]
// CHECK: %[[UP:.*]] = mla.up_proj_out %[[OL3]], %[[UV]]
// CHECK: %[[DOUT:.*]] = tensor.expand_shape %[[UP]]
// CHECK: %[[Q1:.*]] = tensor.extract_slice %[[Q]][1, 0, 0] [3, 2, 12]
// CHECK: %[[Q34:.*]] = tensor.extract_slice %[[Q]][5, 0, 0] [10, 2, 12]
// CHECK: %[[PQ:.*]] = tensor.concat dim(0) %[[Q1]], %[[Q34]] : (tensor<3x2x12xf32>, tensor<10x2x12xf32>) -> tensor<13x2x12xf32>
// CHECK: %[[PKV:.*]] = tensor.concat dim(0) {{.*}} -> tensor<13x16xf32>
// CHECK: %[[PPE:.*]] = tensor.concat dim(0) {{.*}} -> tensor<13x1x4xf32>
// CHECK: %[[BT1:.*]] = tensor.extract_slice %[[BT]][1, 0] [1, 2]
// CHECK: %[[BT34:.*]] = tensor.extract_slice %[[BT]][3, 0] [2, 2]
// CHECK: %[[PBT:.*]] = tensor.concat dim(0) %[[BT1]], %[[BT34]]
// CHECK: %[[PLENS:.*]] = tensor.concat dim(0) {{.*}} -> tensor<3xi32>
// CHECK: %[[PQSL:.*]] = arith.constant dense<[0, 3, 5, 13]> : tensor<4xi32>
// CHECK: %[[POUT:.*]] = mla.prefill %[[PQ]], %[[PKV]], %[[PPE]], %[[W]], %[[CACHE]][%[[PBT]], %[[PQSL]], %[[PLENS]]] {{.*}} -> tensor<13x2x4xf32>
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<16x2x4xf32>
// CHECK: %[[CST0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[CST0]] : f32) outs(%[[EMPTY]] : tensor<16x2x4xf32>)
// CHECK: %[[D0:.*]] = tensor.extract_slice %[[DOUT]][0, 0, 0] [1, 2, 4]
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[D0]] into %[[INIT]][0, 0, 0] [1, 2, 4]
// CHECK: %[[D1:.*]] = tensor.extract_slice %[[DOUT]][1, 0, 0] [1, 2, 4]
// CHECK: %[[R1:.*]] = tensor.insert_slice %[[D1]] into %[[R0]][4, 0, 0] [1, 2, 4]
// CHECK: %[[P0:.*]] = tensor.extract_slice %[[POUT]][0, 0, 0] [3, 2, 4]
// CHECK: %[[R2:.*]] = tensor.insert_slice %[[P0]] into %[[R1]][1, 0, 0] [3, 2, 4]
// CHECK: %[[P1:.*]] = tensor.extract_slice %[[POUT]][3, 0, 0] [10, 2, 4]
// CHECK: %[[R3:.*]] = tensor.insert_slice %[[P1]] into %[[R2]][5, 0, 0] [10, 2, 4]
// CHECK: return %[[R3]]
// FOUR-LABEL: func.func @grouped
// FOUR-SAME: (%[[Q:[a-z0-9]+]]: tensor<16x2x12xf32>, %{{.*}}: tensor<16x16xf32>, %{{.*}}: tensor<16x1x4xf32>, %[[W:[a-z0-9]+]]: tensor<24x16xf32>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x20xf32>, %[[BT:[a-z0-9]+]]: tensor<5x2xi32>)
// FOUR: %[[UK:.*]], %[[UV:.*]] = mla.split_kv_b_proj %[[W]]
// FOUR: mla.decode {{.*}} : (tensor<2x1x2x20xf32>, tensor<8x16x20xf32>, tensor<2x2xi32>, tensor<2xi32>)
// FOUR: %[[Q1:.*]] = tensor.extract_slice %[[Q]][1, 0, 0] [3, 2, 12]
// FOUR: %[[BT1:.*]] = tensor.extract_slice %[[BT]][1, 0] [1, 2]
// FOUR: %[[QA1:.*]] = mla.absorb_q %[[Q1]], %[[UK]]
// FOUR: %[[Q14:.*]] = tensor.expand_shape %[[QA1]] {{\[}}[0, 1], [2], [3]] output_shape [1, 3, 2, 20]
// FOUR: %[[OL1:.*]], %{{.*}} = mla.decode %[[Q14]], %[[CACHE]][%[[BT1]], %{{.*}}] {{.*}} causal : (tensor<1x3x2x20xf32>, tensor<8x16x20xf32>, tensor<1x2xi32>, tensor<1xi32>) -> (tensor<1x3x2x16xf32>, tensor<1x2x3xf32>)
// FOUR: mla.up_proj_out {{.*}}, %[[UV]] : tensor<3x2x16xf32>, tensor<2x16x4xf32> -> tensor<3x8xf32>
// FOUR: mla.decode {{.*}} : (tensor<1x2x2x20xf32>
// FOUR: %[[PQ:.*]] = tensor.extract_slice %[[Q]][7, 0, 0] [8, 2, 12]
// FOUR: arith.constant dense<[0, 8]> : tensor<2xi32>
// FOUR: mla.prefill %[[PQ]], {{.*}} -> tensor<8x2x4xf32>
// FOUR: linalg.fill
// FOUR-COUNT-5: tensor.insert_slice
// ZERO-LABEL: func.func @grouped
// ZERO-NOT: mla.decode
// ZERO: mla.prefill {{.*}} -> tensor<16x2x4xf32>
func.func @grouped(%q: tensor<16x2x12xf32>, %kv: tensor<16x16xf32>, %pe: tensor<16x1x4xf32>, %w: tensor<24x16xf32>,
                   %cache: tensor<8x16x20xf32>, %bt: tensor<5x2xi32>) -> tensor<16x2x4xf32> {
  %qsl = arith.constant dense<[0, 1, 4, 5, 7, 15]> : tensor<6xi32>
  %lens = arith.constant dense<[3, 7, 1, 9, 20]> : tensor<5xi32>
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (tensor<16x2x12xf32>, tensor<16x16xf32>, tensor<16x1x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<5x2xi32>, tensor<6xi32>, tensor<5xi32>) -> tensor<16x2x4xf32>
  return %o : tensor<16x2x4xf32>
}

// -----

// Only the q_len split is static: seq_lens is an argument. Every request is
// a decode covering all tokens, so the path's result is the op's (bf16
// throughout, as the activations).
// CHECK-LABEL: func.func @all_decode
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<3x2x12xbf16>, %{{.*}}: tensor<3x16xbf16>, %{{.*}}: tensor<3x4xbf16>, %[[W:[a-z0-9]+]]: tensor<24x16xbf16>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x20xbf16>, %[[BT:[a-z0-9]+]]: tensor<3x2xi32>, %[[LENS:[a-z0-9]+]]: tensor<3xi32>)
// CHECK: %[[UK:.*]], %[[UV:.*]] = mla.split_kv_b_proj %[[W]] : tensor<24x16xbf16> -> tensor<2x8x16xbf16>, tensor<2x16x4xbf16>
// CHECK: %[[QA:.*]] = mla.absorb_q %[[Q]], %[[UK]]
// CHECK: %[[Q4:.*]] = tensor.expand_shape %[[QA]]
// CHECK: %[[OL:.*]], %{{.*}} = mla.decode %[[Q4]], %[[CACHE]][%[[BT]], %[[LENS]]] layout #mla.cache_layout<format = bf16, page_size = 16> scale 2.500000e-01 causal : (tensor<3x1x2x20xbf16>, tensor<8x16x20xbf16>, tensor<3x2xi32>, tensor<3xi32>) -> (tensor<3x1x2x16xbf16>, tensor<3x2x1xf32>)
// CHECK: %[[OL3:.*]] = tensor.collapse_shape %[[OL]]
// CHECK: %[[UP:.*]] = mla.up_proj_out %[[OL3]], %[[UV]]
// CHECK: %[[OUT:.*]] = tensor.expand_shape %[[UP]] {{\[}}[0], [1, 2]] output_shape [3, 2, 4] : tensor<3x8xbf16> into tensor<3x2x4xbf16>
// CHECK-NEXT: return %[[OUT]]
// FOUR-LABEL: func.func @all_decode
// FOUR: mla.decode
// FOUR-NOT: mla.prefill
// ZERO-LABEL: func.func @all_decode
// ZERO-NOT: mla.decode
// ZERO: mla.prefill
func.func @all_decode(%q: tensor<3x2x12xbf16>, %kv: tensor<3x16xbf16>, %pe: tensor<3x4xbf16>, %w: tensor<24x16xbf16>,
                      %cache: tensor<8x16x20xbf16>, %bt: tensor<3x2xi32>, %lens: tensor<3xi32>) -> tensor<3x2x4xbf16> {
  %qsl = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = bf16, page_size = 16> scale 0.25
      : (tensor<3x2x12xbf16>, tensor<3x16xbf16>, tensor<3x4xbf16>, tensor<24x16xbf16>, tensor<8x16x20xbf16>, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> tensor<3x2x4xbf16>
  return %o : tensor<3x2x4xbf16>
}

// -----

// A prefill before the decode and requests without tokens (1 and 3, which
// take no path); tokens 6 and 7 are padding.
// CHECK-LABEL: func.func @empty_requests
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<8x2x12xf32>, %{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<8x1x4xf32>, %{{.*}}: tensor<24x16xf32>, %{{.*}}: tensor<8x16x20xf32>, %[[BT:[a-z0-9]+]]: tensor<4x2xi32>, %[[LENS:[a-z0-9]+]]: tensor<4xi32>)
// CHECK: tensor.extract_slice %[[Q]][5, 0, 0] [1, 2, 12]
// CHECK: tensor.extract_slice %[[BT]][3, 0] [1, 2]
// CHECK: tensor.extract_slice %[[LENS]][3] [1] [1]
// CHECK: %[[OL:.*]], %{{.*}} = mla.decode {{.*}} : (tensor<1x1x2x20xf32>
// CHECK: %[[DOUT:.*]] = tensor.expand_shape
// CHECK: tensor.extract_slice %[[Q]][0, 0, 0] [5, 2, 12]
// CHECK: tensor.extract_slice %[[BT]][1, 0] [1, 2]
// CHECK: tensor.extract_slice %[[LENS]][1] [1] [1]
// CHECK: arith.constant dense<[0, 5]> : tensor<2xi32>
// CHECK: %[[POUT:.*]] = mla.prefill {{.*}} -> tensor<5x2x4xf32>
// CHECK: %[[INIT:.*]] = linalg.fill
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[DOUT]] into %[[INIT]][5, 0, 0] [1, 2, 4]
// CHECK: %[[R1:.*]] = tensor.insert_slice %[[POUT]] into %[[R0]][0, 0, 0] [5, 2, 4]
// CHECK: return %[[R1]]
// FOUR-LABEL: func.func @empty_requests
// FOUR: mla.decode {{.*}} : (tensor<1x1x2x20xf32>
// FOUR: mla.prefill {{.*}} -> tensor<5x2x4xf32>
// ZERO-LABEL: func.func @empty_requests
// ZERO-NOT: mla.decode
// ZERO: mla.prefill {{.*}} -> tensor<8x2x4xf32>
func.func @empty_requests(%q: tensor<8x2x12xf32>, %kv: tensor<8x16xf32>, %pe: tensor<8x1x4xf32>, %w: tensor<24x16xf32>,
                          %cache: tensor<8x16x20xf32>, %bt: tensor<4x2xi32>, %lens: tensor<4xi32>) -> tensor<8x2x4xf32> {
  %qsl = arith.constant dense<[0, 0, 5, 5, 6]> : tensor<5xi32>
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (tensor<8x2x12xf32>, tensor<8x16xf32>, tensor<8x1x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<4x2xi32>, tensor<5xi32>, tensor<4xi32>) -> tensor<8x2x4xf32>
  return %o : tensor<8x2x4xf32>
}

// -----

// No request is short enough for any threshold used here: the op becomes
// mla.prefill of its own operands.
// ANY-LABEL: func.func @all_prefill
// ANY-SAME: (%[[Q:[a-z0-9]+]]: tensor<11x2x12xf32>, %[[KV:[a-z0-9]+]]: tensor<11x16xf32>, %[[PE:[a-z0-9]+]]: tensor<11x1x4xf32>, %[[W:[a-z0-9]+]]: tensor<24x16xf32>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x20xf32>, %[[BT:[a-z0-9]+]]: tensor<2x2xi32>, %[[LENS:[a-z0-9]+]]: tensor<2xi32>)
// ANY: %[[QSL:.*]] = arith.constant dense<[0, 5, 11]>
// ANY-NEXT: %[[OUT:.*]] = mla.prefill %[[Q]], %[[KV]], %[[PE]], %[[W]], %[[CACHE]][%[[BT]], %[[QSL]], %[[LENS]]] layout #mla.cache_layout<format = f32, page_size = 16> scale 2.500000e-01 : {{.*}} -> tensor<11x2x4xf32>
// ANY-NEXT: return %[[OUT]]
func.func @all_prefill(%q: tensor<11x2x12xf32>, %kv: tensor<11x16xf32>, %pe: tensor<11x1x4xf32>, %w: tensor<24x16xf32>,
                       %cache: tensor<8x16x20xf32>, %bt: tensor<2x2xi32>, %lens: tensor<2xi32>) -> tensor<11x2x4xf32> {
  %qsl = arith.constant dense<[0, 5, 11]> : tensor<3xi32>
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (tensor<11x2x12xf32>, tensor<11x16xf32>, tensor<11x1x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<11x2x4xf32>
  return %o : tensor<11x2x4xf32>
}

// -----

// Run-time metadata, threshold 1: an scf.while counts the leading requests
// with q_len 1 (n); requests [0, n) are a decode batch of dynamic size with
// Sq = 1 owning tokens [0, n), requests [n, B) a prefill of tokens [n, T)
// with query_start_loc[n:] - n.
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<?x2x12xf32>, %[[KV:[a-z0-9]+]]: tensor<?x16xf32>, %[[PE:[a-z0-9]+]]: tensor<?x4xf32>, %[[W:[a-z0-9]+]]: tensor<24x16xf32>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x20xf32>, %[[BT:[a-z0-9]+]]: tensor<?x2xi32>, %[[QSL:[a-z0-9]+]]: tensor<?xi32>, %[[LENS:[a-z0-9]+]]: tensor<?xi32>)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[NQSL:.*]] = tensor.dim %[[QSL]]
// CHECK: %[[B:.*]] = arith.subi %[[NQSL]], %[[C1]] : index
// CHECK: %[[N:.*]] = scf.while (%[[I:.*]] = %[[C0]]) : (index) -> index {
// CHECK:   %[[NEXT:.*]] = arith.addi %[[I]], %[[C1]]
// CHECK:   %[[CLAMPED:.*]] = arith.minui %[[NEXT]], %[[B]]
// CHECK:   %[[BEGIN:.*]] = tensor.extract %[[QSL]][%[[I]]]
// CHECK:   %[[END:.*]] = tensor.extract %[[QSL]][%[[CLAMPED]]]
// CHECK:   %[[QLEN:.*]] = arith.subi
// CHECK:   %[[SINGLE:.*]] = arith.cmpi eq, %[[QLEN]], %[[C1]]
// CHECK:   scf.condition(%[[SINGLE]]) %[[I]]
// CHECK: } do {
// CHECK: ^bb0(%[[J:.*]]: index):
// CHECK:   %[[INC:.*]] = arith.addi %[[J]], %[[C1]]
// CHECK:   scf.yield %[[INC]]
// CHECK: }
// CHECK: %[[DQ:.*]] = tensor.extract_slice %[[Q]][%[[C0]], 0, 0] [%[[N]], 2, 12] [1, 1, 1] : tensor<?x2x12xf32> to tensor<?x2x12xf32>
// CHECK: %[[DBT:.*]] = tensor.extract_slice %[[BT]][%[[C0]], 0] [%[[N]], 2] [1, 1]
// CHECK: %[[DLENS:.*]] = tensor.extract_slice %[[LENS]][%[[C0]]] [%[[N]]] [1]
// CHECK: %[[UK:.*]], %[[UV:.*]] = mla.split_kv_b_proj %[[W]]
// CHECK: %[[QA:.*]] = mla.absorb_q %[[DQ]], %[[UK]] : tensor<?x2x12xf32>, tensor<2x8x16xf32> -> tensor<?x2x20xf32>
// CHECK: %[[Q4:.*]] = tensor.expand_shape %[[QA]] {{\[}}[0, 1], [2], [3]] output_shape [%[[N]], 1, 2, 20] : tensor<?x2x20xf32> into tensor<?x1x2x20xf32>
// CHECK: %[[OL:.*]], %{{.*}} = mla.decode %[[Q4]], %[[CACHE]][%[[DBT]], %[[DLENS]]] {{.*}} causal : (tensor<?x1x2x20xf32>, tensor<8x16x20xf32>, tensor<?x2xi32>, tensor<?xi32>) -> (tensor<?x1x2x16xf32>, tensor<?x2x1xf32>)
// CHECK: %[[OL3:.*]] = tensor.collapse_shape %[[OL]]
// CHECK: %[[UP:.*]] = mla.up_proj_out %[[OL3]], %[[UV]] : tensor<?x2x16xf32>, tensor<2x16x4xf32> -> tensor<?x8xf32>
// CHECK: %[[DOUT:.*]] = tensor.expand_shape %[[UP]] {{\[}}[0], [1, 2]] output_shape [%[[N]], 2, 4]
// CHECK: %[[T:.*]] = tensor.dim %[[Q]]
// CHECK: %[[RT:.*]] = arith.subi %[[T]], %[[N]]
// CHECK: %[[RB:.*]] = arith.subi %[[B]], %[[N]]
// CHECK: %[[PQ:.*]] = tensor.extract_slice %[[Q]][%[[N]], 0, 0] [%[[RT]], 2, 12]
// CHECK: %[[PKV:.*]] = tensor.extract_slice %[[KV]][%[[N]], 0] [%[[RT]], 16]
// CHECK: %[[PPE:.*]] = tensor.extract_slice %[[PE]][%[[N]], 0] [%[[RT]], 4]
// CHECK: %[[PBT:.*]] = tensor.extract_slice %[[BT]][%[[N]], 0] [%[[RB]], 2]
// CHECK: %[[PLENS:.*]] = tensor.extract_slice %[[LENS]][%[[N]]] [%[[RB]]] [1]
// CHECK: %[[RB1:.*]] = arith.addi %[[RB]], %[[C1]]
// CHECK: %[[ROFF:.*]] = tensor.extract_slice %[[QSL]][%[[N]]] [%[[RB1]]] [1]
// CHECK: %[[NI32:.*]] = arith.index_cast %[[N]] : index to i32
// CHECK: %[[PQSL:.*]] = linalg.generic {{.*}} ins(%[[ROFF]] : tensor<?xi32>)
// CHECK:   arith.subi %{{.*}}, %[[NI32]] : i32
// CHECK: %[[POUT:.*]] = mla.prefill %[[PQ]], %[[PKV]], %[[PPE]], %[[W]], %[[CACHE]][%[[PBT]], %[[PQSL]], %[[PLENS]]] {{.*}} workspace_rows 32 : {{.*}} -> tensor<?x2x4xf32>
// CHECK: %[[EMPTY:.*]] = tensor.empty(%[[T]]) : tensor<?x2x4xf32>
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[DOUT]] into %[[EMPTY]][%[[C0]], 0, 0]
// CHECK: %[[R1:.*]] = tensor.insert_slice %[[POUT]] into %[[R0]][%[[N]], 0, 0]
// CHECK: return %[[R1]]
// Threshold 0: prefill only, with the op's own operands.
// ZERO-LABEL: func.func @dynamic
// ZERO-SAME: (%[[Q:[a-z0-9]+]]: tensor<?x2x12xf32>, %[[KV:[a-z0-9]+]]: tensor<?x16xf32>, %[[PE:[a-z0-9]+]]: tensor<?x4xf32>, %[[W:[a-z0-9]+]]: tensor<24x16xf32>, %[[CACHE:[a-z0-9]+]]: tensor<8x16x20xf32>, %[[BT:[a-z0-9]+]]: tensor<?x2xi32>, %[[QSL:[a-z0-9]+]]: tensor<?xi32>, %[[LENS:[a-z0-9]+]]: tensor<?xi32>)
// ZERO-NEXT: %[[OUT:.*]] = mla.prefill %[[Q]], %[[KV]], %[[PE]], %[[W]], %[[CACHE]][%[[BT]], %[[QSL]], %[[LENS]]]
// ZERO-NEXT: return %[[OUT]]
// Threshold 4 needs decode batches of several Sq, which only constant
// metadata can form: the function is rejected and not printed.
// FOUR-NOT: func.func @dynamic
func.func @dynamic(%q: tensor<?x2x12xf32>, %kv: tensor<?x16xf32>, %pe: tensor<?x4xf32>, %w: tensor<24x16xf32>,
                   %cache: tensor<8x16x20xf32>, %bt: tensor<?x2xi32>, %qsl: tensor<?xi32>, %lens: tensor<?xi32>) -> tensor<?x2x4xf32> {
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25 workspace_rows 32
      : (tensor<?x2x12xf32>, tensor<?x16xf32>, tensor<?x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<?x2xi32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x2x4xf32>
  return %o : tensor<?x2x4xf32>
}
