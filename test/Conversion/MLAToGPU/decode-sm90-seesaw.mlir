// The seesaw sm_90a decode (tile suffix s, pinned by its tiling): the
// pipelined build's frame (an llvm.func of 384 threads taking q and the cache
// as two more by-value TMA maps; a producer warpgroup at 24 registers loading
// Q and nine boxes per block, an unloaded block only arriving on its full
// barriers) with FlashMLA's schedule in the consumers (240 registers). A
// slot is freed in three groups with their own empty barriers: V_L (boxes
// 0-3, warpgroup 0's 128 threads), V_R (boxes 4-7, warpgroup 1's) and the
// P box (8, all 256); the producer waits for each group just before loading
// (or, for an unloaded block, arriving on) its first box.
// Warpgroup 0 (then) and warpgroup 1 (else) loop over block pairs:
//  * WG0 scores block 2i whole (36 k-steps of m64n64k16, each box's four
//    after its full barrier and a wgmma.fence) and waits; the scores are
//    masked only in a block at the piece's (or causal limit's) edge, else
//    used as they are (scf.if yielding them; the scale goes into the row max
//    and each exponential's fma); softmax; V zeroing of the tokens outside
//    the piece (its half, in the edge block's branch); P (four stmatrix.x4
//    of 8 x 8 bf16 matrices, as FlashMLA stores it) and the max to shared
//    memory, fenced to the async proxy; its own named barrier 4 (128
//    threads); "P0 ready" (barrier 2, arrive); O_L += P0 V0_L (4 k-steps of
//    m64n256k16, P0 the A operand from registers as in FlashMLA's own-block
//    P V; warpgroup 1 reads P0 from the slot); waits on "P1 ready" (barrier
//    3); waits for P V and frees slot 0's V_L and its share of P; rescales;
//    V zeroing (then fence and barrier 4); waits for its V boxes of slot 1;
//    O_L += P1 V1_L; waits and frees slot 1's V_L and its share of P.
//  * WG0 arrives on "S0 done" (barrier 6) once its scores have landed.
//  * WG1 waits on "S0 done" (barrier 6), so its scores run while WG0's
//    softmax does, then issues the score of block 2i + 1, retires nothing but S1 stays in
//    flight (wait_group 1), waits on "P0 ready" (barrier 2), rescales O_R,
//    zeroes (fence, barrier 5), waits for its V boxes of slot 0, issues
//    O_R += P0 V0_R, waits for S1 alone (wait_group 1), softmax, zeroing
//    (in the edge branch), P1 (stmatrix) and the max, barrier 5, "P1 ready"
//    (barrier 3, arrive), waits for P V, frees slot 0's V_R and its share
//    of P, O_R += P1 V1_R (P1 from registers), waits and frees slot 1's V_R
//    and its share of P.
// Every rescaling of an O half (128 multiplies) sits in an scf.if taken only
// when one of the thread's rows' max moved: the running max moves only by
// more than 8 (base 2; arith.cmpf ugt), FlashAttention-4's conditional
// rescaling.
// The end adds the row sums in the Q tile with a last pair of hand-offs
// after each warpgroup's own barrier: WG0 arrives on "P0 ready" and waits on
// "P1 ready"; WG1 waits on "P0 ready" before it arrives on "P1 ready" (two
// arrivals of WG1 in a row, its loop's last and this one, would complete
// barrier 3 without WG0).
// With one piece (S = 1) the final bf16 rows are staged in the Q tile past
// its first KiB (row r at r * 1024, its 16-byte chunk c at c ^ (r % 8)):
// 64 four-byte shared stores per thread, named barrier 1, then a warp per
// row (rows warp, warp + 4, ...) loading and storing 16 bytes per lane.
// Then, only with combine counters (%arg13 not null) and S > 1, the merge
// by the last piece: named barrier 1 over the 256 consumers, consumer
// thread 0 counts the CTA into its row block's counter (fence, release add;
// the one that completes the count, S - 1 before it, fences and stores 0)
// and leaves that in a shared flag, barrier 1 again, and where the flag is
// set each warp merges its rows r = warp, warp + 8, ... four at a time (every
// row's loads of a step first) from the pieces' f32 partials (%arg5, %arg6)
// into out (%arg14, bf16) and lse (%arg15). No CTA waits for another: no
// spin loop.
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s
// RUN: mla-opt %s --mla-select-gpu-tiling --convert-mla-to-gpu | FileCheck %s --check-prefix=EF
// RUN: mla-opt %s --mla-to-nvvm="chip=sm_90a format=isa" -o %t.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: FileCheck %s --check-prefix=DESC < %t.ptx
// RUN: FileCheck %s --check-prefix=HINT < %t.ptx
// RUN: FileCheck %s --check-prefix=NOHINT < %t.ptx
// RUN: FileCheck %s --check-prefix=NOSPIN < %t.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}
// The causal s_q = 2 and f16 builds pass ptxas as cleanly.
// RUN: sed -e 's/x1x128x/x2x128x/g; s/x128x1xf32/x128x2xf32/g; s/scale 0.0721687824/scale 0.0721687824 causal/' %s | mla-opt --mla-to-nvvm="chip=sm_90a format=isa" -o %t.causal.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.causal.mlir %t.causal.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.causal.ptx -o %t.causal.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}
// RUN: sed -e 's/bf16/f16/g' %s | mla-opt --mla-to-nvvm="chip=sm_90a format=isa" -o %t.f16.mlir
// RUN: %python %mla_src_root/scripts/extract-gpu-payload.py %t.f16.mlir %t.f16.ptx
// RUN: FileCheck %s --check-prefix=F16 < %t.f16.ptx
// RUN: %if ptxas %{ /usr/local/cuda/bin/ptxas -arch=sm_90a -v %t.f16.ptx -o %t.f16.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS %}

