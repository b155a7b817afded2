#pragma once
// The data cuda_ipc_exporter_for_test writes and cuda_ipc_region_test expects to read back.
#include <cstddef>
#include <cstdint>

namespace specd::rpc::test {

inline constexpr std::size_t kPatternWords = std::size_t{16}
                                             << 20;  // 64 MiB: the copy takes a while

inline uint32_t PatternWord(std::size_t i) {
  return static_cast<uint32_t>(i) * 2654435761u ^ 0x5eedu;
}

}  // namespace specd::rpc::test
