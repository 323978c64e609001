// Executes the prefill-side ops on the CPU: merge_states, mha, the weight
// split and head products, and mla.prefill at several workspace sizes.
// RUN: mla-opt %s --mla-to-llvm-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | FileCheck %s
//
// merge_states, mha and the projections use values whose results can be
// derived by hand (see the comments at each CHECK). The prefill's expected
// output was computed with test/python/mla_reference.py (prefill_ref, float64,
// one softmax per query row, no chunking) from the inputs below; each
// chunking must agree with it to float32 accuracy.

func.func private @merge(%oa: tensor<4x1x2xf32>, %la: tensor<1x4xf32>, %ob: tensor<4x1x2xf32>, %lb: tensor<1x4xf32>) -> (tensor<4x1x2xf32>, tensor<1x4xf32>) {
  %o, %l = mla.merge_states %oa, %la, %ob, %lb
      : (tensor<4x1x2xf32>, tensor<1x4xf32>, tensor<4x1x2xf32>, tensor<1x4xf32>) -> (tensor<4x1x2xf32>, tensor<1x4xf32>)
  return %o, %l : tensor<4x1x2xf32>, tensor<1x4xf32>
}

func.func private @mha_causal(%q: tensor<5x2x2xf32>, %k: tensor<5x2x2xf32>, %v: tensor<5x2x2xf32>, %cuq: tensor<4xi32>, %cuk: tensor<4xi32>) -> (tensor<5x2x2xf32>, tensor<2x5xf32>) {
  %o, %l = mla.mha %q, %k, %v, %cuq, %cuk scale 1.0 causal
      : (tensor<5x2x2xf32>, tensor<5x2x2xf32>, tensor<5x2x2xf32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<5x2x2xf32>, tensor<2x5xf32>)
  return %o, %l : tensor<5x2x2xf32>, tensor<2x5xf32>
}

// N = 2, P = 1, R = 1, V = 2, L = 3, in bf16 (every value is exact).
func.func private @projections(%w: tensor<6x3xbf16>, %q: tensor<1x2x2xbf16>, %o: tensor<1x2x3xbf16>, %lat: tensor<2x3xbf16>)
    -> (tensor<2x1x3xbf16>, tensor<2x3x2xbf16>, tensor<1x2x4xbf16>, tensor<1x4xbf16>, tensor<2x2x1xbf16>, tensor<2x2x2xbf16>) {
  %uk, %uv = mla.split_kv_b_proj %w : tensor<6x3xbf16> -> tensor<2x1x3xbf16>, tensor<2x3x2xbf16>
  %qa = mla.absorb_q %q, %uk : tensor<1x2x2xbf16>, tensor<2x1x3xbf16> -> tensor<1x2x4xbf16>
  %up = mla.up_proj_out %o, %uv : tensor<1x2x3xbf16>, tensor<2x3x2xbf16> -> tensor<1x4xbf16>
  %kn, %vv = mla.up_proj_kv %lat, %w : tensor<2x3xbf16>, tensor<6x3xbf16> -> tensor<2x2x1xbf16>, tensor<2x2x2xbf16>
  return %uk, %uv, %qa, %up, %kn, %vv : tensor<2x1x3xbf16>, tensor<2x3x2xbf16>, tensor<1x2x4xbf16>, tensor<1x4xbf16>, tensor<2x2x1xbf16>, tensor<2x2x2xbf16>
}