// CHECK-LABEL: llvm.func @mla_decode_partial(
// CHECK-SAME:    %arg10: f32, %arg11: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %arg12: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, %arg13: !llvm.ptr<1>, %arg14: !llvm.ptr<1>, %arg15: !llvm.ptr<1>)
// CHECK-SAME:    nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
// The tensor maps go into the descriptor cache before anything else, one
// prefetch each.
// CHECK:         [[QMAP:%.+]] = llvm.ptrtoint %arg11 : !llvm.ptr to i64
// CHECK-NEXT:    llvm.inline_asm has_side_effects "prefetch.tensormap [$0];", "l" [[QMAP]]
// CHECK-NEXT:    [[KVMAP:%.+]] = llvm.ptrtoint %arg12 : !llvm.ptr to i64
// CHECK-NEXT:    llvm.inline_asm has_side_effects "prefetch.tensormap [$0];", "l" [[KVMAP]]
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-COUNT-9: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-NEXT:    nvvm.fence.mbarrier.init
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-COUNT-9: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-NEXT:    nvvm.fence.mbarrier.init
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK:         nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-NOT:     nvvm.mbarrier.init
// The Q tile's load goes out with the barriers' init, before the piece's
// bounds are read (seq_lens, split_bounds) and the CTA syncs.
// CHECK:         nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c73728_i32
// CHECK-COUNT-9: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg11,
// CHECK:         llvm.getelementptr %arg3[
// CHECK:         nvvm.barrier0
// CHECK:         nvvm.setmaxregister  decrease 24
// CHECK-NOT:     %arg11,
// CHECK:         scf.for
// CHECK:           nvvm.mbarrier.try_wait.parity
// CHECK:           scf.if
// CHECK-COUNT-4:     nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12,
// CHECK-NOT:         nvvm.cp.async.bulk.tensor
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4:     nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12,
// CHECK-NOT:         nvvm.cp.async.bulk.tensor
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK-NOT:         nvvm.mbarrier.try_wait.parity
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12,
// CHECK-NOT:         nvvm.cp.async.bulk.tensor
// CHECK:           } else {
// CHECK-COUNT-4:     nvvm.mbarrier.arrive %
// CHECK-NOT:         nvvm.mbarrier.arrive %
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK-COUNT-4:     nvvm.mbarrier.arrive %
// CHECK-NOT:         nvvm.mbarrier.arrive %
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK-NOT:         nvvm.mbarrier.try_wait.parity
// CHECK:             nvvm.mbarrier.arrive %
// CHECK-NOT:         nvvm.mbarrier.arrive %
// The same loop again, whose loads carry no L2 cache hint (EF below).
// CHECK:         } else {
// CHECK:           scf.for
// CHECK-COUNT-9:     nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12,
// CHECK-NOT:         nvvm.cp.async.bulk.tensor
// CHECK:         nvvm.setmaxregister  increase 240
// CHECK:         nvvm.mbarrier.try_wait.parity
// CHECK:         scf.if %{{.*}} -> (f32,
// CHECK:           scf.for
// CHECK:             "mov.b32 $0, $1;"
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:        nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:     wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK:             nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:        nvvm.wgmma.fence.aligned
// CHECK-COUNT-32:    wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             nvvm.barrier.arrive id = %c6_i32{{.*}} number_of_threads = %c256_i32
// CHECK:             scf.if %{{.*}} -> (f32,
// CHECK-COUNT-32:      arith.select %{{.*}}, %{{.*}}, %cst
// CHECK:               scf.yield
// CHECK-NEXT:        } else {
// CHECK-NEXT:          scf.yield
// CHECK:             [[SLACK:%.+]] = arith.addf %{{.*}}, %cst{{.*}}
// CHECK-NEXT:        [[MOVES:%.+]] = arith.cmpf ugt, %{{.*}}, [[SLACK]]
// CHECK-NEXT:        [[MAX:%.+]] = llvm.intr.maximum
// CHECK-NEXT:        arith.select [[MOVES]], [[MAX]], %
// CHECK:             llvm.intr.fma(%{{[0-9]+}}#0, %{{.*}})
// CHECK-NEXT:        ex2.approx.ftz.f32
// CHECK:             [[UNE0:%.+]] = arith.cmpf une
// CHECK-NEXT:        [[UNE1:%.+]] = arith.cmpf une
// CHECK-NEXT:        [[MOVED:%.+]] = arith.ori [[UNE1]], [[UNE0]]
// CHECK-NEXT:        scf.if [[MOVED]] -> (f32,
// CHECK-COUNT-128:     arith.mulf
// CHECK:             } else {
// CHECK-NEXT:          scf.yield
// CHECK-COUNT-4:     nvvm.stmatrix %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// CHECK-NOT:         llvm.store {{.*}} : i32, !llvm.ptr<3>
// CHECK:             nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:             nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK:             nvvm.barrier.arrive id = %c2_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT:        nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}}, {${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}}, ${{[0-9]+}}, p, 1, 1, 1;
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-2:     nvvm.mbarrier.arrive %
// CHECK-NOT:         nvvm.mbarrier.arrive %
// CHECK:             nvvm.barrier id = %c3_i32{{.*}} number_of_threads = %c256_i32
// CHECK:             [[UNE0:%.+]] = arith.cmpf une
// CHECK-NEXT:        [[UNE1:%.+]] = arith.cmpf une
// CHECK-NEXT:        [[MOVED:%.+]] = arith.ori [[UNE1]], [[UNE0]]
// CHECK-NEXT:        scf.if [[MOVED]] -> (f32,
// CHECK-COUNT-128:     arith.mulf
// CHECK:             } else {
// CHECK-NEXT:          scf.yield
// CHECK:             nvvm.fence.proxy
// CHECK:             nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c128_i32
// CHECK-COUNT-4:     nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:        nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}} p, 1, 1, 0, 1;
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-2:     nvvm.mbarrier.arrive %
// CHECK-NOT:         nvvm.mbarrier.arrive %
// CHECK:             scf.yield
// CHECK:           scf.yield
// CHECK:         } else {
// CHECK:           scf.for
// CHECK:             nvvm.barrier id = %c6_i32{{.*}} number_of_threads = %c256_i32
// CHECK-COUNT-36:    wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:             nvvm.barrier id = %c2_i32{{.*}} number_of_threads = %c256_i32
// CHECK:             [[UNE0:%.+]] = arith.cmpf une
// CHECK-NEXT:        [[UNE1:%.+]] = arith.cmpf une
// CHECK-NEXT:        [[MOVED:%.+]] = arith.ori [[UNE1]], [[UNE0]]
// CHECK-NEXT:        scf.if [[MOVED]] -> (f32,
// CHECK-COUNT-128:     arith.mulf
// CHECK:             } else {
// CHECK-NEXT:          scf.yield
// CHECK:             nvvm.fence.proxy
// CHECK:             nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c128_i32
// CHECK-COUNT-4:     nvvm.mbarrier.try_wait.parity
// CHECK-NEXT:        nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}} p, 1, 1, 0, 1;
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:             scf.if %{{.*}} -> (f32,
// CHECK-COUNT-32:      arith.select %{{.*}}, %{{.*}}, %cst
// CHECK:               scf.yield
// CHECK-NEXT:        } else {
// CHECK-NEXT:          scf.yield
// CHECK:             ex2.approx.ftz.f32
// CHECK-COUNT-4:     nvvm.stmatrix %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// CHECK-NOT:         llvm.store {{.*}} : i32, !llvm.ptr<3>
// CHECK:             nvvm.fence.proxy
// CHECK:             nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c128_i32
// CHECK:             nvvm.barrier.arrive id = %c3_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-2:     nvvm.mbarrier.arrive %
// CHECK-NOT:         nvvm.mbarrier.arrive %
// CHECK:             [[UNE0:%.+]] = arith.cmpf une
// CHECK-NEXT:        [[UNE1:%.+]] = arith.cmpf une
// CHECK-NEXT:        [[MOVED:%.+]] = arith.ori [[UNE1]], [[UNE0]]
// CHECK-NEXT:        scf.if [[MOVED]] -> (f32,
// CHECK-COUNT-128:     arith.mulf
// CHECK:             } else {
// CHECK-NEXT:          scf.yield
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{.*}}}, {${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}, ${{[0-9]+}}}, ${{[0-9]+}}, p, 1, 1, 1;
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-2:     nvvm.mbarrier.arrive %
// CHECK-NOT:         nvvm.mbarrier.arrive %
// CHECK:             scf.yield
// CHECK:           scf.yield
// CHECK:         scf.if
// CHECK:           nvvm.barrier id = %c4_i32{{.*}} number_of_threads = %c128_i32
// CHECK:           nvvm.barrier.arrive id = %c2_i32{{.*}} number_of_threads = %c256_i32
// CHECK:           nvvm.barrier id = %c3_i32{{.*}} number_of_threads = %c256_i32
// CHECK:         } else {
// CHECK:           nvvm.barrier id = %c5_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NOT:       nvvm.barrier
// CHECK:           nvvm.barrier id = %c2_i32{{.*}} number_of_threads = %c256_i32
// CHECK-NOT:       nvvm.barrier
// CHECK:           nvvm.barrier.arrive id = %c3_i32{{.*}} number_of_threads = %c256_i32
// CHECK:         }
// CHECK:         [[FINAL:%.+]] = arith.cmpi eq, %arg9, %c1_i32
// CHECK-NEXT:    scf.if [[FINAL]] {
// CHECK:           [[ROW8:%.+]] = arith.remui [[ROW:%.+]], %c8_i32
// CHECK-NEXT:      arith.xori %{{.*}}, [[ROW8]]
// CHECK:           arith.muli [[ROW]], %c1024_i32
// CHECK:           arith.addi %c1024_i32
// CHECK-COUNT-64:  llvm.store %{{.*}} : i32, !llvm.ptr<3>
// CHECK-NOT:       llvm.store
// CHECK:           nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c256_i32
// CHECK:           scf.for %{{.*}} = %{{.*}} to %c64_i32{{.*}} step %c4_i32
// CHECK:             llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
// CHECK:             llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK:           llvm.store %{{.*}} : f32, !llvm.ptr<1>
// CHECK:         } else {
// CHECK-NOT:       nvvm.barrier id = %c1_i32
// CHECK:           llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xf32>, !llvm.ptr<1>
// CHECK:         [[CADDR:%.+]] = llvm.ptrtoint %arg13
// CHECK-NEXT:    [[GIVEN:%.+]] = arith.cmpi ne, [[CADDR]], %c0_i64
// CHECK:         [[SPLIT:%.+]] = arith.cmpi slt, %c1_i32{{.*}}, %arg9
// CHECK-NEXT:    [[MERGE:%.+]] = arith.andi [[GIVEN]], [[SPLIT]]
// CHECK-NEXT:    scf.if [[MERGE]] {
// CHECK:           nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c256_i32
// CHECK:           [[FLAG:%.+]] = llvm.getelementptr %{{.*}} -> !llvm.ptr<3>, i8
// CHECK:           scf.if
// CHECK:             [[COUNTER:%.+]] = llvm.getelementptr %arg13
// CHECK-NEXT:        "fence.acq_rel.gpu;"
// CHECK:             [[BEFORE:%.+]] = llvm.inline_asm has_side_effects "atom.release.gpu.global.add.u32
// CHECK:             [[LAST:%.+]] = arith.subi %arg9, %c1_i32
// CHECK-NEXT:        [[ISLAST:%.+]] = arith.cmpi eq, [[BEFORE]], [[LAST]]
// CHECK-NEXT:        scf.if [[ISLAST]] {
// CHECK-NEXT:          "fence.acq_rel.gpu;"
// CHECK:               "st.relaxed.gpu.global.u32 [$0], $1;"
// CHECK:             arith.select [[ISLAST]]
// CHECK-NEXT:        llvm.store %{{.*}}, [[FLAG]]
// CHECK-NOT:         scf.while
// CHECK:           nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c256_i32
// CHECK:           [[SET:%.+]] = llvm.load [[FLAG]]
// CHECK-NEXT:      [[MERGES:%.+]] = arith.cmpi ne, [[SET]], %c0_i32
// CHECK-NEXT:      scf.if [[MERGES]] {
// A warp merges its eight rows four at a time (two batches): the four rows'
// LSEs of the lane's pieces, then per piece every row's LSE and four 16-byte
// stripes before any arithmetic, then the rows' stores.
// CHECK:             scf.for %{{.*}} = %c0_i32{{.*}} to %c2_i32{{.*}} step %c1_i32
// CHECK:               scf.for %{{.*}} = %{{.*}} to %arg9 step %c32_i32
// CHECK-COUNT-4:         llvm.getelementptr %arg6
// CHECK:               scf.for %{{.*}} = %c0_i32{{.*}} to %arg9 step %c1_i32
// CHECK-COUNT-5:         llvm.getelementptr %arg{{[56]}}
// CHECK-NOT:             vector.fma
// CHECK-COUNT-5:         llvm.getelementptr %arg{{[56]}}
// CHECK-NOT:             vector.fma
// CHECK-COUNT-5:         llvm.getelementptr %arg{{[56]}}
// CHECK-NOT:             vector.fma
// CHECK-COUNT-5:         llvm.getelementptr %arg{{[56]}}
// CHECK-NOT:             llvm.getelementptr
// CHECK:                 vector.fma
// CHECK:               llvm.getelementptr %arg14[{{.*}} -> !llvm.ptr<1>, bf16
// CHECK:               llvm.getelementptr %arg15
// CHECK-NOT:     nvvm.cp.async.shared.global
// CHECK-NOT:     m64n32k16
// CHECK-LABEL: gpu.func @mla_decode_plan(
// CHECK-LABEL: gpu.func @mla_combine(

