// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_100a | FileCheck %s
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_90a format=bin" -o /dev/null %}
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_100a format=bin" -o /dev/null %}

// `mla_mha`, the CUDA-core build (sm_100a, f32, odd widths; the sm_90a
// bf16/f16 build is mha-sm90.mlir): one warp per (token, head) row.
// The row's request comes from a binary search of cu_seqlens_q; causal rows
// see min(max(k_len - q_len + i + 1, 0), k_len) keys. The q row is scaled by
// scale * log2 e = 0.0721687824 * 1.44269504 once; per key, 6 products per
// lane (192 / 32) are summed over the warp (5 butterfly shuffles), the
// running max/sum rescaled with ex2 and 4 V columns per lane (128 / 32)
// accumulated. Out = acc / l (0 without keys), lse = ln 2 (m + log2 l) or
// -inf, stored by lane 0 at [n, t].
// CHECK-LABEL: gpu.func @mla_mha(
// CHECK-SAME:    %[[Q:[^:]*]]: !llvm.ptr<1>, %[[K:[^:]*]]: !llvm.ptr<1>, %[[V:[^:]*]]: !llvm.ptr<1>, %[[CUQ:[^:]*]]: !llvm.ptr<1>, %[[CUK:[^:]*]]: !llvm.ptr<1>, %[[OUT:[^:]*]]: !llvm.ptr<1>, %[[LSE:[^:]*]]: !llvm.ptr<1>, %[[B:[^:]*]]: i32, %[[T:[^:]*]]: i32) kernel
// CHECK-SAME:    known_block_size = array<i32: 128, 1, 1>
// CHECK:         scf.while
// CHECK:           llvm.getelementptr %[[CUQ]][
// CHECK:         llvm.getelementptr %[[CUK]][
// CHECK:         arith.maxsi
// CHECK:         arith.minsi
// CHECK-COUNT-6: arith.constant 0.1041175{{[0-9]*}} : f32
// CHECK:         scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32) : i32 {
// CHECK-COUNT-6:   llvm.getelementptr %[[K]][
// CHECK-COUNT-5:   nvvm.shfl.sync bfly
// CHECK:           ex2.approx.ftz.f32
// CHECK:           ex2.approx.ftz.f32
// CHECK-COUNT-4:   llvm.getelementptr %[[V]][
// CHECK:         }
// CHECK-COUNT-4: arith.truncf %{{.*}} : f32 to bf16
// CHECK:         llvm.getelementptr %[[LSE]][
// CHECK:         lg2.approx.ftz.f32
func.func @causal(%q: tensor<?x16x192xbf16>, %k: tensor<?x16x192xbf16>, %v: tensor<?x16x128xbf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>) -> (tensor<?x16x128xbf16>, tensor<16x?xf32>) {
  %o, %l = mla.mha %q, %k, %v, %cq, %ck scale 0.0721687824 causal : (tensor<?x16x192xbf16>, tensor<?x16x192xbf16>, tensor<?x16x128xbf16>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x16x128xbf16>, tensor<16x?xf32>)
  return %o, %l : tensor<?x16x128xbf16>, tensor<16x?xf32>
}

// Non-causal f32 with widths that are no multiple of 32 (D = 40, V = 20):
// every row sees all k_len keys; lanes past a row read nothing (the
// second q/k share is guarded by col < 40, the V share by col < 20).
// CHECK-LABEL: gpu.func @mla_mha_1(
// CHECK:         arith.cmpi slt, %{{.*}}, %c40_i32{{[_0-9]*}} : i32
// CHECK:         scf.for {{.*}} -> (f32, f32, f32) : i32 {
// CHECK:           arith.cmpi slt, %{{.*}}, %c40_i32{{[_0-9]*}} : i32
// CHECK:           scf.if %{{.*}} -> (f32) {
// CHECK:           arith.cmpi slt, %{{.*}}, %c20_i32{{[_0-9]*}} : i32
// CHECK-NOT:     arith.truncf
// CHECK:         gpu.return
func.func @full(%q: tensor<?x3x40xf32>, %k: tensor<?x3x40xf32>, %v: tensor<?x3x20xf32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>) -> (tensor<?x3x20xf32>, tensor<3x?xf32>) {
  %o, %l = mla.mha %q, %k, %v, %cq, %ck scale 0.125 : (tensor<?x3x40xf32>, tensor<?x3x40xf32>, tensor<?x3x20xf32>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x3x20xf32>, tensor<3x?xf32>)
  return %o, %l : tensor<?x3x20xf32>, tensor<3x?xf32>
}