// Prefill: N = 2, P = R = V = 2, L = 4, pages of 16; request 0 has 2 new
// tokens after 3 context rows, request 1 has 1 after 20. The block table
// can address 64 rows, so the default budget becomes a single chunk; 40 rows
// give chunks of 16 rows per request, 16 rows one request at a time, 5 and 1
// rows (less than a page) chunks of 5 and 1 rows.
func.func private @prefill_default(%q: tensor<3x2x4xf32>, %kv: tensor<3x4xf32>, %pe: tensor<3x1x2xf32>, %w: tensor<8x4xf32>,
                                   %cache: tensor<4x16x6xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<3x2x2xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.5
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  return %o : tensor<3x2x2xf32>
}
func.func private @prefill_w40(%q: tensor<3x2x4xf32>, %kv: tensor<3x4xf32>, %pe: tensor<3x1x2xf32>, %w: tensor<8x4xf32>,
                               %cache: tensor<4x16x6xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<3x2x2xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.5 workspace_rows 40
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  return %o : tensor<3x2x2xf32>
}
func.func private @prefill_w16(%q: tensor<3x2x4xf32>, %kv: tensor<3x4xf32>, %pe: tensor<3x1x2xf32>, %w: tensor<8x4xf32>,
                               %cache: tensor<4x16x6xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<3x2x2xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.5 workspace_rows 16
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  return %o : tensor<3x2x2xf32>
}
func.func private @prefill_w5(%q: tensor<3x2x4xf32>, %kv: tensor<3x4xf32>, %pe: tensor<3x1x2xf32>, %w: tensor<8x4xf32>,
                              %cache: tensor<4x16x6xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<3x2x2xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.5 workspace_rows 5
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  return %o : tensor<3x2x2xf32>
}
func.func private @prefill_w1(%q: tensor<3x2x4xf32>, %kv: tensor<3x4xf32>, %pe: tensor<3x1x2xf32>, %w: tensor<8x4xf32>,
                              %cache: tensor<4x16x6xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<3x2x2xf32> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.5 workspace_rows 1
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  return %o : tensor<3x2x2xf32>
}
// bf16 activations over the same f32 cache: the result is rounded once.
func.func private @prefill_bf16(%q: tensor<3x2x4xbf16>, %kv: tensor<3x4xbf16>, %pe: tensor<3x1x2xbf16>, %w: tensor<8x4xbf16>,
                                %cache: tensor<4x16x6xf32>, %bt: tensor<2x2xi32>, %qsl: tensor<3xi32>, %lens: tensor<2xi32>) -> tensor<3x2x2xbf16> {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.5 workspace_rows 5
      : (tensor<3x2x4xbf16>, tensor<3x4xbf16>, tensor<3x1x2xbf16>, tensor<8x4xbf16>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xbf16>
  return %o : tensor<3x2x2xbf16>
}

func.func private @print3(%t: tensor<?x?x?xf32>) {
  %u = tensor.cast %t : tensor<?x?x?xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}
func.func private @print2(%t: tensor<?x?xf32>) {
  %u = tensor.cast %t : tensor<?x?xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}
func.func private @widen3(%t: tensor<?x?x?xbf16>) -> tensor<?x?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %d0 = tensor.dim %t, %c0 : tensor<?x?x?xbf16>
  %d1 = tensor.dim %t, %c1 : tensor<?x?x?xbf16>
  %d2 = tensor.dim %t, %c2 : tensor<?x?x?xbf16>
  %e = tensor.empty(%d0, %d1, %d2) : tensor<?x?x?xf32>
  %r = linalg.map { arith.extf } ins(%t : tensor<?x?x?xbf16>) outs(%e : tensor<?x?x?xf32>)
  return %r : tensor<?x?x?xf32>
}

// Prints whether max |a - b| <= tol (NaN fails).
func.func private @check_close(%a: tensor<3x2x2xf32>, %b: tensor<3x2x2xf32>, %tol: f32) {
  %zero = arith.constant 0.0 : f32
  %init = tensor.from_elements %zero : tensor<f32>
  %err = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>,
                                           affine_map<(i, j, k) -> ()>],
                          iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%a, %b : tensor<3x2x2xf32>, tensor<3x2x2xf32>) outs(%init : tensor<f32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %d = arith.subf %x, %y : f32
      %m = math.absf %d : f32
      %n = arith.maximumf %acc, %m : f32
      linalg.yield %n : f32
  } -> tensor<f32>
  %e = tensor.extract %err[] : tensor<f32>
  %ok = arith.cmpf ole, %e, %tol : f32
  vector.print %ok : i1
  return
}

