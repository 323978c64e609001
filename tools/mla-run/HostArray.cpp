//===- HostArray.cpp - owned host arrays and .npy files for mla-run -------===//

#include "HostArray.h"
#include "mlir/IR/BuiltinTypeInterfaces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstring>

using namespace mla;
using llvm::Twine;

//===----------------------------------------------------------------------===//
// Element conversions
//===----------------------------------------------------------------------===//

uint16_t mla::floatToHalf(float value) {
  uint32_t x = llvm::bit_cast<uint32_t>(value);
  uint16_t sign = (x >> 16) & 0x8000;
  uint32_t mag = x & 0x7fffffff;
  if (mag >= 0x7f800000) // inf, or NaN kept quiet
    return sign | 0x7c00 | (mag > 0x7f800000 ? 0x200 : 0);
  // 65520 is halfway between 65504 (the largest half) and 2^16: rounds away.
  if (mag >= 0x477ff000)
    return sign | 0x7c00;
  // Below 2^-14 the result is subnormal: a count of 2^-24 units, and
  // scaling by 2^24 is exact, so lrint's nearest-even rounding is the
  // half's. A count of 1024 is the smallest normal's encoding.
  if (mag < 0x38800000)
    return sign | static_cast<uint16_t>(
                      std::lrint(llvm::bit_cast<float>(mag) * 16777216.0f));
  // Rebias the exponent (127 -> 15) and round 23 mantissa bits to 10; a
  // carry out of the mantissa correctly bumps the exponent.
  uint32_t h = mag - (112u << 23);
  return sign | static_cast<uint16_t>((h + 0xfff + ((h >> 13) & 1)) >> 13);
}

