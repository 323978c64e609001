//===- KvScale.h - fp8_e4m3's per-tensor scale on the device ----*- C++ -*-===//
//
// The kernels that read or write fp8_e4m3 rows take the per-tensor scale as
// a pointer to one f32 in device memory (CacheProjectionABI.h). A caller
// either passes its own device tensor (vLLM's `k_scale`; nothing is copied,
// so the launch can be captured in a CUDA graph and sees the value the
// tensor holds when it runs) or a host value, which KvScaleBuffers keeps on
// the device for it. Every launcher of such a kernel (cache_write,
// gather_cache, the chunked prefill, an fp8 decode) checks the pointer with
// checkKvScalePointer. No MLIR dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_GPURUNTIME_KVSCALE_H
#define MLA_GPURUNTIME_KVSCALE_H

#include "mla/Contract/CacheProjectionABI.h"
#include "mla/GpuRuntime/CudaDriver.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <utility>

namespace mla::gpu {

/// The kv_scale pointer of a launch of `kernel` over rows of `format`: a
/// non-null, 4-byte aligned pointer when the kernel takes the parameter
/// (kernelTakesKvScale), else 0. Fails with std::errc::invalid_argument.
llvm::Error checkKvScalePointer(const char *kernel, CacheFormat format,
                                CUdeviceptr kvScale);

/// Host scales on the device: one f32 buffer per (context, value), written
/// once and kept until clear(), so a pointer handed to a launch (or to a
/// captured graph) stays valid and never changes its value.
class KvScaleBuffers {
public:
  KvScaleBuffers() = default;
  KvScaleBuffers(const KvScaleBuffers &) = delete;
  KvScaleBuffers &operator=(const KvScaleBuffers &) = delete;
  ~KvScaleBuffers() { clear(); }

  /// The device copy of `value` in `context` (the calling thread's current
  /// context). The first request of a value allocates the buffer and copies
  /// the value, waiting for the copy (on the context's null stream, so no
  /// caller stream is involved) so that launches on any stream see it: that
  /// call synchronises and cannot be captured in a graph; later requests of
  /// the value only look it up.
  llvm::Expected<CUdeviceptr> get(CUcontext context, float value);

  /// Frees every buffer (each in its context).
  void clear();

private:
  std::map<std::pair<CUcontext, uint32_t>, CUdeviceptr> buffers;
};

} // namespace mla::gpu

#endif // MLA_GPURUNTIME_KVSCALE_H