func.func @main() {
  //===--------------------------------------------------------------------===//
  // merge_states: equal LSEs average; +inf and -inf mean "no contribution"
  // (even next to NaN outputs); ln 3 against 0 weighs 3/4 and 1/4.
  //===--------------------------------------------------------------------===//
  %nan = arith.constant 0x7FC00000 : f32
  %oa = arith.constant dense<[[[1.0, 2.0]], [[5.0, 6.0]], [[0x7FC00000, 0x7FC00000]], [[4.0, 8.0]]]> : tensor<4x1x2xf32>
  %la = arith.constant dense<[[0.0, 0x7F800000, 0xFF800000, 1.09861229]]> : tensor<1x4xf32>
  %ob = arith.constant dense<[[[3.0, 4.0]], [[7.0, 8.0]], [[0x7FC00000, 1.0]], [[0.0, 4.0]]]> : tensor<4x1x2xf32>
  %lb = arith.constant dense<[[0.0, 1.0, 0xFF800000, 0.0]]> : tensor<1x4xf32>
  %mo, %ml = call @merge(%oa, %la, %ob, %lb)
      : (tensor<4x1x2xf32>, tensor<1x4xf32>, tensor<4x1x2xf32>, tensor<1x4xf32>) -> (tensor<4x1x2xf32>, tensor<1x4xf32>)
  %mo_d = tensor.cast %mo : tensor<4x1x2xf32> to tensor<?x?x?xf32>
  call @print3(%mo_d) : (tensor<?x?x?xf32>) -> ()
  // CHECK: sizes = [4, 1, 2]
  // CHECK-NEXT: {{\[}}[2, 3]],
  // CHECK-NEXT: {{\[}}[7, 8]],
  // CHECK-NEXT: {{\[}}[0, 0]],
  // CHECK-NEXT: {{\[}}[3, 7]]]
  %ml_d = tensor.cast %ml : tensor<1x4xf32> to tensor<?x?xf32>
  call @print2(%ml_d) : (tensor<?x?xf32>) -> ()
  // ln 2, 1, -inf, ln 4.
  // CHECK: sizes = [1, 4]
  // CHECK-NEXT: {{\[}}[0.693147, 1, -inf, 1.38629]]

  //===--------------------------------------------------------------------===//
  // mha, causal, N = 2 (head 1 has the negated V of head 0), scale 1.
  // Request 0: 2 queries q = 0 against 3 keys, so the softmax is uniform over
  // the visible keys: row 0 sees keys 0-1 (mean of v0, v1 = [0.5, 0.5],
  // lse ln 2), row 1 all three (mean [5/3, 5/3], lse ln 3).
  // Request 1: no keys (out 0, lse -inf). Request 2: scores 1000 and 1001,
  // which overflow a softmax without the max subtracted: weights
  // 1 / (1 + e) and e / (1 + e), lse 1001 + ln(1 + 1/e) = 1001.313.
  // Row 4 belongs to no request (out 0, lse -inf).
  //===--------------------------------------------------------------------===//
  %q = arith.constant dense<[[[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]],
                             [[1.0, 0.0], [1.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]> : tensor<5x2x2xf32>
  %k = arith.constant dense<[[[1.0, 2.0], [1.0, 2.0]], [[3.0, 4.0], [3.0, 4.0]], [[5.0, 6.0], [5.0, 6.0]],
                             [[1000.0, 0.0], [1000.0, 0.0]], [[1001.0, 0.0], [1001.0, 0.0]]]> : tensor<5x2x2xf32>
  %v = arith.constant dense<[[[1.0, 0.0], [-1.0, -0.0]], [[0.0, 1.0], [-0.0, -1.0]], [[4.0, 4.0], [-4.0, -4.0]],
                             [[1.0, 0.0], [-1.0, -0.0]], [[0.0, 1.0], [-0.0, -1.0]]]> : tensor<5x2x2xf32>
  %cuq = arith.constant dense<[0, 2, 3, 4]> : tensor<4xi32>
  %cuk = arith.constant dense<[0, 3, 3, 5]> : tensor<4xi32>
  %ao, %al = call @mha_causal(%q, %k, %v, %cuq, %cuk)
      : (tensor<5x2x2xf32>, tensor<5x2x2xf32>, tensor<5x2x2xf32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<5x2x2xf32>, tensor<2x5xf32>)
  %ao_d = tensor.cast %ao : tensor<5x2x2xf32> to tensor<?x?x?xf32>
  call @print3(%ao_d) : (tensor<?x?x?xf32>) -> ()
  // CHECK: sizes = [5, 2, 2]
  // CHECK-NEXT: {{\[}}[0.5, 0.5],
  // CHECK-NEXT: [-0.5, -0.5]],
  // CHECK-NEXT: {{\[}}[1.66667, 1.66667],
  // CHECK-NEXT: [-1.66667, -1.66667]],
  // CHECK-NEXT: {{\[}}[0, 0],
  // CHECK-NEXT: [0, 0]],
  // CHECK-NEXT: {{\[}}[0.268941, 0.731059],
  // CHECK-NEXT: [-0.268941, -0.731059]],
  // CHECK-NEXT: {{\[}}[0, 0],
  // CHECK-NEXT: [0, 0]]]
  %al_d = tensor.cast %al : tensor<2x5xf32> to tensor<?x?xf32>
  call @print2(%al_d) : (tensor<?x?xf32>) -> ()
  // CHECK: sizes = [2, 5]
  // CHECK-NEXT: {{\[}}[0.693147, 1.09861, -inf, 1001.31, -inf],
  // CHECK-NEXT: [0.693147, 1.09861, -inf, 1001.31, -inf]]

  //===--------------------------------------------------------------------===//
  // Projections. kv_b_proj rows per head: [nope; v0; v1].
  //   W_UK_T = [[[1, 2, 3]], [[10, 11, 12]]]
  //   W_UV[n, l, v] = kv_b_proj[3n + 1 + v, l]
  //   absorb_q: head 0: 2 * [1, 2, 3] then RoPE 9; head 1: 1 * [10, 11, 12]
  //             then RoPE -1.
  //   up_proj_out: [1, 0, 0] @ W_UV[0] = [4, 7]; [0, 1, 1] @ W_UV[1] =
  //                [14 + 15, 17 + 18].
  //   up_proj_kv: latent row e0 picks column 0 of kv_b_proj, e2 column 2.
  //===--------------------------------------------------------------------===//
  %w = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0],
                             [10.0, 11.0, 12.0], [13.0, 14.0, 15.0], [16.0, 17.0, 18.0]]> : tensor<6x3xbf16>
  %pq = arith.constant dense<[[[2.0, 9.0], [1.0, -1.0]]]> : tensor<1x2x2xbf16>
  %po = arith.constant dense<[[[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]]> : tensor<1x2x3xbf16>
  %lat = arith.constant dense<[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]> : tensor<2x3xbf16>
  %uk, %uv, %qa, %up, %kn, %vv = call @projections(%w, %pq, %po, %lat)
      : (tensor<6x3xbf16>, tensor<1x2x2xbf16>, tensor<1x2x3xbf16>, tensor<2x3xbf16>)
      -> (tensor<2x1x3xbf16>, tensor<2x3x2xbf16>, tensor<1x2x4xbf16>, tensor<1x4xbf16>, tensor<2x2x1xbf16>, tensor<2x2x2xbf16>)
  %uk_d = tensor.cast %uk : tensor<2x1x3xbf16> to tensor<?x?x?xbf16>
  %uk_f = call @widen3(%uk_d) : (tensor<?x?x?xbf16>) -> tensor<?x?x?xf32>
  call @print3(%uk_f) : (tensor<?x?x?xf32>) -> ()
  // CHECK: sizes = [2, 1, 3]
  // CHECK-NEXT: {{\[}}[1, 2, 3]],
  // CHECK-NEXT: {{\[}}[10, 11, 12]]]
  %uv_d = tensor.cast %uv : tensor<2x3x2xbf16> to tensor<?x?x?xbf16>
  %uv_f = call @widen3(%uv_d) : (tensor<?x?x?xbf16>) -> tensor<?x?x?xf32>
  call @print3(%uv_f) : (tensor<?x?x?xf32>) -> ()
  // CHECK: sizes = [2, 3, 2]
  // CHECK-NEXT: {{\[}}[4, 7],
  // CHECK-NEXT: [5, 8],
  // CHECK-NEXT: [6, 9]],
  // CHECK-NEXT: {{\[}}[13, 16],
  // CHECK-NEXT: [14, 17],
  // CHECK-NEXT: [15, 18]]]
  %qa_d = tensor.cast %qa : tensor<1x2x4xbf16> to tensor<?x?x?xbf16>
  %qa_f = call @widen3(%qa_d) : (tensor<?x?x?xbf16>) -> tensor<?x?x?xf32>
  call @print3(%qa_f) : (tensor<?x?x?xf32>) -> ()
  // CHECK: sizes = [1, 2, 4]
  // CHECK-NEXT: {{\[}}[2, 4, 6, 9],
  // CHECK-NEXT: [10, 11, 12, -1]]]
  %up_3 = tensor.expand_shape %up [[0], [1, 2]] output_shape [1, 1, 4] : tensor<1x4xbf16> into tensor<1x1x4xbf16>
  %up_d = tensor.cast %up_3 : tensor<1x1x4xbf16> to tensor<?x?x?xbf16>
  %up_f = call @widen3(%up_d) : (tensor<?x?x?xbf16>) -> tensor<?x?x?xf32>
  call @print3(%up_f) : (tensor<?x?x?xf32>) -> ()
  // CHECK: sizes = [1, 1, 4]
  // CHECK-NEXT: {{\[}}[4, 7, 29, 35]]]
  %kn_d = tensor.cast %kn : tensor<2x2x1xbf16> to tensor<?x?x?xbf16>
  %kn_f = call @widen3(%kn_d) : (tensor<?x?x?xbf16>) -> tensor<?x?x?xf32>
  call @print3(%kn_f) : (tensor<?x?x?xf32>) -> ()
  // CHECK: sizes = [2, 2, 1]
  // CHECK-NEXT: {{\[}}[1],
  // CHECK-NEXT: [10]],
  // CHECK-NEXT: {{\[}}[3],
  // CHECK-NEXT: [12]]]
  %vv_d = tensor.cast %vv : tensor<2x2x2xbf16> to tensor<?x?x?xbf16>
  %vv_f = call @widen3(%vv_d) : (tensor<?x?x?xbf16>) -> tensor<?x?x?xf32>
  call @print3(%vv_f) : (tensor<?x?x?xf32>) -> ()
  // CHECK: sizes = [2, 2, 2]
  // CHECK-NEXT: {{\[}}[4, 7],
  // CHECK-NEXT: [13, 16]],
  // CHECK-NEXT: {{\[}}[6, 9],
  // CHECK-NEXT: [15, 18]]]

  //===--------------------------------------------------------------------===//
  // Prefill. Every cache slot that holds no context row is NaN: unused
  // slots, the unused page 0 that request 0's table points at, and the new
  // tokens' own slots (their K/V must come from kv_c / k_pe).
  // block_table = [[2, 0], [1, 3]].
  //===--------------------------------------------------------------------===//
  %pf_q = arith.constant dense<[[[-0.25, -0.25, -0.5, -1.0], [-0.5, 0.75, 0.75, -0.75]],
                                [[0.25, -0.0, 0.25, 0.25], [-0.5, 1.0, -0.0, 0.25]],
                                [[0.25, -0.75, -1.0, -0.25], [0.5, 0.75, 0.5, -0.75]]]> : tensor<3x2x4xf32>
  %pf_kv = arith.constant dense<[[0.25, 1.0, -0.5, -0.75], [-1.0, 0.0, -0.0, 0.75], [-0.5, 0.5, 0.25, 0.5]]> : tensor<3x4xf32>
  %pf_pe = arith.constant dense<[[[0.25, -1.0]], [[0.25, 0.0]], [[0.25, 1.0]]]> : tensor<3x1x2xf32>
  %pf_w = arith.constant dense<[[0.75, 0.5, 0.75, 0.0], [0.75, -1.0, -1.0, -1.0], [-0.5, -0.5, -0.5, 0.25],
                                [-1.0, 0.25, -0.75, 0.25], [-1.0, -0.5, 1.0, 0.0], [0.5, 0.25, 0.25, -0.5],
                                [0.25, -1.0, 0.5, 1.0], [0.75, -1.0, -0.25, -0.25]]> : tensor<8x4xf32>
  %ctx0 = arith.constant dense<[[0.25, 0.75, 0.5, -0.5, -0.5, 0.75],
                                [-1.0, 0.75, 0.5, -0.0, -0.5, -0.5],
                                [-0.5, -0.0, 0.0, 0.0, 1.0, 0.5]]> : tensor<3x6xf32>
  %ctx1a = arith.constant dense<[[-0.0, -0.5, -1.0, -0.5, 0.5, -0.5], [-0.25, -1.0, 0.75, -0.75, -0.5, 0.75],
                                 [0.0, 0.75, 0.25, 0.5, -0.75, 0.0], [0.0, 0.75, -0.25, 0.25, -1.0, -0.25],
                                 [-0.25, -0.75, 0.75, -0.25, 1.0, 0.25], [0.25, 0.25, 0.25, -0.75, -0.0, -0.5],
                                 [-0.25, -0.75, 1.0, -0.5, 0.25, -0.5], [0.75, 0.25, -0.75, 0.75, 1.0, 0.75],
                                 [0.25, -0.75, -0.5, 0.75, 0.0, -0.75], [0.75, 0.25, 0.25, -0.25, -0.25, -0.5],
                                 [-1.0, 0.75, -0.0, 0.0, -0.25, 0.5], [-1.0, -0.25, -1.0, -0.75, 1.0, 0.25],
                                 [-0.25, 0.0, 0.75, -0.25, 0.25, 0.25], [-0.25, 0.0, 0.5, 0.75, -0.75, 0.75],
                                 [-1.0, 0.5, 0.5, -0.75, -0.25, 0.75], [-1.0, 0.25, 0.5, 0.0, 0.5, -0.5]]> : tensor<16x6xf32>
  %ctx1b = arith.constant dense<[[-0.5, -0.25, -0.75, -0.25, 1.0, 0.25], [-0.25, -0.5, 1.0, -0.0, 1.0, 0.0],
                                 [0.0, 0.75, 0.5, 0.25, -0.25, 0.75], [-0.25, 0.75, -0.75, -0.25, 0.0, 1.0]]> : tensor<4x6xf32>
  %poison = tensor.splat %nan : tensor<4x16x6xf32>
  %c1 = tensor.insert_slice %ctx0 into %poison[2, 0, 0] [1, 3, 6] [1, 1, 1] : tensor<3x6xf32> into tensor<4x16x6xf32>
  %c2 = tensor.insert_slice %ctx1a into %c1[1, 0, 0] [1, 16, 6] [1, 1, 1] : tensor<16x6xf32> into tensor<4x16x6xf32>
  %cache = tensor.insert_slice %ctx1b into %c2[3, 0, 0] [1, 4, 6] [1, 1, 1] : tensor<4x6xf32> into tensor<4x16x6xf32>
  %bt = arith.constant dense<[[2, 0], [1, 3]]> : tensor<2x2xi32>
  %qsl = arith.constant dense<[0, 2, 3]> : tensor<3xi32>
  %lens = arith.constant dense<[5, 21]> : tensor<2xi32>
  %expected = arith.constant dense<[[[-0.32222089171409607, 0.36209774017333984], [-1.2869988679885864, -0.637130856513977]],
                                    [[-0.14258693158626556, 0.3805513381958008], [-0.9626244306564331, -0.6804266571998596]],
                                    [[-0.11111915111541748, 0.14020980894565582], [-0.02282210998237133, -0.1373768150806427]]]> : tensor<3x2x2xf32>
  %tol = arith.constant 2.0e-6 : f32

  %p0 = call @prefill_default(%pf_q, %pf_kv, %pf_pe, %pf_w, %cache, %bt, %qsl, %lens)
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  call @check_close(%p0, %expected, %tol) : (tensor<3x2x2xf32>, tensor<3x2x2xf32>, f32) -> ()
  // CHECK: 1
  %p40 = call @prefill_w40(%pf_q, %pf_kv, %pf_pe, %pf_w, %cache, %bt, %qsl, %lens)
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  call @check_close(%p40, %expected, %tol) : (tensor<3x2x2xf32>, tensor<3x2x2xf32>, f32) -> ()
  // CHECK-NEXT: 1
  %p16 = call @prefill_w16(%pf_q, %pf_kv, %pf_pe, %pf_w, %cache, %bt, %qsl, %lens)
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  call @check_close(%p16, %expected, %tol) : (tensor<3x2x2xf32>, tensor<3x2x2xf32>, f32) -> ()
  // CHECK-NEXT: 1
  %p5 = call @prefill_w5(%pf_q, %pf_kv, %pf_pe, %pf_w, %cache, %bt, %qsl, %lens)
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  call @check_close(%p5, %expected, %tol) : (tensor<3x2x2xf32>, tensor<3x2x2xf32>, f32) -> ()
  // CHECK-NEXT: 1
  %p1 = call @prefill_w1(%pf_q, %pf_kv, %pf_pe, %pf_w, %cache, %bt, %qsl, %lens)
      : (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x1x2xf32>, tensor<8x4xf32>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xf32>
  call @check_close(%p1, %expected, %tol) : (tensor<3x2x2xf32>, tensor<3x2x2xf32>, f32) -> ()
  // CHECK-NEXT: 1

  // The inputs are multiples of 1/4, exact in bf16; the output is rounded
  // once (|out| < 2, so within 2^-8).
  %bq_e = tensor.empty() : tensor<3x2x4xbf16>
  %bq = linalg.map { arith.truncf } ins(%pf_q : tensor<3x2x4xf32>) outs(%bq_e : tensor<3x2x4xbf16>)
  %bkv_e = tensor.empty() : tensor<3x4xbf16>
  %bkv = linalg.map { arith.truncf } ins(%pf_kv : tensor<3x4xf32>) outs(%bkv_e : tensor<3x4xbf16>)
  %bpe_e = tensor.empty() : tensor<3x1x2xbf16>
  %bpe = linalg.map { arith.truncf } ins(%pf_pe : tensor<3x1x2xf32>) outs(%bpe_e : tensor<3x1x2xbf16>)
  %bw_e = tensor.empty() : tensor<8x4xbf16>
  %bw = linalg.map { arith.truncf } ins(%pf_w : tensor<8x4xf32>) outs(%bw_e : tensor<8x4xbf16>)
  %pb = call @prefill_bf16(%bq, %bkv, %bpe, %bw, %cache, %bt, %qsl, %lens)
      : (tensor<3x2x4xbf16>, tensor<3x4xbf16>, tensor<3x1x2xbf16>, tensor<8x4xbf16>, tensor<4x16x6xf32>, tensor<2x2xi32>, tensor<3xi32>, tensor<2xi32>) -> tensor<3x2x2xbf16>
  %pb_d = tensor.cast %pb : tensor<3x2x2xbf16> to tensor<?x?x?xbf16>
  %pb_f = call @widen3(%pb_d) : (tensor<?x?x?xbf16>) -> tensor<?x?x?xf32>
  %pb_s = tensor.cast %pb_f : tensor<?x?x?xf32> to tensor<3x2x2xf32>
  %bf16_tol = arith.constant 3.90625e-3 : f32
  call @check_close(%pb_s, %expected, %bf16_tol) : (tensor<3x2x2xf32>, tensor<3x2x2xf32>, f32) -> ()
  // CHECK-NEXT: 1
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