float mla::halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1f, man = bits & 0x3ff;
  if (exp == 0) {
    float mag = std::ldexp(static_cast<float>(man), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31)
    return llvm::bit_cast<float>(sign | 0x7f800000 | (man << 13));
  return llvm::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t mla::floatToBF16(float value) {
  uint32_t x = llvm::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float mla::bf16ToFloat(uint16_t bits) {
  return llvm::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

double HostArray::get(int64_t i) const {
  const char *p = bytes.data() + i * getDTypeSize(dtype);
  switch (dtype) {
  case DType::f32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::f16:
  case DType::bf16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return dtype == DType::f16 ? halfToFloat(v) : bf16ToFloat(v);
  }
  case DType::i32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::i8:
    return static_cast<int8_t>(*p);
  case DType::u8:
    return static_cast<uint8_t>(*p);
  }
  llvm_unreachable("unknown DType");
}

void HostArray::set(int64_t i, double value) {
  char *p = bytes.data() + i * getDTypeSize(dtype);
  switch (dtype) {
  case DType::f32: {
    float v = static_cast<float>(value);
    std::memcpy(p, &v, 4);
    return;
  }
  case DType::f16:
  case DType::bf16: {
    float f = static_cast<float>(value);
    uint16_t v = dtype == DType::f16 ? floatToHalf(f) : floatToBF16(f);
    std::memcpy(p, &v, 2);
    return;
  }
  case DType::i32: {
    int32_t v = static_cast<int32_t>(value);
    std::memcpy(p, &v, 4);
    return;
  }
  case DType::i8:
  case DType::u8:
    *p = static_cast<char>(static_cast<int64_t>(value));
    return;
  }
  llvm_unreachable("unknown DType");
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

static llvm::StringRef npyDescr(DType dtype) {
  switch (dtype) {
  case DType::f32:
  case DType::bf16:
    return "<f4";
  case DType::f16:
    return "<f2";
  case DType::i32:
    return "<i4";
  case DType::i8:
    return "|i1";
  case DType::u8:
    return "|u1";
  }
  llvm_unreachable("unknown DType");
}

/// The value text of `key` in a .npy header dict such as
/// "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".
static std::optional<llvm::StringRef> headerField(llvm::StringRef header,
                                                  llvm::StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == llvm::StringRef::npos)
    return std::nullopt;
  llvm::StringRef rest = header.drop_front(at + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  if (rest.starts_with("(")) // the shape tuple
    return rest.take_until([](char c) { return c == ')'; }).drop_front();
  if (rest.starts_with("'"))
    return rest.drop_front().take_until([](char c) { return c == '\''; });
  return rest.take_until([](char c) { return c == ',' || c == '}'; }).trim();
}

llvm::Expected<HostArray> mla::readNpy(llvm::StringRef path, DType dtype,
                                       llvm::ArrayRef<int64_t> shape) {
  auto fail = [&](const Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + why);
  };
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail(file.getError().message());
  llvm::StringRef contents = (*file)->getBuffer();
  if (!contents.consume_front("\x93NUMPY") || contents.size() < 2)
    return fail("not a .npy file");
  uint8_t major = contents[0];
  contents = contents.drop_front(2);
  size_t lenBytes = major == 1 ? 2 : 4;
  if (contents.size() < lenBytes)
    return fail("truncated header");
  size_t headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i)
    headerLen |= static_cast<size_t>(static_cast<uint8_t>(contents[i]))
                 << (8 * i);
  contents = contents.drop_front(lenBytes);
  if (contents.size() < headerLen)
    return fail("truncated header");
  llvm::StringRef header = contents.take_front(headerLen);
  llvm::StringRef payload = contents.drop_front(headerLen);

  std::optional<llvm::StringRef> descr = headerField(header, "descr");
  std::optional<llvm::StringRef> fortran = headerField(header, "fortran_order");
  std::optional<llvm::StringRef> shapeText = headerField(header, "shape");
  if (!descr || !fortran || !shapeText)
    return fail("malformed header: " + header.trim());
  if (*fortran != "False")
    return fail("Fortran-order arrays are not supported; save a C-order copy");
  llvm::SmallVector<int64_t, 4> fileShape;
  llvm::SmallVector<llvm::StringRef> dims;
  shapeText->split(dims, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef d : dims) {
    int64_t v;
    if (d.trim().getAsInteger(10, v))
      return fail("malformed shape (" + *shapeText + ")");
    fileShape.push_back(v);
  }

  bool shapeMatches = fileShape.size() == shape.size();
  for (size_t i = 0; shapeMatches && i < shape.size(); ++i)
    shapeMatches =
        mlir::ShapedType::isDynamic(shape[i]) || shape[i] == fileShape[i];
  if (!shapeMatches)
    return fail("has shape " + formatShape(fileShape) + ", expected " +
                formatShape(shape));

  // Accepted file dtypes per argument dtype, in the order tried.
  llvm::StringRef fileDType = *descr;
  bool fromF32 = dtype == DType::bf16 && fileDType == "<f4";
  bool fromI64 = dtype == DType::i32 && fileDType == "<i8";
  bool bytes = (dtype == DType::i8 || dtype == DType::u8) &&
               (fileDType == "|i1" || fileDType == "|u1");
  if (!fromF32 && !fromI64 && !bytes && fileDType != npyDescr(dtype))
    return fail("has dtype '" + fileDType + "', expected '" + npyDescr(dtype) +
                "' for " + getDTypeName(dtype));

  HostArray array(dtype, fileShape);
  int64_t n = array.getNumElements();
  size_t elementBytes = fromF32 ? 4 : fromI64 ? 8 : getDTypeSize(dtype);
  if (payload.size() != n * elementBytes)
    return fail("holds " + Twine(payload.size()) + " data bytes, expected " +
                Twine(n * elementBytes));
  if (fromF32) {
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, payload.data() + 4 * i, 4);
      array.set(i, v);
    }
  } else if (fromI64) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, payload.data() + 8 * i, 8);
      if (v < INT32_MIN || v > INT32_MAX)
        return fail("element " + Twine(i) + " = " + Twine(v) +
                    " does not fit in int32");
      array.set(i, static_cast<double>(v));
    }
  } else {
    std::memcpy(array.getData(), payload.data(), payload.size());
  }
  return array;
}

llvm::Error mla::writeNpy(llvm::StringRef path, DType dtype,
                          llvm::ArrayRef<int64_t> shape, const void *data) {
  // numpy's tuple syntax: "()", "(4,)", "(2, 3)".
  std::string dims;
  for (auto [i, d] : llvm::enumerate(shape))
    dims += (i ? ", " : "") + std::to_string(d);
  if (shape.size() == 1)
    dims += ",";
  std::string header = "{'descr': '" + npyDescr(dtype).str() +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded with spaces
  // to a multiple of 64 bytes so the data is aligned.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return llvm::createStringError(ec, "cannot write " + path + ": " +
                                           ec.message());
  os << "\x93NUMPY" << '\x01' << '\x00';
  os << static_cast<char>(header.size() & 0xff)
     << static_cast<char>(header.size() >> 8);
  os << header;
  int64_t n = getNumElements(shape);
  if (dtype == DType::bf16) {
    auto *bits = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < n; ++i) {
      float v = bf16ToFloat(bits[i]);
      os.write(reinterpret_cast<const char *>(&v), 4);
    }
  } else {
    os.write(static_cast<const char *>(data), n * getDTypeSize(dtype));
  }
  os.close();
  if (os.has_error())
    return llvm::createStringError(os.error(), "cannot write " + path);
  return llvm::Error::success();
}