// The block loop is emitted twice, under scf.if on whether the piece has at
// most 64 blocks (kEvictFirstMaxBlocks): there each block makes an L2
// evict-first policy and its nine loads carry it as their cache hint; the
// other loop's loads (those checked above are the first loop's) carry none.
// EF-LABEL:   llvm.func @mla_decode_partial(
// EF:           [[SHORT:%.+]] = arith.cmpi sle, %{{.+}}, %c64_i32
// EF-NEXT:      scf.if [[SHORT]] {
// EF:             scf.for
// EF:               [[POLICY:%.+]] = llvm.inline_asm has_side_effects "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;", "=l"
// EF-COUNT-9:       l2_cache_hint = [[POLICY]]
// EF-NOT:           l2_cache_hint
// EF:           } else {
// EF:             scf.for
// EF-COUNT-9:       nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg12, %{{.*}}, box[{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// EF-NOT:       l2_cache_hint
// A short piece's loads carry the hint in the PTX too, a long one's do not;
// Q's load carries none.
// HINT-LABEL: .entry mla_decode_partial(
// HINT-NOT:      L2::cache_hint
// HINT:          setp.lt.u32 [[SHORT:%p[0-9]+]], %r{{[0-9]+}}, 65;
// HINT:          @[[SHORT]] bra
// HINT:          createpolicy.fractional.L2::evict_first.b64 [[FIRST:%rd[0-9]+]], 1.0;
// HINT-COUNT-9:  complete_tx::bytes.L2::cache_hint [{{.*}}], [{{.*}}], [{{.*}}], [[FIRST]];
// HINT-NOT:      L2::cache_hint
// NOHINT-LABEL: .entry mla_decode_partial(
// NOHINT:       createpolicy.fractional.L2::evict_first.b64
// NOHINT-COUNT-9: complete_tx::bytes [%rd{{[0-9]+}}], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}], [%rd{{[0-9]+(\+[0-9]+)?}}];

