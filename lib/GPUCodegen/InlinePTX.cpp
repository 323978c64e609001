//===- InlinePTX.cpp - the inline-PTX instructions of the GPU kernels ----===//

#include "mla/GPUCodegen/InlinePTX.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include <cstdio>
#include <string>

using namespace mlir;

static Value unaryF32Asm(ImplicitLocOpBuilder &b, StringRef text, Value x) {
  return LLVM::InlineAsmOp::create(b, x.getType(), ValueRange{x}, text, "=f,f",
                                   /*has_side_effects=*/false,
                                   /*is_align_stack=*/false,
                                   LLVM::tailcallkind::TailCallKind::None,
                                   LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

Value mla::gpu_codegen::ptx::ex2ApproxFtz(ImplicitLocOpBuilder &b, Value x) {
  return unaryF32Asm(b, "ex2.approx.ftz.f32 $0, $1;", x);
}

Value mla::gpu_codegen::ptx::lg2ApproxFtz(ImplicitLocOpBuilder &b, Value x) {
  return unaryF32Asm(b, "lg2.approx.ftz.f32 $0, $1;", x);
}

std::pair<Value, Value>
mla::gpu_codegen::ptx::cvtE4M3x4ToF16x2(ImplicitLocOpBuilder &b, Value bytes) {
  Type i32 = b.getI32Type();
  auto pair = LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32});
  Value r =
      LLVM::InlineAsmOp::create(
          b, pair, ValueRange{bytes},
          "{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, $2;\n"
          "cvt.rn.f16x2.e4m3x2 $0, lo;\ncvt.rn.f16x2.e4m3x2 $1, hi;\n}",
          "=r,=r,r", /*has_side_effects=*/false,
          /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
          LLVM::AsmDialectAttr(), ArrayAttr())
          .getResult(0);
  return {LLVM::ExtractValueOp::create(b, r, 0),
          LLVM::ExtractValueOp::create(b, r, 1)};
}

