//===- Cluster.h - thread-block clusters (sm_90a) ---------------*- C++ -*-===//
//
// A kernel whose CTAs run in clusters: the cluster shape is fixed when the
// kernel is compiled (`.reqnctapercluster`), so an ordinary launch whose
// grid is a multiple of it starts clusters. The CTAs of a cluster are on
// one GPC and reach each other's shared memory (the shared::cluster
// window): a TMA load can multicast a box into several CTAs' shared memory
// at the same offset, completing each one's mbarrier there, and a thread
// can arrive on a peer CTA's mbarrier.
//
// Before any CTA touches a peer (a multicast load, a remote arrival), the
// peer's mbarriers must be initialised: MBarrier::init fences the init for
// the cluster, and every thread passes clusterSync. Before a CTA exits, the
// peers must be done touching it: every thread passes clusterSync again.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_CLUSTER_H
#define MLA_GPUCODEGEN_CLUSTER_H

#include "mla/GPUCodegen/MBarrier.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mla::gpu_codegen {

/// Compiles `kernel` for clusters of `ctas` x 1 x 1 CTAs (along grid x).
void setClusterShape(mlir::LLVM::LLVMFuncOp kernel, int64_t ctas);
/// The CTA's rank in its cluster (i32).
mlir::Value clusterCtaRank(DeviceBuilder &d);
/// barrier.cluster.arrive (release) then barrier.cluster.wait (acquire):
/// every non-exited thread of the cluster must pass it.
void clusterSync(DeviceBuilder &d);
/// Arrives `count` times on the mbarrier at `bar`'s offset in the shared
/// memory of the cluster's CTA `rank` (i32): mapa, then a remote
/// mbarrier.arrive with the default semantics (release at CTA scope, as
/// CUTLASS releases a multicast pipeline's slots). It tells the peer that
/// reads the caller has already waited for are done, and publishes nothing;
/// a `.release.cluster` arrival made the multicast decode 36% slower (a
/// cluster-scope fence per arrival; docs/gpu-runs.md, session 19).
void arriveOnPeer(DeviceBuilder &d, MBarrier &bar, mlir::Value rank,
                  int64_t count);

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_CLUSTER_H
