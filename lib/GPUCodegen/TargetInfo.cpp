//===- TargetInfo.cpp - what differs between GPU targets ------------------===//

#include "mla/GPUCodegen/TargetInfo.h"

#include "llvm/Support/ErrorHandling.h"

using namespace mla::gpu_codegen;

namespace {

/// Hopper (H100/H200): mma.sync and wgmma, no tensor memory.
class SM90TargetInfo final : public TargetInfo {
public:
  llvm::StringRef name() const override { return "sm_90a"; }
  llvm::StringRef ptxFeatures() const override { return "+ptx80"; }
  int64_t maxSharedBytesPerCta() const override { return 227 * 1024; }
  int64_t defaultSmCount() const override { return 132; }
  bool hasMma(MmaFamily family) const override {
    return family != MmaFamily::Tcgen05;
  }
  MmaFamily decodeMma() const override { return MmaFamily::Wgmma; }
  bool hasTensorMemory() const override { return false; }
};

/// Blackwell (B200): tcgen05 into tensor memory; wgmma is gone, mma.sync
/// remains. tcgen05 needs PTX 8.8 for sm_100a.
class SM100TargetInfo final : public TargetInfo {
public:
  llvm::StringRef name() const override { return "sm_100a"; }
  llvm::StringRef ptxFeatures() const override { return "+ptx88"; }
  int64_t maxSharedBytesPerCta() const override { return 227 * 1024; }
  int64_t defaultSmCount() const override { return 148; }
  bool hasMma(MmaFamily family) const override {
    return family != MmaFamily::Wgmma;
  }
  MmaFamily decodeMma() const override { return MmaFamily::Tcgen05; }
  bool hasTensorMemory() const override { return true; }
};

} // namespace

const TargetInfo &mla::gpu_codegen::getTargetInfo(gpu::Chip chip) {
  static const SM90TargetInfo sm90;
  static const SM100TargetInfo sm100;
  switch (chip) {
  case gpu::Chip::SM90a:
    return sm90;
  case gpu::Chip::SM100a:
    return sm100;
  }
  llvm_unreachable("unknown chip");
}
