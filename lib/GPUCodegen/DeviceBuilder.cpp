//===- DeviceBuilder.cpp - LLVM/NVVM-level kernel building helpers -------===//

#include "mla/GPUCodegen/DeviceBuilder.h"
#include "mla/GPUCodegen/InlinePTX.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mla::gpu_codegen;

static constexpr llvm::StringLiteral kDynSmem = "mla_dyn_smem";

mlir::gpu::GPUFuncOp mla::gpu_codegen::createKernel(ImplicitLocOpBuilder &b,
                                                    StringRef name,
                                                    ArrayRef<Type> argTypes,
                                                    int64_t threads,
                                                    bool setMaxNTid) {
  auto type = b.getFunctionType(argTypes, {});
  auto fn = mlir::gpu::GPUFuncOp::create(b, name, type);
  fn->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int32_t t = static_cast<int32_t>(threads);
  fn.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({t, 1, 1}));
  if (setMaxNTid)
    fn->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({t, 1, 1}));
  b.setInsertionPointToStart(&fn.getBody().front());
  return fn;
}

LLVM::LLVMFuncOp mla::gpu_codegen::createGridConstantKernel(
    ImplicitLocOpBuilder &b, StringRef name, ArrayRef<Type> argTypes,
    ArrayRef<bool> gridConstant, int64_t threads) {
  assert(argTypes.size() == gridConstant.size() && "one flag per argument");
  MLIRContext *ctx = b.getContext();
  auto fn = LLVM::LLVMFuncOp::create(
      b, name,
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), argTypes));
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int32_t t = static_cast<int32_t>(threads);
  fn->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr({t, 1, 1}));
  fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(1));
  auto descriptor = LLVM::LLVMArrayType::get(b.getI64Type(), 16);
  for (auto [i, isConstant] : llvm::enumerate(gridConstant)) {
    if (!isConstant)
      continue;
    assert(isa<LLVM::LLVMPointerType>(argTypes[i]) &&
           "a grid constant is passed as a pointer to its bytes");
    fn.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                  TypeAttr::get(descriptor));
    fn.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                  b.getI64IntegerAttr(64));
    fn.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                  b.getUnitAttr());
  }
  Block *entry = fn.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  return fn;
}

std::string mla::gpu_codegen::uniqueSymbolName(Operation *module,
                                               StringRef base) {
  if (!SymbolTable::lookupSymbolIn(module, base))
    return base.str();
  for (int i = 1;; ++i) {
    std::string name = (base + "_" + Twine(i)).str();
    if (!SymbolTable::lookupSymbolIn(module, name))
      return name;
  }
}

Value mla::gpu_codegen::dynamicSharedBase(ImplicitLocOpBuilder &b) {
  Operation *fn = b.getInsertionBlock()->getParentOp();
  while (fn && !isa<mlir::gpu::GPUModuleOp>(fn))
    fn = fn->getParentOp();
  auto module = cast<mlir::gpu::GPUModuleOp>(fn);
  auto arrayType = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
  if (!SymbolTable::lookupSymbolIn(module, kDynSmem)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(b, arrayType, /*isConstant=*/false,
                           LLVM::Linkage::External, kDynSmem, Attribute(),
                           /*alignment=*/1024, /*addrSpace=*/3);
  }
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::AddressOfOp::create(b, ptrType, kDynSmem);
}

DeviceBuilder::DeviceBuilder(ImplicitLocOpBuilder &b) : b(b) {
  i1 = b.getI1Type();
  i8 = b.getI8Type();
  i16 = b.getI16Type();
  i32 = b.getI32Type();
  i64 = b.getI64Type();
  f32 = b.getF32Type();
  ptrGlobal = LLVM::LLVMPointerType::get(b.getContext(), 1);
  ptrShared = LLVM::LLVMPointerType::get(b.getContext(), 3);
}

