// A capacity shared in arrival order: what a request takes, when it waits, and when it is refused.
#include "common/engine/admission_queue.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace specd::engine {
namespace {

using ::testing::HasSubstr;

bool Never() { return false; }

// Waits until `queue` has `waiting` requests in line.
void AwaitWaiting(const AdmissionQueue& queue, int64_t waiting) {
  while (queue.counts().waiting != waiting)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(AdmissionQueueTest, TicketsHoldTheirUnitsUntilTheyGo) {
  AdmissionQueue queue(10, 0, "bytes");
  {
    absl::StatusOr<AdmissionQueue::Ticket> a = queue.Admit(4, Never);
    absl::StatusOr<AdmissionQueue::Ticket> b = queue.Admit(6, Never);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(queue.counts().used, 10);
    EXPECT_EQ(queue.counts().holders, 2);
  }
  EXPECT_EQ(queue.counts().used, 0);
  EXPECT_EQ(queue.counts().holders, 0);
}

TEST(AdmissionQueueTest, MoreThanTheWholeCapacityIsRefusedAtOnce) {
  AdmissionQueue queue(10, 8, "bytes");
  const absl::StatusOr<AdmissionQueue::Ticket> ticket = queue.Admit(11, Never);
  EXPECT_EQ(ticket.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(ticket.status().message(), HasSubstr("needs 11 bytes"));
}

TEST(AdmissionQueueTest, BeyondTheWaitingBoundIsRefusedAtOnce) {
  AdmissionQueue queue(1, 1, "slots");
  absl::StatusOr<AdmissionQueue::Ticket> running = queue.Admit(1, Never);
  ASSERT_TRUE(running.ok());
  std::atomic<bool> stop = false;
  std::thread waiter([&] { EXPECT_FALSE(queue.Admit(1, [&] { return stop.load(); }).ok()); });
  AwaitWaiting(queue, 1);
  EXPECT_EQ(queue.Admit(1, Never).status().code(), absl::StatusCode::kResourceExhausted);
  stop = true;
  waiter.join();
}

TEST(AdmissionQueueTest, AWaitingRequestTakesItsUnitsOnceEnoughAreGivenBack) {
  AdmissionQueue queue(10, 4, "bytes");
  std::optional<AdmissionQueue::Ticket> first(*queue.Admit(6, Never));
  std::atomic<bool> admitted = false;
  std::thread waiter([&] {
    absl::StatusOr<AdmissionQueue::Ticket> ticket = queue.Admit(5, Never);
    EXPECT_TRUE(ticket.ok());
    admitted = true;
  });
  AwaitWaiting(queue, 1);
  EXPECT_FALSE(admitted);
  first.reset();
  waiter.join();
  EXPECT_TRUE(admitted);
}

TEST(AdmissionQueueTest, RequestsAreServedInArrivalOrderEvenWhenALaterOneWouldFit) {
  AdmissionQueue queue(10, 4, "bytes");
  std::optional<AdmissionQueue::Ticket> first(*queue.Admit(6, Never));
  std::vector<int> order;
  std::mutex order_mutex;
  std::thread big([&] {
    absl::StatusOr<AdmissionQueue::Ticket> ticket = queue.Admit(8, Never);
    std::lock_guard lock(order_mutex);
    order.push_back(8);
  });
  AwaitWaiting(queue, 1);
  // 3 bytes would fit beside the first, but the request of 8 came earlier (and 3 do not fit
  // beside it: the small one goes once the big one has).
  std::thread small([&] {
    absl::StatusOr<AdmissionQueue::Ticket> ticket = queue.Admit(3, Never);
    std::lock_guard lock(order_mutex);
    order.push_back(3);
  });
  AwaitWaiting(queue, 2);
  EXPECT_FALSE(queue.TryAdmit(1).ok());  // nor does anyone jump the line
  first.reset();
  big.join();
  small.join();
  EXPECT_THAT(order, ::testing::ElementsAre(8, 3));
}

TEST(AdmissionQueueTest, ACancelledWaitLeavesTheLineAndThoseBehindMoveUp) {
  AdmissionQueue queue(10, 4, "bytes");
  std::optional<AdmissionQueue::Ticket> first(*queue.Admit(10, Never));
  std::atomic<bool> cancel = false;
  std::thread cancelled([&] {
    EXPECT_EQ(queue.Admit(5, [&] { return cancel.load(); }).status().code(),
              absl::StatusCode::kCancelled);
  });
  AwaitWaiting(queue, 1);
  std::thread behind([&] { EXPECT_TRUE(queue.Admit(5, Never).ok()); });
  AwaitWaiting(queue, 2);
  cancel = true;
  cancelled.join();
  first.reset();
  behind.join();
}

TEST(AdmissionQueueTest, TryAdmitTakesOnlyWhatIsFreeNow) {
  AdmissionQueue queue(10, 4, "bytes");
  absl::StatusOr<AdmissionQueue::Ticket> held = queue.TryAdmit(7);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(queue.TryAdmit(4).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(queue.TryAdmit(3).ok());
}

TEST(AdmissionQueueTest, CloseRefusesTheWaitingAndEveryLaterRequest) {
  AdmissionQueue queue(1, 4, "slots");
  absl::StatusOr<AdmissionQueue::Ticket> running = queue.Admit(1, Never);
  std::thread waiter(
      [&] { EXPECT_EQ(queue.Admit(1, Never).status().code(), absl::StatusCode::kUnavailable); });
  AwaitWaiting(queue, 1);
  queue.Close();
  waiter.join();
  EXPECT_EQ(queue.TryAdmit(0).status().code(), absl::StatusCode::kUnavailable);
}

TEST(AdmissionQueueTest, TheObserverSeesEveryChange) {
  std::vector<AdmissionCounts> seen;
  AdmissionQueue queue(10, 4, "bytes",
                       [&](const AdmissionCounts& counts) { seen.push_back(counts); });
  { absl::StatusOr<AdmissionQueue::Ticket> ticket = queue.Admit(3, Never); }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().used, 0);  // the start
  bool saw_three = false;
  for (const AdmissionCounts& counts : seen) saw_three |= counts.used == 3 && counts.holders == 1;
  EXPECT_TRUE(saw_three);
  EXPECT_EQ(seen.back().used, 0);
  EXPECT_EQ(seen.back().waiting, 0);
}

}  // namespace
}  // namespace specd::engine
