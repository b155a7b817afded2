#pragma once
// Unpredictable identifiers (job ids, page tokens): hex digits from the OS's random source.
#include <string>

namespace specd::trainer {

// 2 · `bytes` lower-case hex digits.
std::string RandomHex(int bytes);

}  // namespace specd::trainer
