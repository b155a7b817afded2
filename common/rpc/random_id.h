#pragma once
// Unpredictable identifiers from the OS's random source: a server process's instance id (new on
// every start, so clients know its sessions and handles are gone), job ids, page tokens.
#include <string>

namespace specd::rpc {

// 2 · `bytes` lower-case hex digits.
std::string RandomHex(int bytes);

// The id of one run of a server process (Info's instance_id).
inline std::string NewInstanceId() { return RandomHex(8); }

}  // namespace specd::rpc
