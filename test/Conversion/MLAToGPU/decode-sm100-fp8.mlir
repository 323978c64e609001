// The sm_100a decode over fp8 caches (fp8_e4m3 and fp8_ds_mla): the raw
// rows of each KV block go into a ring of raw blocks by 16-byte cp.async
// copies (tokens past the piece zero-filled), the block is dequantised into
// the one bf16 KV tile (Fp8RowChunks: fp8_e4m3's exact codes, fp8_ds_mla's
// codes times their tile scale and its bf16 RoPE values), published to the
// tensor cores (fence.proxy.async, CTA barrier), and the tcgen05 MMAs are
// those of a bf16 cache. fp8_e4m3's kv_scale is the 12th parameter, read
// once, into the scores' scale and the normaliser. Compiled and assembled
// for sm_100a only: no Blackwell GPU runs it here or on the device machines.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling --convert-mla-to-gpu=chip=sm_100a | FileCheck %s
// RUN: mla-opt %s --split-input-file --mla-to-nvvm="chip=sm_100a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx --all
// RUN: %if ptxas %{ for f in %t.ptx.*; do /usr/local/cuda/bin/ptxas -arch=sm_100a -v $f -o %t.cubin 2>&1 || exit 1; done | FileCheck %s --check-prefix=PTXAS %}
// fp8_ds_mla's 656-byte rows take 32-token blocks (Q, one KV tile, P and two
// raw blocks in 227 KiB), fp8_e4m3's 576-byte rows 64-token ones.
// RUN: mla-opt %s --split-input-file --mla-select-gpu-tiling | FileCheck %s --check-prefix=TILE
// TILE: format = fp8_e4m3
// TILE-SAME: mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 1, kv_block = 64, stages = 2>
// TILE: format = fp8_ds_mla
// TILE-SAME: mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 1, kv_block = 32, stages = 2>

// PTXAS-NOT:   {{warning|error}}
// PTXAS:       Compiling entry function 'mla_decode_partial' for 'sm_100a'
// PTXAS-NEXT:  Function properties for mla_decode_partial
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{warning|error}}
// PTXAS:       Compiling entry function 'mla_decode_partial' for 'sm_100a'
// PTXAS-NEXT:  Function properties for mla_decode_partial
// PTXAS-NEXT:  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{warning|error}}

// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME:    %arg10: f32, %arg11: !llvm.ptr<1>) kernel
// CHECK:         [[KVS:%.+]] = llvm.load %arg11 {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK:         nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK:         arith.mulf %{{.*}}, [[KVS]] : f32
// CHECK:         scf.for
// CHECK:           nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK:           nvvm.fence.proxy
// CHECK-NEXT:      nvvm.tcgen05.fence <before>
// CHECK-NEXT:      nvvm.barrier0
// CHECK:           llvm.load {{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xi32>
// CHECK:           cvt.rn.f16x2.e4m3x2
// CHECK-NOT:       arith.mulf
// CHECK:           llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK:           nvvm.fence.proxy
// CHECK-NEXT:      nvvm.tcgen05.fence <before>
// CHECK-NEXT:      nvvm.barrier0
// CHECK:           nvvm.tcgen05.mma
// CHECK:         arith.divf [[KVS]], %{{.*}} : f32
module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @e4m3(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x128x576xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_e4m3, page_size = 128, scale = 0.5 : f32> scale 0.0721687824
        : (tensor<?x1x128x576xbf16>, tensor<?x128x576xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}

// -----

// fp8_ds_mla, causal s_q = 2 at 16 heads: no kv_scale; the latent chunks
// times their tile's f32 scale, then the RoPE chunks as bf16 (16-byte loads).
// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME:    %arg10: f32) kernel
// CHECK:         scf.for
// CHECK:           nvvm.fence.proxy
// CHECK-NEXT:      nvvm.tcgen05.fence <before>
// CHECK-NEXT:      nvvm.barrier0
// CHECK:           llvm.load {{.*}} {alignment = 4 : i64} : !llvm.ptr<3> -> f32
// CHECK:           llvm.load {{.*}} {alignment = 8 : i64} : !llvm.ptr<3> -> vector<2xi32>
// CHECK:           cvt.rn.f16x2.e4m3x2
// CHECK:           arith.mulf
// CHECK:           llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK:           llvm.load {{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK:           llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK:           nvvm.fence.proxy
// CHECK-NEXT:      nvvm.tcgen05.fence <before>
// CHECK-NEXT:      nvvm.barrier0
// CHECK:           nvvm.tcgen05.mma
module attributes {mla.target = #mla.target<chip = sm100>} {
  func.func @ds(%q: tensor<?x2x16x576xbf16>, %cache: tensor<?x128x656xi8>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = fp8_ds_mla, page_size = 128> scale 0.0721687824 causal
        : (tensor<?x2x16x576xbf16>, tensor<?x128x656xi8>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>)
    return %o, %l : tensor<?x2x16x512xbf16>, tensor<?x16x2xf32>
  }
}
