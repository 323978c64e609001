// Executes mla.attention through mla-select-algorithm on the CPU and checks
// that the absorbed decode path and the up-projected prefill path compute the
// same attention: every split of a mixed batch must agree with mla.prefill of
// the whole batch.
//
// With decode-threshold=1 the two single-token requests take mla.decode and
// the 5-token request mla.prefill; the batches are split at compile time
// (constant metadata) and at run time (metadata passed as arguments).
//
// RUN: mla-opt %s --mla-select-algorithm=decode-threshold=1 --mla-to-llvm-cpu | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs | FileCheck %s
//
// N = 2, P = 8, R = 8, L = 16, V = 4, pages of 16 rows (D = 24), f32.
// Requests (tokens in batch order A; B is the order r0, r2, r1, so its decode
// requests are not all first):
//   r0: q_len 1, seq_len 10, pages [5]     token 0
//   r1: q_len 1, seq_len 20, pages [2, 6]  token 1
//   r2: q_len 5, seq_len 9,  pages [3]     tokens 2-6
// Token 7 is padding (slot -1, output 0). Unused cache slots and pages (0, 1,
// 4, 7, which the tables also point at) hold NaN.

!q = tensor<8x2x16xf32>
!kv = tensor<8x16xf32>
!pe = tensor<8x1x8xf32>
!w = tensor<24x16xf32>
!cache = tensor<8x16x24xf32>
!out = tensor<8x2x4xf32>

func.func private @printMemrefF32(tensor<*xf32>)

// 0.5 * sin(0.7 i + 1.3 j + seed): deterministic data of moderate size.
func.func private @pattern(%rows: index, %cols: index, %seed: f32) -> tensor<?x?xf32> {
  %t = tensor.generate %rows, %cols {
  ^bb0(%i: index, %j: index):
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %fj = arith.sitofp %jj : i32 to f32
    %a = arith.constant 0.7 : f32
    %b = arith.constant 1.3 : f32
    %half = arith.constant 0.5 : f32
    %x = arith.mulf %fi, %a : f32
    %y = arith.mulf %fj, %b : f32
    %s = arith.addf %x, %y : f32
    %z = arith.addf %s, %seed : f32
    %sin = math.sin %z : f32
    %v = arith.mulf %sin, %half : f32
    tensor.yield %v : f32
  } : tensor<?x?xf32>
  return %t : tensor<?x?xf32>
}