Value mla::gpu_codegen::ptx::cvtF32x4ToE4M3x4(ImplicitLocOpBuilder &b,
                                              std::array<Value, 4> x) {
  // cvt's first source goes to the upper code of the pair.
  return LLVM::InlineAsmOp::create(
             b, b.getI32Type(), ValueRange{x[0], x[1], x[2], x[3]},
             "{\n.reg .b16 lo, hi;\n"
             "cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;\n"
             "cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3;\n"
             "mov.b32 $0, {lo, hi};\n}",
             "=r,f,f,f,f", /*has_side_effects=*/false,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

Value mla::gpu_codegen::ptx::prmt(ImplicitLocOpBuilder &b, Value a, Value bb,
                                  uint32_t selector) {
  char hex[8];
  std::snprintf(hex, sizeof(hex), "0x%04x", unsigned(selector & 0xFFFF));
  std::string asmText = std::string("prmt.b32 $0, $1, $2, ") + hex + ";";
  return LLVM::InlineAsmOp::create(
             b, b.getI32Type(), ValueRange{a, bb}, asmText, "=r,r,r",
             /*has_side_effects=*/false,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

Value mla::gpu_codegen::ptx::prmt(ImplicitLocOpBuilder &b, Value a, Value bb,
                                  Value selector) {
  return LLVM::InlineAsmOp::create(
             b, b.getI32Type(), ValueRange{a, bb, selector},
             "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r",
             /*has_side_effects=*/false,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

Value mla::gpu_codegen::ptx::prmtHighHalves(ImplicitLocOpBuilder &b, Value lo,
                                            Value hi) {
  return prmt(b, lo, hi, 0x7632);
}

/// The asm text and constraints of a wgmma: operands $0..$(c-1) are the
/// accumulators (outputs tied to inputs $c..$(2c-1) through "0".."c-1"
/// constraints), then A (a descriptor, or `aRegs` = 4 i32 fragments), the B
/// descriptor and the scale-d register. Only the shared-memory form has a
/// transpose-A immediate, and E4M3 has no transpose immediates at all.
static std::pair<std::string, std::string>
wgmmaText(int64_t n, mla::gpu_codegen::ptx::WgmmaInput in, bool transB,
          int64_t aRegs) {
  using mla::gpu_codegen::ptx::WgmmaInput;
  bool e4m3 = in == WgmmaInput::E4M3;
  assert(!(e4m3 && transB) && "E4M3 wgmma operands are K-major only");
  const char *type = e4m3                     ? "k32.f32.e4m3.e4m3"
                     : in == WgmmaInput::BF16 ? "k16.f32.bf16.bf16"
                                              : "k16.f32.f16.f16";
  int64_t c = n / 2;
  int64_t aFirst = 2 * c, bDesc = aFirst + (aRegs ? aRegs : 1);
  auto arg = [](int64_t i) { return "$" + std::to_string(i); };
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, " + arg(bDesc + 1) +
                     ", 0;\n" + "wgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(n) + type + " {";
  std::string cons;
  for (int64_t i = 0; i < c; ++i) {
    text += (i ? ", " : "") + arg(i);
    cons += "=f,";
  }
  text += "}, ";
  if (aRegs) {
    text += "{";
    for (int64_t i = 0; i < aRegs; ++i)
      text += (i ? ", " : "") + arg(aFirst + i);
    text += "}";
  } else {
    text += arg(aFirst);
  }
  text += ", " + arg(bDesc) + ", p, 1, 1";
  if (!e4m3)
    text += std::string(", ") + (aRegs ? "" : "0, ") + (transB ? "1" : "0");
  text += ";\n}";
  for (int64_t i = 0; i < c; ++i)
    cons += std::to_string(i) + ",";
  cons += aRegs ? "r,r,r,r,l,r" : "l,l,r";
  return {text, cons};
}

static SmallVector<Value>
wgmmaAsm(ImplicitLocOpBuilder &b, int64_t n,
         const std::pair<std::string, std::string> &asmText,
         SmallVector<Value> operands) {
  SmallVector<Type> fields(n / 2, b.getF32Type());
  auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
  Value r = LLVM::InlineAsmOp::create(
                b, structType, operands, asmText.first, asmText.second,
                /*has_side_effects=*/true, /*is_align_stack=*/false,
                LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                ArrayAttr())
                .getResult(0);
  SmallVector<Value> out;
  for (int64_t i = 0; i < n / 2; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, r, i));
  return out;
}

SmallVector<Value> mla::gpu_codegen::ptx::wgmmaMmaAsyncSS(
    ImplicitLocOpBuilder &b, int64_t n, WgmmaInput in, ArrayRef<Value> acc,
    Value descA, Value descB, Value scaleD, bool transB) {
  SmallVector<Value> operands(acc.begin(), acc.end());
  operands.append({descA, descB, scaleD});
  return wgmmaAsm(b, n, wgmmaText(n, in, transB, /*aRegs=*/0), operands);
}

SmallVector<Value> mla::gpu_codegen::ptx::wgmmaMmaAsyncRS(
    ImplicitLocOpBuilder &b, int64_t n, WgmmaInput in, ArrayRef<Value> acc,
    ArrayRef<Value> a, Value descB, Value scaleD, bool transB) {
  assert(a.size() == 4 && "four i32 A fragments per thread");
  SmallVector<Value> operands(acc.begin(), acc.end());
  operands.append(a.begin(), a.end());
  operands.append({descB, scaleD});
  return wgmmaAsm(b, n, wgmmaText(n, in, transB, /*aRegs=*/4), operands);
}

/// An inline asm with side effects and no result.
static void effectAsm(ImplicitLocOpBuilder &b, ValueRange operands,
                      StringRef text, StringRef constraints) {
  LLVM::InlineAsmOp::create(b, TypeRange{}, operands, text, constraints,
                            /*has_side_effects=*/true,
                            /*is_align_stack=*/false,
                            LLVM::tailcallkind::TailCallKind::None,
                            LLVM::AsmDialectAttr(), ArrayAttr());
}

/// A global pointer as the 64-bit address an "l" operand takes.
static Value address(ImplicitLocOpBuilder &b, Value ptr) {
  return LLVM::PtrToIntOp::create(b, b.getI64Type(), ptr);
}

Value mla::gpu_codegen::ptx::createPolicyEvictFirst(ImplicitLocOpBuilder &b) {
  return LLVM::InlineAsmOp::create(
             b, b.getI64Type(), ValueRange{},
             "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;", "=l",
             /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

void mla::gpu_codegen::ptx::prefetchTensormap(ImplicitLocOpBuilder &b,
                                              Value ptr) {
  effectAsm(b, address(b, ptr), "prefetch.tensormap [$0];", "l");
}

void mla::gpu_codegen::ptx::fenceAcqRelGpu(ImplicitLocOpBuilder &b) {
  effectAsm(b, {}, "fence.acq_rel.gpu;", "~{memory}");
}

Value mla::gpu_codegen::ptx::atomAddGpu(ImplicitLocOpBuilder &b, Value ptr,
                                        Value v, bool release) {
  std::string text = std::string("atom.") + (release ? "release" : "relaxed") +
                     ".gpu.global.add.u32 $0, [$1], $2;";
  return LLVM::InlineAsmOp::create(
             b, b.getI32Type(), ValueRange{address(b, ptr), v}, text,
             "=r,l,r,~{memory}", /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

void mla::gpu_codegen::ptx::storeRelaxedGpu(ImplicitLocOpBuilder &b, Value ptr,
                                            Value v) {
  effectAsm(b, {address(b, ptr), v}, "st.relaxed.gpu.global.u32 [$0], $1;",
            "l,r,~{memory}");
}
