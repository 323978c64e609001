// RUN: mla-opt %s --mla-select-algorithm=decode-threshold=4 --split-input-file --verify-diagnostics

// A decode's Sq is part of its type, so with run-time metadata only
// single-row requests can be split off (decode-threshold=1).
func.func @dynamic_batch_needs_threshold_1(%q: tensor<?x2x12xf32>, %kv: tensor<?x16xf32>, %pe: tensor<?x4xf32>, %w: tensor<24x16xf32>,
                                           %cache: tensor<8x16x20xf32>, %bt: tensor<?x2xi32>, %qsl: tensor<?xi32>, %lens: tensor<?xi32>) -> tensor<?x2x4xf32> {
  // expected-error @below {{decode-threshold 4 needs a constant query_start_loc: mla.decode has a static Sq, so a batch known only at run time can only split off single-row requests (decode-threshold=1)}}
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (tensor<?x2x12xf32>, tensor<?x16xf32>, tensor<?x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<?x2xi32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x2x4xf32>
  return %o : tensor<?x2x4xf32>
}

// -----

// The cache already holds each request's new tokens: seq_len >= q_len.
func.func @seq_len_below_q_len(%q: tensor<4x2x12xf32>, %kv: tensor<4x16xf32>, %pe: tensor<4x4xf32>, %w: tensor<24x16xf32>,
                               %cache: tensor<8x16x20xf32>, %bt: tensor<2x2xi32>) -> tensor<4x2x4xf32> {
  %qsl = arith.constant dense<[0, 1, 4]> : tensor<3xi32>
  %lens = arith.constant dense<[5, 2]> : tensor<2xi32>
  // expected-error @below {{request 1 has q_len 3 but seq_lens[1] = 2: the cache must already hold the request's new tokens}}
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (tensor<4x2x12xf32>, tensor<4x16xf32>, tensor<4x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<4x2x4xf32>
  return %o : tensor<4x2x4xf32>
}

// -----

// The paths' intermediate types are built from N, P, R, L and V.
func.func @dynamic_heads(%q: tensor<4x?x12xf32>, %kv: tensor<4x16xf32>, %pe: tensor<4x4xf32>, %w: tensor<24x16xf32>,
                         %cache: tensor<8x16x20xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<4x?x4xf32> {
  // expected-error @below {{cannot select an algorithm: N, P, R, L and V must be static}}
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (tensor<4x?x12xf32>, tensor<4x16xf32>, tensor<4x4xf32>, tensor<24x16xf32>, tensor<8x16x20xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<4x?x4xf32>
  return %o : tensor<4x?x4xf32>
}
