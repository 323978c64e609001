//===- HostTensor.cpp - host array element types and shapes ---------------===//

#include "mla/Contract/HostTensor.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

using namespace mla;

int64_t mla::getDTypeSize(DType dtype) {
  switch (dtype) {
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::f16:
  case DType::bf16:
    return 2;
  case DType::i8:
  case DType::u8:
    return 1;
  }
  llvm_unreachable("unknown DType");
}

llvm::StringRef mla::getDTypeName(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return "float32";
  case DType::f16:
    return "float16";
  case DType::bf16:
    return "bfloat16";
  case DType::i32:
    return "int32";
  case DType::i8:
    return "int8";
  case DType::u8:
    return "uint8";
  }
  llvm_unreachable("unknown DType");
}

llvm::StringRef mla::getDTypeIRName(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return "f32";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  case DType::i32:
    return "i32";
  case DType::i8:
  case DType::u8:
    return "i8";
  }
  llvm_unreachable("unknown DType");
}

bool mla::isCompatibleDType(DType actual, DType expected) {
  if (actual == expected)
    return true;
  auto isByte = [](DType t) { return t == DType::i8 || t == DType::u8; };
  return isByte(actual) && isByte(expected);
}

std::string mla::formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (d == kDynamicDim)
      os << '?';
    else
      os << d;
  });
  os << ']';
  return text;
}

int64_t mla::getNumElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}