Value DeviceBuilder::c16(int64_t v) {
  return arith::ConstantIntOp::create(b, i16, v);
}
Value DeviceBuilder::c32(int64_t v) {
  return arith::ConstantIntOp::create(b, i32, v);
}
Value DeviceBuilder::c64(int64_t v) {
  return arith::ConstantIntOp::create(b, i64, v);
}
Value DeviceBuilder::cbool(bool v) {
  return arith::ConstantIntOp::create(b, i1, v);
}
Value DeviceBuilder::f(float v) {
  return arith::ConstantFloatOp::create(b, cast<FloatType>(f32), APFloat(v));
}
Value DeviceBuilder::negInf() {
  return arith::ConstantFloatOp::create(
      b, cast<FloatType>(f32), APFloat::getInf(APFloat::IEEEsingle(), true));
}

Value DeviceBuilder::add(Value x, Value y) {
  return arith::AddIOp::create(b, x, y);
}
Value DeviceBuilder::sub(Value x, Value y) {
  return arith::SubIOp::create(b, x, y);
}
Value DeviceBuilder::mul(Value x, Value y) {
  return arith::MulIOp::create(b, x, y);
}
Value DeviceBuilder::divu(Value x, Value y) {
  return arith::DivUIOp::create(b, x, y);
}
Value DeviceBuilder::remu(Value x, Value y) {
  return arith::RemUIOp::create(b, x, y);
}
Value DeviceBuilder::bitXor(Value x, Value y) {
  return arith::XOrIOp::create(b, x, y);
}
Value DeviceBuilder::bitAnd(Value x, Value y) {
  return arith::AndIOp::create(b, x, y);
}
Value DeviceBuilder::ori(Value x, Value y) {
  return arith::OrIOp::create(b, x, y);
}
Value DeviceBuilder::shl(Value x, Value y) {
  return arith::ShLIOp::create(b, x, y);
}
Value DeviceBuilder::shru(Value x, Value y) {
  return arith::ShRUIOp::create(b, x, y);
}
Value DeviceBuilder::divs(Value x, Value y) {
  return arith::DivSIOp::create(b, x, y);
}
Value DeviceBuilder::minsi(Value x, Value y) {
  return arith::MinSIOp::create(b, x, y);
}
Value DeviceBuilder::maxsi(Value x, Value y) {
  return arith::MaxSIOp::create(b, x, y);
}
Value DeviceBuilder::cmp(arith::CmpIPredicate p, Value x, Value y) {
  return arith::CmpIOp::create(b, p, x, y);
}
Value DeviceBuilder::slt(Value x, Value y) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::slt, x, y);
}
Value DeviceBuilder::sle(Value x, Value y) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::sle, x, y);
}
Value DeviceBuilder::sge(Value x, Value y) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::sge, x, y);
}
Value DeviceBuilder::eq(Value x, Value y) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, x, y);
}
Value DeviceBuilder::andi(Value x, Value y) {
  return arith::AndIOp::create(b, x, y);
}
Value DeviceBuilder::select(Value c, Value x, Value y) {
  return arith::SelectOp::create(b, c, x, y);
}
Value DeviceBuilder::toI64(Value x) {
  return arith::ExtSIOp::create(b, i64, x);
}
Value DeviceBuilder::zext64(Value x) {
  return arith::ExtUIOp::create(b, i64, x);
}

