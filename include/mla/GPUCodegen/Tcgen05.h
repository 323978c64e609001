//===- Tcgen05.h - sm_100a tensor-core building blocks ----------*- C++ -*-===//
//
// The Blackwell 5th-generation tensor-core instructions a kernel composes:
// tensor memory (TMEM) allocation and addressing, the kind::f16 instruction
// descriptor, shared-memory matrix descriptors for the unswizzled canonical
// layout, tcgen05.mma issue, completion through an mbarrier, accumulator
// loads/stores and the tcgen05 fences. Every block is an NVVM dialect op of
// MLIR 22 (no inline PTX); the descriptors are plain integers whose bit
// layout is fixed here, so kernels never spell one out themselves.
//
// The NVVM tcgen05 verifiers accept sm_100a only (not sm_100f, sm_103a or
// plain sm_100), so these blocks are for kernels compiled for sm_100a.
//
//===----------------------------------------------------------------------===//
#ifndef MLA_GPUCODEGEN_TCGEN05_H
#define MLA_GPUCODEGEN_TCGEN05_H

#include "mlir/IR/Value.h"

namespace mla::gpu_codegen {

class DeviceBuilder;

namespace tcgen05 {

//===----------------------------------------------------------------------===//
// Descriptors
//===----------------------------------------------------------------------===//

/// The kind::f16 instruction descriptor of an M x N MMA: f32 accumulator,
/// A and B both bf16 (`bf16`) or both f16, A K-major, B K-major or, with
/// `bMnMajor`, MN-major; dense, no negation, no saturation.
int64_t instrDescriptorF16(bool bf16, bool bMnMajor, int64_t m, int64_t n);

/// The shared-memory matrix descriptor (i64) of an unswizzled operand at
/// shared address `smemAddr` (i32): start address, leading and stride byte
/// offsets (each >> 4), the sm_100 descriptor version (bit 46), base offset
/// 0, relative LBO mode. `leadingBytes` steps between core matrices along K
/// and `strideBytes` along M (or N), for K-major and MN-major operands
/// alike. Advancing the operand by `n` bytes adds `n >> 4` to the
/// descriptor.
mlir::Value smemDescriptor(DeviceBuilder &kb, mlir::Value smemAddr,
                           int64_t leadingBytes, int64_t strideBytes);

/// Byte offset (i32) of element (row, col) of a row-major [rows x cols]
/// 16-bit tile stored in the canonical unswizzled layout: 8 x 16-byte core
/// matrices (128 contiguous bytes each), core-matrix rows outermost. Such a
/// tile is described by leadingBytes = 128 and strideBytes = 16 * cols when
/// K runs along `cols`, and by the reverse when K runs along `rows`.
mlir::Value coreMatrixOffset(DeviceBuilder &kb, mlir::Value row,
                             mlir::Value col, int64_t cols);

//===----------------------------------------------------------------------===//
// Tensor memory
//===----------------------------------------------------------------------===//

/// A TMEM address (i32, lane << 16 | column) as the !llvm.ptr<6> that tcgen05
/// ops take.
mlir::Value tmemPointer(DeviceBuilder &kb, mlir::Value addr);

/// tcgen05.alloc (cta_group::1) of `columns` columns; the base address is
/// written to the shared-memory word `slot`. Executed by one whole warp.
void allocTmem(DeviceBuilder &kb, mlir::Value slot, int64_t columns);

/// tcgen05.relinquish_alloc_permit: this CTA allocates no more TMEM, so
/// other CTAs on the SM may.
void relinquishAllocPermit(DeviceBuilder &kb);

/// tcgen05.dealloc of `columns` columns at TMEM address `base` (i32).
/// Executed by the warp that allocated them.
void deallocTmem(DeviceBuilder &kb, mlir::Value base, int64_t columns);

/// tcgen05.ld.32x32b of `columns` consecutive 32-bit columns starting at TMEM
/// address `addr` (i32): thread t of the warp reads lane (addr's lane + t).
/// Returns vector<columns x i32>; read it after waitLoads().
mlir::Value load32x32b(DeviceBuilder &kb, mlir::Value addr, int64_t columns);

/// tcgen05.st.32x32b of `values` (vector<N x i32>) to TMEM address `addr`.
void store32x32b(DeviceBuilder &kb, mlir::Value addr, mlir::Value values);

/// tcgen05.wait::ld: every tcgen05.ld of this thread has completed.
void waitLoads(DeviceBuilder &kb);

/// tcgen05.wait::st: every tcgen05.st of this thread has completed.
void waitStores(DeviceBuilder &kb);

//===----------------------------------------------------------------------===//
// MMA issue and completion
//===----------------------------------------------------------------------===//

/// One tcgen05.mma (kind::f16, cta_group::1): D (a TMEM pointer, see
/// tmemPointer) = A * B + (accumulate ? D : 0), A and B from shared memory
/// through their descriptors, `instrDescriptor` from instrDescriptorF16.
/// Issued by a single thread.
void mmaF16(DeviceBuilder &kb, mlir::Value d, mlir::Value aDesc,
            mlir::Value bDesc, int64_t instrDescriptor, mlir::Value accumulate);

/// tcgen05.commit: the mbarrier at `mbar` receives one arrival once every
/// MMA this thread issued so far has completed.
void commit(DeviceBuilder &kb, mlir::Value mbar);

/// Blocks until the mbarrier at `mbar` completes phase `phase` (i32 parity),
/// then orders later tcgen05 work after it.
void waitCommitted(DeviceBuilder &kb, mlir::Value mbar, mlir::Value phase);

//===----------------------------------------------------------------------===//
// Fences and CTA synchronisation
//===----------------------------------------------------------------------===//

/// tcgen05.fence::before_thread_sync: orders this thread's tcgen05 work
/// before a following thread synchronisation.
void fenceBeforeThreadSync(DeviceBuilder &kb);

/// tcgen05.fence::after_thread_sync: orders tcgen05 work after a preceding
/// thread synchronisation.
void fenceAfterThreadSync(DeviceBuilder &kb);

/// A CTA barrier that tcgen05 work on both sides is ordered by.
void syncThreads(DeviceBuilder &kb);

/// Makes shared-memory writes of the generic proxy (st.shared, cp.async)
/// visible to the tensor cores (fence.proxy.async.shared::cta), then
/// syncThreads().
void publishSharedToTensorCores(DeviceBuilder &kb);

} // namespace tcgen05
} // namespace mla::gpu_codegen

#endif // MLA_GPUCODEGEN_TCGEN05_H
