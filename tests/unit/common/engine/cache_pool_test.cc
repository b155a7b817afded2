// The caches' memory budget: what a session reserves, and that a session waits for memory rather
// than being given memory that running ones hold.
#include "common/engine/cache_pool.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "gtest/gtest.h"

namespace specd::engine {
namespace {

constexpr model::CacheFootprint kFootprint{.fixed_bytes = 1000, .bytes_per_token = 10};

bool Never() { return false; }

TEST(CachePoolTest, ASequenceReservesItsFixedStateAndItsTokensInWholeBlocks) {
  std::unique_ptr<CachePool> pool =
      *CachePool::Create({.budget_bytes = 1 << 20, .block_tokens = 16, .max_waiting = 4});
  EXPECT_EQ(pool->BytesFor(kFootprint, 1), 1000 + 16 * 10);
  EXPECT_EQ(pool->BytesFor(kFootprint, 16), 1000 + 16 * 10);
  EXPECT_EQ(pool->BytesFor(kFootprint, 17), 1000 + 32 * 10);
  {
    absl::StatusOr<CachePool::Reservation> reservation = pool->Reserve(kFootprint, 17, Never);
    ASSERT_TRUE(reservation.ok());
    EXPECT_EQ(pool->use().used_bytes, 1320);
    EXPECT_EQ(pool->use().sequences, 1);
  }
  EXPECT_EQ(pool->use().used_bytes, 0);
  EXPECT_EQ(pool->use().capacity_bytes, 1 << 20);
}

TEST(CachePoolTest, ASessionWaitsForMemoryUntilARunningOneCloses) {
  // Room for one sequence of 64 tokens (1640 bytes), not two.
  std::unique_ptr<CachePool> pool =
      *CachePool::Create({.budget_bytes = 3000, .block_tokens = 16, .max_waiting = 4});
  std::optional<CachePool::Reservation> running(*pool->Reserve(kFootprint, 64, Never));
  std::atomic<bool> admitted = false;
  std::thread next([&] {
    EXPECT_TRUE(pool->Reserve(kFootprint, 64, Never).ok());
    admitted = true;
  });
  while (pool->use().waiting != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(admitted);
  running.reset();
  next.join();
  EXPECT_TRUE(admitted);
}

TEST(CachePoolTest, TryReserveRefusesWhatDoesNotFitNow) {
  std::unique_ptr<CachePool> pool =
      *CachePool::Create({.budget_bytes = 3000, .block_tokens = 16, .max_waiting = 4});
  absl::StatusOr<CachePool::Reservation> running = pool->TryReserve(kFootprint, 64);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(pool->TryReserve(kFootprint, 64).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(CachePoolTest, ASessionLargerThanTheBudgetIsRefusedAtOnce) {
  std::unique_ptr<CachePool> pool =
      *CachePool::Create({.budget_bytes = 3000, .block_tokens = 16, .max_waiting = 4});
  EXPECT_EQ(pool->Reserve(kFootprint, 1000, Never).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(CachePoolTest, ABudgetOrBlockThatIsNotPositiveIsRefused) {
  EXPECT_FALSE(CachePool::Create({.budget_bytes = 0, .block_tokens = 16, .max_waiting = 4}).ok());
  EXPECT_FALSE(CachePool::Create({.budget_bytes = 10, .block_tokens = 0, .max_waiting = 4}).ok());
}

TEST(CachePoolTest, TheDefaultBudgetIsHalfOfWhatThisMachineHasFree) {
  const int64_t budget = DefaultCacheBudget();
  EXPECT_GT(budget, int64_t{1} << 20);
  EXPECT_LT(budget, sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE));
}

}  // namespace
}  // namespace specd::engine
