//===- WarpgroupPingPong.h - two warpgroups taking turns --------*- C++ -*-===//
//
// FlashAttention-3's inter-warpgroup schedule: two consumer warpgroups take
// turns issuing their tensor-core work, so one's softmax (CUDA cores, MUFU)
// runs while the other's GEMMs use the tensor cores. Warpgroup w waits on
// named barrier firstId + w before issuing and, once issued, arrives on the
// other's barrier; each barrier counts the 256 threads of both warpgroups.
// Every wait must be matched by one arrival of the other warpgroup: after
// start() and k rounds of waitTurn/passTurn in both, warpgroup 0 owes one
// last waitTurn (warpgroup 1's final pass). No branch guards the turns, so
// wgmmas issued between them stay on a uniform path.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_WARPGROUPPINGPONG_H
#define MLA_GPUCODEGEN_WARPGROUPPINGPONG_H

#include "mla/GPUCodegen/DeviceBuilder.h"

namespace mla::gpu_codegen {

class WarpgroupPingPong {
public:
  /// `warpgroup` (i32) is 0 or 1; named barriers firstId and firstId + 1
  /// (barrier 0 is __syncthreads) are reserved for the exchange.
  WarpgroupPingPong(DeviceBuilder &d, mlir::Value warpgroup, int64_t firstId)
      : d(d), wg(warpgroup), firstId(firstId) {}

  /// Warpgroup 1 gives warpgroup 0 the first turn.
  void start();
  /// bar.sync on this warpgroup's barrier: blocks until the other
  /// warpgroup has passed the turn.
  void waitTurn();
  /// bar.arrive on the other warpgroup's barrier.
  void passTurn();

private:
  DeviceBuilder &d;
  mlir::Value wg;
  int64_t firstId;
};

} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_WARPGROUPPINGPONG_H
