//===- DecodeSM90.cpp - mla_decode_partial for sm_90a ---------------------===//
//
// Checks the tiling and picks the composition: the warp-specialised TMA
// builds (DecodeSM90Seesaw.cpp, DecodeSM90Pipelined.cpp), warpgroup MMAs
// (DecodeSM90Wgmma.cpp) or ldmatrix + mma.sync (DecodeSM90MmaSync.cpp); the
// kernel they share is described in DecodeSM90Kernel.h.
//
//===----------------------------------------------------------------------===//

#include "DecodeSM90Kernel.h"
#include "DecodeSM90WarpSpecialised.h"
#include "mla/Conversion/MLAToGPU/MLAToGPU.h"

using namespace mlir;
namespace abi = mla::gpu;

LogicalResult mla::gpu_codegen::emitDecodePartialSM90(
    OpBuilder &builder, Location loc, StringRef name,
    const abi::DecodeShape &shape, const abi::DecodeTiling &tiling) {
  std::string why = abi::checkDecodeTiling(abi::Chip::SM90a, shape, tiling);
  if (!why.empty())
    return emitError(loc) << "sm_90a decode kernel: " << why;
  if (tiling.stages < 2)
    return emitError(loc) << "sm_90a decode kernel needs stages >= 2";
  if (tiling.seesaw) {
    sm90::emitDecodeSM90Seesaw(builder, loc, name, shape, tiling);
    return success();
  }
  if (tiling.pipelined) {
    sm90::emitDecodeSM90Pipelined(builder, loc, name, shape, tiling);
    return success();
  }
  if (tiling.wgmma)
    return sm90::emitDecodeSM90Wgmma(builder, loc, name, shape, tiling);
  return sm90::emitDecodeSM90MmaSync(builder, loc, name, shape, tiling);
}
