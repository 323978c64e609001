//===- Error.cpp - errors reported by the mla runtime ---------------------===//

#include "mla/Runtime/Error.h"

char mla::RuntimeError::ID;
