// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_100a | FileCheck %s
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_90a format=bin" -o /dev/null %}
// RUN: %if ptxas %{ env CUDA_ROOT=/usr/local/cuda mla-opt %s --mla-to-nvvm="chip=sm_100a format=bin" -o /dev/null %}

// `mla_up_proj_kv`, the mma.sync build (sm_100a; sm_90a runs the wgmma
// build of up-proj-kv-sm90.mlir): [S, 512] x [512, N*(P+V)] with mma.sync. Slice 0 is
// staged before the loop (8 zero-filling 16-byte cp.async per thread: 4 of
// the latent tile, 4 of the kv_b_proj tile, one commit group); each of the
// 8 K steps waits for its slice, barriers, stages the next one (if any)
// into the other ring slot, and runs 4 k16 steps of 2 A + 2 B ldmatrix.x4
// and 8 m16n8k16 MMAs (32 f32 accumulators per thread). Column c goes to
// k_nope when c % (P+V) < P, else to v.
// CHECK-LABEL: gpu.func @mla_up_proj_kv(
// CHECK-SAME:    %[[LAT:[^:]*]]: !llvm.ptr<1>, %[[W:[^:]*]]: !llvm.ptr<1>, %[[K:[^:]*]]: !llvm.ptr<1>, %[[V:[^:]*]]: !llvm.ptr<1>, %[[S:[^:]*]]: i32) kernel
// CHECK-SAME:    known_block_size = array<i32: 128, 1, 1>
// CHECK:         llvm.mlir.addressof @mla_dyn_smem
// CHECK-COUNT-8: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}}
// CHECK:         nvvm.cp.async.commit.group
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c8_i32{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK:           nvvm.cp.async.wait.group 0
// CHECK:           nvvm.barrier0
// CHECK:           scf.if
// CHECK-COUNT-8:     nvvm.cp.async.shared.global
// CHECK:           nvvm.cp.async.commit.group
// CHECK-COUNT-4:   nvvm.ldmatrix {{.*}} num = 4
// CHECK-COUNT-8:   nvvm.mma.sync {{.*}} multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK:         nvvm.cp.async.wait.group 0
// CHECK:         %[[J:.*]] = arith.remui %{{.*}}, %c256_i32{{[_0-9]*}} : i32
// CHECK:         arith.cmpi slt, %[[J]], %c128_i32{{[_0-9]*}} : i32
// CHECK:         arith.cmpi slt, %{{.*}}, %[[S]] : i32
// CHECK:         arith.cmpi slt, %{{.*}}, %c4096_i32{{[_0-9]*}} : i32
// CHECK:         llvm.getelementptr %[[K]][
// CHECK:         llvm.getelementptr %[[V]][
// CHECK:         llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
func.func @upkv(%lat: tensor<?x512xbf16>, %w: tensor<4096x512xbf16>) -> (tensor<?x16x128xbf16>, tensor<?x16x128xbf16>) {
  %k, %v = mla.up_proj_kv %lat, %w : tensor<?x512xbf16>, tensor<4096x512xbf16> -> tensor<?x16x128xbf16>, tensor<?x16x128xbf16>
  return %k, %v : tensor<?x16x128xbf16>, tensor<?x16x128xbf16>
}

// f16, L = 64 (one K step), P = 24, V = 40: the f16 MMA, a split at 24 of
// every 64 columns.
// CHECK-LABEL: gpu.func @mla_up_proj_kv_1(
// CHECK:         nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK:         arith.remui %{{.*}}, %c64_i32{{[_0-9]*}} : i32
// CHECK:         arith.cmpi slt, %{{.*}}, %c24_i32{{[_0-9]*}} : i32
// CHECK:         llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<1>
func.func @upkv_f16(%lat: tensor<?x64xf16>, %w: tensor<192x64xf16>) -> (tensor<?x3x24xf16>, tensor<?x3x40xf16>) {
  %k, %v = mla.up_proj_kv %lat, %w : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x3x24xf16>, tensor<?x3x40xf16>
  return %k, %v : tensor<?x3x24xf16>, tensor<?x3x40xf16>
}
