#include "kernels/cpu/parallel_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace specd::kernels::cpu {
namespace {

std::vector<std::byte> Pattern(std::size_t bytes) {
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + 7) & 0xff);
  return data;
}

TEST(ParallelCopyTest, CopiesEveryByteForAnySizeAndThreadCount) {
  for (std::size_t bytes : {0ul, 1ul, 63ul, 64ul, 65ul, 1000ul, 4096ul + 3, 1ul << 20}) {
    for (int threads : {0, 1, 2, 3, 8}) {
      const std::vector<std::byte> src = Pattern(bytes);
      std::vector<std::byte> dst(bytes + 1, std::byte{0xAA});  // one guard byte past the end
      ParallelCopy(dst.data(), src.data(), bytes, threads);
      EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()))
          << bytes << " bytes, " << threads << " threads";
      EXPECT_EQ(dst[bytes], std::byte{0xAA})
          << "wrote past the end: " << bytes << " bytes, " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace specd::kernels::cpu
