//===- Error.cpp - errors reported by the mla runtime ---------------------===//

#include "mla/Contract/Error.h"

char mla::RuntimeError::ID;
