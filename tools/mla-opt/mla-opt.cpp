//===- mla-opt.cpp - the mla optimizer driver -----------------------------===//
//
// mlir-opt with the mla dialect, its passes and pipelines, and the upstream
// dialects and passes that the mla lowerings produce and consume.
//
//===----------------------------------------------------------------------===//

#include "mla/Contract/Version.h"
#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/IR/MLADialect.h"
#include "mla/Dialect/MLA/Transforms/Passes.h"
#include "mla/Pipelines/Pipelines.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"

namespace mla::test {
void registerTestGPUCodegenBlocksPass();
} // namespace mla::test

int main(int argc, char **argv) {
  llvm::cl::AddExtraVersionPrinter(mla::printVersion);
  mlir::registerAllPasses();
  mla::registerMLAPasses();
  mla::registerMLAConversionPasses();
  mla::registerMLAPipelines();
  mla::test::registerTestGPUCodegenBlocksPass();

  mlir::DialectRegistry registry;
  registry.insert<mla::MLADialect>();
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary (mla-to-nvvm) translates the device code to LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "mla optimizer driver\n", registry));
}
