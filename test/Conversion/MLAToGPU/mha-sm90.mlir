// RUN: mla-opt %s --convert-mla-to-gpu=chip=sm_90a | FileCheck %s
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// The sm_90a tensor-core build of `mla_mha` (FlashAttention-3 structure):
// an llvm.func kernel whose q/k/v come as by-value TMA descriptors, 384
// threads (producer warpgroup + two consumer warpgroups), setmaxnreg 24/240,
// a Q mbarrier and K-full/V-full/empty barriers per ring stage (empty waits
// for all 256 consumer threads).
// CHECK-LABEL: llvm.func @mla_mha(
// CHECK-SAME:    %{{[^:]*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}
// CHECK-SAME:    nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// The CTA's head is its y index; its (segment, m-block) comes from a walk
// over cu_seqlens_q starting at its x index (tiles vary fastest).
// CHECK:         %[[HEAD:.*]] = nvvm.read.ptx.sreg.ctaid.y
// CHECK:         %[[TILE:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK:         scf.for {{.*}} iter_args(%{{[^ ]*}} = %[[TILE]]
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK:         nvvm.barrier0
// Producer: three 64-column Q boxes, then per block three K and two V boxes.
// CHECK:         nvvm.setmaxregister decrease 24
// CHECK:         nvvm.mbarrier.arrive.expect_tx
// CHECK-COUNT-3: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK:         scf.for
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           nvvm.mbarrier.arrive.expect_tx
// CHECK-COUNT-3:   nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK:           nvvm.mbarrier.arrive.expect_tx
// CHECK-COUNT-2:   nvvm.cp.async.bulk.tensor.shared.cluster.global
// Consumers: block 0's S = Q K^T (12 k-steps of m64n128k16 from shared
// memory) and softmax, then per later block S_n and the previous block's
// P V (8 register-A steps) issued in one turn of the ping-pong, S_n's
// softmax while P V runs, and finally the last block's P V.
// CHECK:         nvvm.setmaxregister increase 240
// CHECK:         nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK:         nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:         nvvm.wgmma.fence.aligned
// CHECK-COUNT-12: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, $128, $129, p, 1, 1, 0, 0;
// CHECK:         nvvm.wgmma.commit.group.sync.aligned
// CHECK:         nvvm.barrier.arrive
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         scf.if %{{.*}} -> (f32
// CHECK:         scf.for
// CHECK:           nvvm.barrier id
// CHECK-COUNT-12:  wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, $128, $129, p, 1, 1, 0, 0;
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           nvvm.wgmma.fence.aligned
// CHECK-COUNT-8:   wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;
// CHECK:           nvvm.wgmma.commit.group.sync.aligned
// CHECK:           nvvm.barrier.arrive
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:           nvvm.mbarrier.arrive
// CHECK:           [[MOVES:%.+]] = arith.cmpf ugt
// CHECK-NEXT:      [[MAX:%.+]] = llvm.intr.maximum
// CHECK-NEXT:      arith.select [[MOVES]], [[MAX]], %
// CHECK:           [[UNE0:%.+]] = arith.cmpf une
// CHECK-NEXT:      [[UNE1:%.+]] = arith.cmpf une
// CHECK-NEXT:      [[MOVED:%.+]] = arith.ori [[UNE1]], [[UNE0]]
// CHECK:           nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:           nvvm.mbarrier.arrive
// Conditional rescaling: o (64 registers) is multiplied only when a row's
// running max moved, and it moves only by more than 8 (base 2).
// CHECK:           scf.if [[MOVED]] -> (f32
// CHECK-COUNT-64:    arith.mulf
// CHECK:           } else {
// CHECK-NEXT:        scf.yield
// CHECK:         }
// CHECK-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;
// PTX-LABEL: .entry mla_mha(
// PTX:         .param .align 64 .b8 mla_mha_param_0[128]
// PTX:         .maxntid 384, 1, 1
// PTX:         setmaxnreg.dec.sync.aligned.u32 24
// PTX:         cp.async.bulk.tensor.3d
// PTX:         setmaxnreg.inc.sync.aligned.u32 240
// PTX:         wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// ptxas keeps every wgmma asynchronous (no C7520 serialisation, no
// injected warpgroup.arrive) and spills nothing.
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
func.func @causal(%q: tensor<?x16x192xbf16>, %k: tensor<?x16x192xbf16>, %v: tensor<?x16x128xbf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>) -> (tensor<?x16x128xbf16>, tensor<16x?xf32>) {
  %o, %l = mla.mha %q, %k, %v, %cq, %ck scale 0.0721687824 causal : (tensor<?x16x192xbf16>, tensor<?x16x192xbf16>, tensor<?x16x128xbf16>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x16x128xbf16>, tensor<16x?xf32>)
  return %o, %l : tensor<?x16x128xbf16>, tensor<16x?xf32>
}

// qk = v = 64, f16, non-causal: one box per tile row, m64n64 P V steps,
// no mask on blocks the key count covers.
// CHECK-LABEL: llvm.func @mla_mha_1(
// CHECK:         wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK:         wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
func.func @full(%q: tensor<?x4x64xf16>, %k: tensor<?x4x64xf16>, %v: tensor<?x4x64xf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>) -> (tensor<?x4x64xf16>, tensor<4x?xf32>) {
  %o, %l = mla.mha %q, %k, %v, %cq, %ck scale 0.125 : (tensor<?x4x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>, tensor<?xi32>, tensor<?xi32>) -> (tensor<?x4x64xf16>, tensor<4x?xf32>)
  return %o, %l : tensor<?x4x64xf16>, tensor<4x?xf32>
}