// The reference: the whole batch as one mla.prefill.
func.func private @reference(%q: !q, %kv: !kv, %pe: !pe, %w: !w, %cache: !cache,
                             %bt: tensor<3x2xi32>, %qsl: tensor<4xi32>, %lens: tensor<3xi32>) -> !out {
  %o = mla.prefill %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (!q, !kv, !pe, !w, !cache, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> !out
  return %o : !out
}

// Batch A with constant metadata: the split is decided at compile time.
func.func private @static_a(%q: !q, %kv: !kv, %pe: !pe, %w: !w, %cache: !cache) -> !out {
  %bt = arith.constant dense<[[5, 7], [2, 6], [3, 7]]> : tensor<3x2xi32>
  %qsl = arith.constant dense<[0, 1, 2, 7]> : tensor<4xi32>
  %lens = arith.constant dense<[10, 20, 9]> : tensor<3xi32>
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (!q, !kv, !pe, !w, !cache, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> !out
  return %o : !out
}

// Batch B with constant metadata: the decode requests r0 and r1 are not
// adjacent.
func.func private @static_b(%q: !q, %kv: !kv, %pe: !pe, %w: !w, %cache: !cache) -> !out {
  %bt = arith.constant dense<[[5, 7], [3, 7], [2, 6]]> : tensor<3x2xi32>
  %qsl = arith.constant dense<[0, 1, 6, 7]> : tensor<4xi32>
  %lens = arith.constant dense<[10, 9, 20]> : tensor<3xi32>
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (!q, !kv, !pe, !w, !cache, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> !out
  return %o : !out
}

// Metadata known at run time: the split is read from query_start_loc.
func.func private @dynamic(%q: !q, %kv: !kv, %pe: !pe, %w: !w, %cache: !cache,
                           %bt: tensor<3x2xi32>, %qsl: tensor<4xi32>, %lens: tensor<3xi32>) -> !out {
  %o = mla.attention %q, %kv, %pe, %w, %cache[%bt, %qsl, %lens] layout #mla.cache_layout<format = f32, page_size = 16> scale 0.25
      : (!q, !kv, !pe, !w, !cache, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> !out
  return %o : !out
}

// Prints whether max |a - b| < 1e-5 (NaN fails).
func.func private @check_close(%a: !out, %b: !out) {
  %zero = arith.constant 0.0 : f32
  %init = tensor.from_elements %zero : tensor<f32>
  %err = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>,
                                           affine_map<(i, j, k) -> ()>],
                          iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%a, %b : !out, !out) outs(%init : tensor<f32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %d = arith.subf %x, %y : f32
      %m = math.absf %d : f32
      %n = arith.maximumf %acc, %m : f32
      linalg.yield %n : f32
  } -> tensor<f32>
  %e = tensor.extract %err[] : tensor<f32>
  %tol = arith.constant 1.0e-5 : f32
  %ok = arith.cmpf olt, %e, %tol : f32
  vector.print %ok : i1
  return
}

func.func private @print(%t: !out) {
  %u = tensor.cast %t : !out to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}

// Batch A's token rows in batch B's order: r0, r2, r1, padding.
func.func private @permute_q(%src: !q) -> !q {
  %r0 = tensor.extract_slice %src[0, 0, 0] [1, 2, 16] [1, 1, 1] : !q to tensor<1x2x16xf32>
  %r2 = tensor.extract_slice %src[2, 0, 0] [5, 2, 16] [1, 1, 1] : !q to tensor<5x2x16xf32>
  %r1 = tensor.extract_slice %src[1, 0, 0] [1, 2, 16] [1, 1, 1] : !q to tensor<1x2x16xf32>
  %pad = tensor.extract_slice %src[7, 0, 0] [1, 2, 16] [1, 1, 1] : !q to tensor<1x2x16xf32>
  %r = tensor.concat dim(0) %r0, %r2, %r1, %pad
      : (tensor<1x2x16xf32>, tensor<5x2x16xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) -> !q
  return %r : !q
}
func.func private @permute_kv(%src: !kv) -> !kv {
  %r0 = tensor.extract_slice %src[0, 0] [1, 16] [1, 1] : !kv to tensor<1x16xf32>
  %r2 = tensor.extract_slice %src[2, 0] [5, 16] [1, 1] : !kv to tensor<5x16xf32>
  %r1 = tensor.extract_slice %src[1, 0] [1, 16] [1, 1] : !kv to tensor<1x16xf32>
  %pad = tensor.extract_slice %src[7, 0] [1, 16] [1, 1] : !kv to tensor<1x16xf32>
  %r = tensor.concat dim(0) %r0, %r2, %r1, %pad
      : (tensor<1x16xf32>, tensor<5x16xf32>, tensor<1x16xf32>, tensor<1x16xf32>) -> !kv
  return %r : !kv
}
func.func private @permute_pe(%src: !pe) -> !pe {
  %r0 = tensor.extract_slice %src[0, 0, 0] [1, 1, 8] [1, 1, 1] : !pe to tensor<1x1x8xf32>
  %r2 = tensor.extract_slice %src[2, 0, 0] [5, 1, 8] [1, 1, 1] : !pe to tensor<5x1x8xf32>
  %r1 = tensor.extract_slice %src[1, 0, 0] [1, 1, 8] [1, 1, 1] : !pe to tensor<1x1x8xf32>
  %pad = tensor.extract_slice %src[7, 0, 0] [1, 1, 8] [1, 1, 1] : !pe to tensor<1x1x8xf32>
  %r = tensor.concat dim(0) %r0, %r2, %r1, %pad
      : (tensor<1x1x8xf32>, tensor<5x1x8xf32>, tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> !pe
  return %r : !pe
}

func.func @main() {
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c24 = arith.constant 24 : index
  %c32 = arith.constant 32 : index

  // New tokens and weights.
  %s1 = arith.constant 0.1 : f32
  %s2 = arith.constant 0.2 : f32
  %s3 = arith.constant 0.3 : f32
  %s4 = arith.constant 0.4 : f32
  %s5 = arith.constant 0.5 : f32
  %s6 = arith.constant 0.6 : f32
  %q_d = call @pattern(%c8, %c32, %s1) : (index, index, f32) -> tensor<?x?xf32>
  %q_s = tensor.cast %q_d : tensor<?x?xf32> to tensor<8x32xf32>
  %q = tensor.expand_shape %q_s [[0], [1, 2]] output_shape [8, 2, 16] : tensor<8x32xf32> into !q
  %kv_d = call @pattern(%c8, %c16, %s2) : (index, index, f32) -> tensor<?x?xf32>
  %kv = tensor.cast %kv_d : tensor<?x?xf32> to !kv
  %pe_d = call @pattern(%c8, %c8, %s3) : (index, index, f32) -> tensor<?x?xf32>
  %pe_s = tensor.cast %pe_d : tensor<?x?xf32> to tensor<8x8xf32>
  %pe = tensor.expand_shape %pe_s [[0], [1, 2]] output_shape [8, 1, 8] : tensor<8x8xf32> into !pe
  %w_d = call @pattern(%c24, %c16, %s4) : (index, index, f32) -> tensor<?x?xf32>
  %w = tensor.cast %w_d : tensor<?x?xf32> to !w

  // The cache: 32 context rows, then the new tokens' rows (cache_write runs
  // before attention, as in vLLM), in a cache of NaN.
  %ctx_kv_d = call @pattern(%c32, %c16, %s5) : (index, index, f32) -> tensor<?x?xf32>
  %ctx_kv = tensor.cast %ctx_kv_d : tensor<?x?xf32> to tensor<32x16xf32>
  %ctx_pe_d = call @pattern(%c32, %c8, %s6) : (index, index, f32) -> tensor<?x?xf32>
  %ctx_pe = tensor.cast %ctx_pe_d : tensor<?x?xf32> to tensor<32x8xf32>
  %ctx_slots = arith.constant dense<[80, 81, 82, 83, 84, 85, 86, 87, 88,
                                     32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 96, 97, 98,
                                     48, 49, 50, 51]> : tensor<32xi32>
  %new_slots = arith.constant dense<[89, 99, 52, 53, 54, 55, 56, -1]> : tensor<8xi32>
  %nan = arith.constant 0x7FC00000 : f32
  %poison = tensor.splat %nan : !cache
  %cache_ctx = mla.cache_write %ctx_kv, %ctx_pe, %ctx_slots layout #mla.cache_layout<format = f32, page_size = 16> into %poison
      : tensor<32x16xf32>, tensor<32x8xf32>, tensor<32xi32> into !cache
  %cache = mla.cache_write %kv, %pe, %new_slots layout #mla.cache_layout<format = f32, page_size = 16> into %cache_ctx
      : !kv, !pe, tensor<8xi32> into !cache

  %bt_a = arith.constant dense<[[5, 7], [2, 6], [3, 7]]> : tensor<3x2xi32>
  %qsl_a = arith.constant dense<[0, 1, 2, 7]> : tensor<4xi32>
  %lens_a = arith.constant dense<[10, 20, 9]> : tensor<3xi32>
  %ref_a = call @reference(%q, %kv, %pe, %w, %cache, %bt_a, %qsl_a, %lens_a)
      : (!q, !kv, !pe, !w, !cache, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> !out
  %sel_a = call @static_a(%q, %kv, %pe, %w, %cache) : (!q, !kv, !pe, !w, !cache) -> !out
  // Both results: token 0 (a decode in %sel_a) is not 0; the padding
  // token 7 is.
  call @print(%sel_a) : (!out) -> ()
  call @print(%ref_a) : (!out) -> ()
  // CHECK: sizes = [8, 2, 4] strides = [8, 4, 1] data =
  // CHECK-NEXT: {{\[\[\[0\.480[0-9]*, 0\.299[0-9]*, -0\.0227[0-9]*, -0\.333[0-9]*\],}}
  // CHECK: {{\[\[0, 0, 0, 0\],}}
  // CHECK-NEXT: {{\[0, 0, 0, 0\]\]\]}}
  // CHECK: sizes = [8, 2, 4] strides = [8, 4, 1] data =
  // CHECK-NEXT: {{\[\[\[0\.480[0-9]*, 0\.299[0-9]*, -0\.0227[0-9]*, -0\.333[0-9]*\],}}
  // CHECK: {{\[\[0, 0, 0, 0\],}}
  // CHECK-NEXT: {{\[0, 0, 0, 0\]\]\]}}
  call @check_close(%sel_a, %ref_a) : (!out, !out) -> ()
  // CHECK-NEXT: 1
  %dyn_a = call @dynamic(%q, %kv, %pe, %w, %cache, %bt_a, %qsl_a, %lens_a)
      : (!q, !kv, !pe, !w, !cache, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> !out
  call @check_close(%dyn_a, %ref_a) : (!out, !out) -> ()
  // CHECK-NEXT: 1

  %q_b = call @permute_q(%q) : (!q) -> !q
  %kv_b = call @permute_kv(%kv) : (!kv) -> !kv
  %pe_b = call @permute_pe(%pe) : (!pe) -> !pe
  %bt_b = arith.constant dense<[[5, 7], [3, 7], [2, 6]]> : tensor<3x2xi32>
  %qsl_b = arith.constant dense<[0, 1, 6, 7]> : tensor<4xi32>
  %lens_b = arith.constant dense<[10, 9, 20]> : tensor<3xi32>
  %ref_b = call @reference(%q_b, %kv_b, %pe_b, %w, %cache, %bt_b, %qsl_b, %lens_b)
      : (!q, !kv, !pe, !w, !cache, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> !out
  %sel_b = call @static_b(%q_b, %kv_b, %pe_b, %w, %cache) : (!q, !kv, !pe, !w, !cache) -> !out
  call @check_close(%sel_b, %ref_b) : (!out, !out) -> ()
  // CHECK-NEXT: 1
  %dyn_b = call @dynamic(%q_b, %kv_b, %pe_b, %w, %cache, %bt_b, %qsl_b, %lens_b)
      : (!q, !kv, !pe, !w, !cache, tensor<3x2xi32>, tensor<4xi32>, tensor<3xi32>) -> !out
  call @check_close(%dyn_b, %ref_b) : (!out, !out) -> ()
  // CHECK-NEXT: 1
  return
}
