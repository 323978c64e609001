//===- MixedBatch.cpp - Which requests of a batch take decode -------------===//

#include "mla/Contract/MixedBatch.h"
#include "mla/Contract/Error.h"
#include "llvm/ADT/Twine.h"

using namespace mla;

llvm::Error mla::checkRuntimeDecodeThreshold(int64_t threshold) {
  if (threshold <= kRuntimeDecodeQueryLen)
    return llvm::Error::success();
  return makeInvalidArgumentError(
      "decode_threshold " + llvm::Twine(threshold) +
      " needs the batch at compile time: mla.decode has a static Sq, so a "
      "batch known only at run time can only split off single-row requests "
      "(decode_threshold 1; 0 for prefill only)");
}

int64_t mla::countLeadingDecodes(llvm::ArrayRef<int32_t> queryStartLoc,
                                 int64_t threshold) {
  if (!takesDecodePath(kRuntimeDecodeQueryLen, threshold))
    return 0;
  int64_t count = 0;
  while (count + 1 < static_cast<int64_t>(queryStartLoc.size()) &&
         queryStartLoc[count + 1] - queryStartLoc[count] ==
             kRuntimeDecodeQueryLen)
    ++count;
  return count;
}