Value DeviceBuilder::fadd(Value x, Value y) {
  return arith::AddFOp::create(b, x, y);
}
Value DeviceBuilder::fsub(Value x, Value y) {
  return arith::SubFOp::create(b, x, y);
}
Value DeviceBuilder::fmul(Value x, Value y) {
  return arith::MulFOp::create(b, x, y);
}
Value DeviceBuilder::fma(Value x, Value y, Value z) {
  return LLVM::FMAOp::create(b, x, y, z);
}
Value DeviceBuilder::fdiv(Value x, Value y) {
  return arith::DivFOp::create(b, x, y);
}
Value DeviceBuilder::fmax(Value x, Value y) {
  return LLVM::MaxNumOp::create(b, x, y);
}
Value DeviceBuilder::fmin(Value x, Value y) {
  return LLVM::MinNumOp::create(b, x, y);
}
Value DeviceBuilder::fmaximum(Value x, Value y) {
  return LLVM::MaximumOp::create(b, x, y);
}
Value DeviceBuilder::maximumf(Value x, Value y) {
  return arith::MaximumFOp::create(b, x, y);
}
Value DeviceBuilder::feq(Value x, Value y) {
  return arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, x, y);
}
Value DeviceBuilder::fcmp(arith::CmpFPredicate p, Value x, Value y) {
  return arith::CmpFOp::create(b, p, x, y);
}
Value DeviceBuilder::callIntrinsic(StringRef name, Value x) {
  return LLVM::CallIntrinsicOp::create(b, x.getType(), b.getStringAttr(name),
                                       ValueRange{x})
      .getResult(0);
}

Value DeviceBuilder::exp2(Value x) { return ptx::ex2ApproxFtz(b, x); }
Value DeviceBuilder::log2(Value x) { return ptx::lg2ApproxFtz(b, x); }
Value DeviceBuilder::rcpApprox(Value x) {
  return NVVM::RcpApproxFtzF32Op::create(b, f32, x);
}

Value DeviceBuilder::gep(Value base, Type elemType, Value index) {
  return LLVM::GEPOp::create(b, base.getType(), elemType, base,
                             ValueRange{index});
}
Value DeviceBuilder::gepBytes(Value base, Value byteOffset) {
  return gep(base, b.getI8Type(), byteOffset);
}
Value DeviceBuilder::load(Type type, Value ptr, unsigned align) {
  return LLVM::LoadOp::create(b, type, ptr, align);
}
void DeviceBuilder::store(Value value, Value ptr, unsigned align) {
  LLVM::StoreOp::create(b, value, ptr, align);
}

Value DeviceBuilder::extract(Value vec, int64_t i) {
  return LLVM::ExtractElementOp::create(b, vec, c32(i));
}
Value DeviceBuilder::insert(Value vec, Value v, int64_t i) {
  return LLVM::InsertElementOp::create(b, vec, v, c32(i));
}
Value DeviceBuilder::poison(Type t) { return LLVM::PoisonOp::create(b, t); }

Value DeviceBuilder::threadIdX() { return NVVM::ThreadIdXOp::create(b, i32); }
Value DeviceBuilder::blockIdX() { return NVVM::BlockIdXOp::create(b, i32); }
Value DeviceBuilder::blockIdY() { return NVVM::BlockIdYOp::create(b, i32); }
Value DeviceBuilder::blockIdZ() { return NVVM::BlockIdZOp::create(b, i32); }
void DeviceBuilder::barrier() { NVVM::Barrier0Op::create(b); }

Value DeviceBuilder::shflXor(Value v, int offset) {
  return NVVM::ShflOp::create(b, v.getType(), c32(-1), v, c32(offset),
                              c32(0x1f), NVVM::ShflKind::bfly, UnitAttr());
}

void DeviceBuilder::cpAsync16(Value dstShared, Value srcGlobal,
                              Value srcBytes) {
  NVVM::CpAsyncOp::create(b, dstShared, srcGlobal, b.getI32IntegerAttr(16),
                          NVVM::LoadCacheModifierKindAttr::get(
                              b.getContext(), NVVM::LoadCacheModifierKind::CG),
                          srcBytes);
}
void DeviceBuilder::cpAsyncCommit() { NVVM::CpAsyncCommitGroupOp::create(b); }
void DeviceBuilder::cpAsyncWait(int64_t pending) {
  NVVM::CpAsyncWaitGroupOp::create(b, b.getI32IntegerAttr(pending));
}