// PTX-LABEL: .entry mla_decode_partial(
// PTX:         .param .align 64 .b8 mla_decode_partial_param_11[128]
// PTX:         .param .align 64 .b8 mla_decode_partial_param_12[128]
// PTX:         .maxntid 384, 1, 1
// PTX-COUNT-2:   prefetch.tensormap [%rd
// PTX-NOT:       prefetch
// PTX:           mbarrier.init.shared.b64
// PTX:         setmaxnreg.dec.sync.aligned.u32 24
// PTX:         cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX:         setmaxnreg.inc.sync.aligned.u32 240
// PTX-DAG:     wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX-DAG:     wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX-DAG:     bar.sync 2, 256;
// PTX-DAG:     bar.sync 3, 256;
// PTX-DAG:     bar.sync 4, 128;
// PTX-DAG:     bar.sync 5, 128;
// PTX-DAG:     bar.sync 6, 256;
// PTX-DAG:     bar.arrive
// PTX-DAG:     wgmma.wait_group.sync.aligned 1;
// PTX-DAG:     bar.sync 1, 256;
// PTX-DAG:     fence.acq_rel.gpu;
// PTX-DAG:     atom.release.gpu.global.add.u32
// PTX-DAG:     st.relaxed.gpu.global.u32
// PTX-NOT:     m64n32k16
// PTX-LABEL: .entry mla_decode_plan(

