//===- ConvertMLAToLinalg.cpp - the convert-mla-to-linalg pass ------------===//
//
// Applies every op family's lowering patterns as a full conversion: after
// the pass no mla op (nor the module's mla.target) is left, or the pass
// fails and names the op it could not lower.
//
//===----------------------------------------------------------------------===//

#include "mla/Conversion/Passes.h"
#include "mla/Dialect/MLA/IR/MLAOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mla {
#define GEN_PASS_DEF_CONVERTMLATOLINALG
#include "mla/Conversion/Passes.h.inc"
} // namespace mla

using namespace mlir;
using namespace mla;

namespace {
struct ConvertMLAToLinalgPass
    : public mla::impl::ConvertMLAToLinalgBase<ConvertMLAToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<MLADialect>();
    target.addLegalDialect<
        arith::ArithDialect, bufferization::BufferizationDialect,
        linalg::LinalgDialect, math::MathDialect, scf::SCFDialect,
        tensor::TensorDialect, vector::VectorDialect, func::FuncDialect,
        memref::MemRefDialect>();

    RewritePatternSet patterns(ctx);
    populateMLACacheToLinalgPatterns(patterns);
    populateMLADecodeToLinalgPatterns(patterns);
    populateMLAProjectionToLinalgPatterns(patterns);
    populateMLAAttentionToLinalgPatterns(patterns);

    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns)))) {
      signalPassFailure();
      return;
    }
    // The module no longer holds mla IR; the target annotation would only
    // make the result unreadable by tools that do not load the dialect.
    getOperation()->removeAttr(MLADialect::getTargetAttrName());
  }
};
} // namespace
