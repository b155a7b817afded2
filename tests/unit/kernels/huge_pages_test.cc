#include "kernels/cpu/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

namespace specd::kernels::cpu {
namespace {

constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;

// Whether the system gives huge pages to memory that asks (THP "always" or "madvise").
bool TransparentHugePagesOn() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(enabled, modes);
  return modes.find("[never]") == std::string::npos && !modes.empty();
}

// The THPeligible field of the mapping holding `address` in /proc/self/smaps: whether the kernel
// may back it with huge pages.
int ThpEligible(const void* address) {
  const auto target = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {  // a mapping's first line
      inside = begin <= target && target < end;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

TEST(HugePagesTest, LargeBuffersStartOnAHugePageAndMayLiveOnHugePages) {
  HugePageVector<uint8_t> weights(kHugePage * 3 + 100);
  std::iota(weights.begin(), weights.end(), 0);  // every byte writable
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(weights.data()) % kHugePage, 0);
  EXPECT_EQ(weights.back(), static_cast<uint8_t>(weights.size() - 1));
  if (TransparentHugePagesOn()) {
    EXPECT_EQ(ThpEligible(weights.data()), 1);
  }
}

TEST(HugePagesTest, SmallBuffersAreCacheLineAlignedHeapMemory) {
  for (std::size_t bytes : {0ul, 1ul, 4096ul, kHugePage - 1}) {
    void* buffer = AllocateHugePageBuffer(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer) % 64, 0) << bytes << " bytes";
    FreeHugePageBuffer(buffer, bytes);
  }
}

TEST(HugePagesTest, VectorsGrowAndCopyLikeAnyOther) {
  HugePageVector<float> values;
  for (int i = 0; i < 1 << 20; ++i) values.push_back(static_cast<float>(i));  // crosses 2 MiB
  const HugePageVector<float> copy = values;
  EXPECT_EQ(copy, values);
  EXPECT_EQ(copy[(1 << 20) - 1], static_cast<float>((1 << 20) - 1));
}

}  // namespace
}  // namespace specd::kernels::cpu
