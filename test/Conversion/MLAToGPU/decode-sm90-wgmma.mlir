// The wgmma sm_90a decode (tile suffix w) at DeepSeek-V3 sizes. Q and KV
// tiles are 64-column boxes of 128-byte swizzled rows; QK^T is
// wgmma m64n32k16 per warpgroup (its 32 of the 64 tokens), PV is
// wgmma m64n256k16 (its 256 of the 512 output columns) with V the
// transposed (MN-major) view of the same KV tile; generic-proxy writes
// (cp.async, P) are fenced before the async proxy reads them.
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: gpu.func @mla_decode_partial(
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: nvvm.cp.async.shared.global
// CHECK: scf.for
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// CHECK-SAME: p, 1, 1, 0, 0;
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: ex2.approx.ftz.f32
// CHECK: nvvm.fence.proxy
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK-SAME: p, 1, 1, 0, 1;
// CHECK-NOT: nvvm.ldmatrix
// CHECK-LABEL: gpu.func @mla_combine(

// PTX: .entry mla_decode_partial(
// PTX-DAG: cp.async.wait_group
// PTX-DAG: fence.proxy.async.shared::cta
// PTX-DAG: wgmma.fence.sync.aligned
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16
// PTX-DAG: wgmma.commit_group.sync.aligned
// PTX-DAG: wgmma.wait_group.sync.aligned
// PTX-DAG: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX: .entry mla_combine(

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