// A k-step's descriptors are its tile's start word plus a constant
// (WgmmaDescriptors): an add, the widening and the constant high word; the
// shift and mask of the address happen once per tile.
// No kernel of the module spins on another CTA.
// NOSPIN-NOT: nanosleep
// NOSPIN-NOT: ld.acquire

// DESC-LABEL: .entry mla_decode_partial(
// DESC:        wgmma.mma_async.sync.aligned.m64n64k16
// DESC-NOT:    shr.
// DESC:        add.s32 {{%r[0-9]+}}, {{%r[0-9]+}}, {{[0-9]+}};
// DESC-NEXT:   cvt.u64.u32
// DESC-NEXT:   or.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 4611686293305294848;
// DESC-NEXT:   add.s32 {{%r[0-9]+}}, {{%r[0-9]+}}, {{[0-9]+}};
// DESC-NEXT:   cvt.u64.u32
// DESC-NEXT:   or.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 4611686293305294848;
// DESC-NOT:    shr.
// DESC:        wgmma.mma_async.sync.aligned.m64n64k16
// DESC-NOT:    shr.
// DESC:        wgmma.mma_async.sync.aligned.m64n64k16

// F16: .entry mla_decode_partial(
// F16: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// F16: wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16

// ptxas: no spill, and no C75xx notice (wgmma serialised, a warpgroup.wait
// or warpgroup.arrive injected) in any of the three kernels.
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}
// PTXAS:       0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:   {{C75[0-9][0-9]|warning}}

module attributes {mla.target = #mla.target<chip = sm90>} {
  func.func @decode(%q: tensor<?x1x128x576xbf16>, %cache: tensor<?x64x576xbf16>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
      -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>) {
    %o, %l = mla.decode %q, %cache[%bt, %lens]
        layout #mla.cache_layout<format = bf16, page_size = 64> scale 0.0721687824
        {mla.gpu_tiling = #mla.gpu_tiling<rows_per_cta = 64, warps_n = 2, kv_block = 64, stages = 2, wgmma = true, pipelined = true, seesaw = true>}
        : (tensor<?x1x128x576xbf16>, tensor<?x64x576xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>)
    return %o, %l : tensor<?x1x128x512xbf16>, tensor<?x128x1xf32>
  }
}