std::array<Value, 4> DeviceBuilder::ldmatrixX4(Value sharedPtr, bool trans) {
  MLIRContext *ctx = b.getContext();
  auto structType = LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32});
  Value r = NVVM::LdMatrixOp::create(
      b, structType, sharedPtr, b.getI32IntegerAttr(4),
      NVVM::MMALayoutAttr::get(ctx, trans ? NVVM::MMALayout::col
                                          : NVVM::MMALayout::row),
      NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
      NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
  std::array<Value, 4> out;
  for (int i = 0; i < 4; ++i)
    out[i] = LLVM::ExtractValueOp::create(b, r, i);
  return out;
}

void DeviceBuilder::stmatrixX4(Value sharedPtr, ArrayRef<Value> regs) {
  assert(regs.size() == 4 && "x4: one packed pair per matrix");
  MLIRContext *ctx = b.getContext();
  NVVM::StMatrixOp::create(
      b, sharedPtr, regs, NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
      NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
      NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
}

std::array<Value, 4> DeviceBuilder::mma16816(ArrayRef<Value> a,
                                             ArrayRef<Value> bv,
                                             ArrayRef<Value> c, bool bf16) {
  MLIRContext *ctx = b.getContext();
  auto structType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  NVVM::MMATypes t = bf16 ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  // bf16 fragments are i32-packed pairs; f16 ones are vector<2xf16>
  // (i32-packed f16 pairs, as ldmatrix returns them, are bitcast).
  SmallVector<Value, 4> aOps(a.begin(), a.end()), bOps(bv.begin(), bv.end());
  if (!bf16) {
    auto v2h = VectorType::get({2}, b.getF16Type());
    for (Value &v : aOps)
      if (v.getType() != v2h)
        v = LLVM::BitcastOp::create(b, v2h, v);
    for (Value &v : bOps)
      if (v.getType() != v2h)
        v = LLVM::BitcastOp::create(b, v2h, v);
  }
  Value r = NVVM::MmaOp::create(
      b, structType, aOps, bOps, c, ArrayRef<int64_t>{16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{t, t},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  std::array<Value, 4> out;
  for (int i = 0; i < 4; ++i)
    out[i] = LLVM::ExtractValueOp::create(b, r, i);
  return out;
}

Value DeviceBuilder::pack2(Value lo, Value hi, Type halfType) {
  auto v2f = VectorType::get({2}, f32);
  auto v2h = VectorType::get({2}, halfType);
  Value v = LLVM::UndefOp::create(b, v2f);
  v = LLVM::InsertElementOp::create(b, v, lo, c32(0));
  v = LLVM::InsertElementOp::create(b, v, hi, c32(1));
  Value h = arith::TruncFOp::create(b, v2h, v);
  return LLVM::BitcastOp::create(b, i32, h);
}

void DeviceBuilder::ifThen(Value cond, llvm::function_ref<void()> body) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  body();
}

void DeviceBuilder::ifThenElse(Value cond, llvm::function_ref<void()> then,
                               llvm::function_ref<void()> otherwise) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  then();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  otherwise();
}

SmallVector<Value> DeviceBuilder::forLoop(
    Value lb, Value ub, Value step, ValueRange inits,
    llvm::function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto forOp = scf::ForOp::create(b, lb, ub, step, inits);
  {
    OpBuilder::InsertionGuard guard(b);
    Block *block = forOp.getBody();
    if (!block->empty() && block->back().hasTrait<OpTrait::IsTerminator>())
      block->back().erase();
    b.setInsertionPointToEnd(block);
    SmallVector<Value> next =
        body(forOp.getInductionVar(), forOp.getRegionIterArgs());
    scf::YieldOp::create(b, next);
  }
  return SmallVector<Value>(forOp.getResults());
}

SmallVector<Value> DeviceBuilder::forLoop(
    int64_t n, ValueRange inits,
    llvm::function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  return forLoop(c32(0), c32(n), c32(1), inits, body);
}
