#pragma once
#include <cstdint>

namespace specd::text {

// A token's index in the vocabulary (BPE tokens and added tokens share one id space).
using TokenId = int32_t;

}  // namespace specd::text
