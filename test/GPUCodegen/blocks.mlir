// The GPUCodegen blocks that no production kernel uses yet (TMA, mbarrier
// phases, the stage ring, setmaxnreg) and the inline PTX of InlinePTX.cpp
// (wgmma, ex2, lg2), in the kernels of mla-test-gpu-codegen-blocks: their IR,
// their PTX for sm_90a, and that ptxas assembles it.
// RUN: mla-opt %s --mla-test-gpu-codegen-blocks | FileCheck %s
// RUN: mla-opt %s --mla-test-gpu-codegen-blocks --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a %t.ptx -o %t.cubin %}

module {
}

// CHECK-LABEL: gpu.func @test_tma_ring
// CHECK:         nvvm.mbarrier.init
// CHECK:         nvvm.fence.mbarrier.init
// CHECK:         scf.for
// CHECK:           nvvm.mbarrier.arrive.expect_tx
// CHECK:           nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:         nvvm.mbarrier.arrive
// CHECK-LABEL: gpu.func @test_wgmma_softmax
// CHECK-SAME:    nvvm.minctasm = 1
// CHECK:         nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK:         nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK:         nvvm.setmaxregister decrease 40
// CHECK:         nvvm.setmaxregister increase 232
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;"
// CHECK:         llvm.inline_asm "lg2.approx.ftz.f32 $0, $1;"

// PTX-LABEL: .entry test_tma_ring(
// PTX:         mbarrier.init.shared{{(::cta)?}}.b64
// PTX:         fence.mbarrier_init.release.cluster;
// PTX:         mbarrier.arrive.expect_tx.{{.*}}b64
// PTX:         cp.async.bulk.tensor.2d.shared::cluster.global.{{.*}}mbarrier::complete_tx::bytes
// PTX:         mbarrier.try_wait.parity.shared{{(::cta)?}}.b64
// PTX:         mbarrier.arrive.{{.*}}b64
// PTX-LABEL: .entry test_wgmma_softmax(
// PTX:         .maxntid 256, 1, 1
// PTX:         .minnctapersm 1
// PTX:         cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16, {{.*}};
// PTX:         fence.proxy.async.shared::cta;
// PTX:         setmaxnreg.dec.sync.aligned.u32 40;
// PTX:         setmaxnreg.inc.sync.aligned.u32 232;
// PTX:         wgmma.fence.sync.aligned;
// PTX:         setp.ne.b32 p, {{.*}}, 0;
// PTX-NEXT:    wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{[{]}}{{(%[rf][0-9]+, )+}}%{{[rf][0-9]+}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 0;
// PTX:         wgmma.commit_group.sync.aligned;
// PTX:         wgmma.wait_group.sync.aligned 0;
// PTX:         ex2.approx.ftz.f32
// PTX:         lg2.approx.ftz.f32
