#include "common/engine/device_turns.h"

#include <algorithm>
#include <utility>

namespace specd::engine {

int64_t DeviceTurns::Subscribe(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wakes_.emplace_back(next_id_, std::move(wake));
  return next_id_++;
}

void DeviceTurns::Unsubscribe(int64_t id) {
  std::lock_guard lock(mutex_);
  std::erase_if(wakes_, [id](const auto& wake) { return wake.first == id; });
}

bool DeviceTurns::TryBegin() {
  bool idle = false;
  return busy_.compare_exchange_strong(idle, true);
}

void DeviceTurns::End() {
  last_end_.store(Clock::now().time_since_epoch().count());
  busy_.store(false);
  std::lock_guard lock(mutex_);
  for (const auto& [id, wake] : wakes_) wake();
}

}  // namespace specd::engine
