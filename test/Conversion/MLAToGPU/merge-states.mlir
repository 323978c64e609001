// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_90a | FileCheck %s
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_90a format=bin" -o /dev/null %}
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_100a format=bin" -o /dev/null %}

// `mla_merge_states`: one warp per (token, head) row. A side is live when
// |lse| < inf (NaN compares false); the anchor is the larger live LSE (0 if
// none), weights 2^((lse - anchor) log2 e) selected to 0 for dead sides and
// normalised by their sum (0 when nothing is live), the LSE
// anchor + ln(sum) or -inf. Every output entry drops a side whose weight is
// 0 with a select, so NaN in a dead side's output never reaches the result.
// The merged LSE is stored by lane 0 after a warp barrier (in-place merges).
// CHECK-LABEL: gpu.func @mla_merge_states(
// CHECK-SAME:    %[[OA:[^:]*]]: !llvm.ptr<1>, %[[LA:[^:]*]]: !llvm.ptr<1>, %[[OB:[^:]*]]: !llvm.ptr<1>, %[[LB:[^:]*]]: !llvm.ptr<1>, %[[OUT:[^:]*]]: !llvm.ptr<1>, %[[LSE:[^:]*]]: !llvm.ptr<1>, %[[T:[^:]*]]: i32) kernel
// CHECK-SAME:    known_block_size = array<i32: 128, 1, 1>
// CHECK:         %[[ROWS:.*]] = arith.muli %[[T]], %c16_i32 : i32
// CHECK:         arith.cmpi slt, %{{.*}}, %[[ROWS]] : i32
// CHECK:         llvm.getelementptr %[[LA]][
// CHECK:         llvm.getelementptr %[[LB]][
// CHECK:         %[[LIVEA:.*]] = arith.cmpf olt, %{{.*}}, %cst : f32
// CHECK:         %[[LIVEB:.*]] = arith.cmpf olt,
// CHECK:         arith.ori %[[LIVEA]], %[[LIVEB]] : i1
// CHECK:         arith.maximumf
// CHECK:         ex2.approx.ftz.f32
// CHECK:         arith.select %[[LIVEA]],
// CHECK:         ex2.approx.ftz.f32
// CHECK:         arith.select %[[LIVEB]],
// CHECK:         arith.cmpf une, %{{.*}}, %{{.*}} : f32
// CHECK:         lg2.approx.ftz.f32
// CHECK:         llvm.getelementptr %[[OA]][
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK:         llvm.getelementptr %[[OB]][
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<8xbf16>
// CHECK-COUNT-2: arith.cmpf one, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK:         llvm.getelementptr %[[OUT]][
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xbf16>, !llvm.ptr<1>
// CHECK:         nvvm.bar.warp.sync %c-1_i32 : i32
// CHECK:         scf.if
// CHECK:           llvm.getelementptr %[[LSE]][
// CHECK:           llvm.store %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
func.func @merge(%oa: tensor<?x16x128xbf16>, %la: tensor<16x?xf32>, %ob: tensor<?x16x128xbf16>, %lb: tensor<16x?xf32>) -> (tensor<?x16x128xbf16>, tensor<16x?xf32>) {
  %o, %l = mla.merge_states %oa, %la, %ob, %lb : (tensor<?x16x128xbf16>, tensor<16x?xf32>, tensor<?x16x128xbf16>, tensor<16x?xf32>) -> (tensor<?x16x128xbf16>, tensor<16x?xf32>)
  return %o, %l : tensor<?x16x128xbf16>, tensor<16x?xf32>
}

// f32 states with H = 36: 4 entries (16 bytes) per access, 9 groups; no
// rounding at the end.
// CHECK-LABEL: gpu.func @mla_merge_states_1(
// CHECK:         llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK-NOT:     arith.truncf
// CHECK:         llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
func.func @merge_f32(%oa: tensor<5x3x36xf32>, %la: tensor<3x5xf32>, %ob: tensor<5x3x36xf32>, %lb: tensor<3x5xf32>) -> (tensor<5x3x36xf32>, tensor<3x5xf32>) {
  %o, %l = mla.merge_states %oa, %la, %ob, %lb : (tensor<5x3x36xf32>, tensor<3x5xf32>, tensor<5x3x36xf32>, tensor<3x5xf32>) -> (tensor<5x3x36xf32>, tensor<3x5xf32>)
  return %o, %l : tensor<5x3x36xf32>, tensor<3x5xf32>
}
