#pragma once
// The sessions a service holds for its clients, each on a lease: a session that no call has
// touched for `idle_timeout` is dropped by a background thread, so a client that vanishes (an
// orchestrator killed mid-request) leaks neither memory nor shared-memory buffers.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace specd::rpc {

// Session ids are chosen by clients; the contract caps them at 128 bytes.
inline constexpr size_t kMaxSessionIdBytes = 128;

template <typename Session>
class SessionTable {
 public:
  // `on_size` (optional) hears the number of open sessions after every change, e.g. a gauge.
  SessionTable(size_t max_sessions, absl::Duration idle_timeout,
               std::function<void(size_t)> on_size = nullptr)
      : max_sessions_(max_sessions),
        idle_timeout_(idle_timeout),
        on_size_(std::move(on_size)),
        reaper_([this] { Reap(); }) {}

  ~SessionTable() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    reaper_.join();
  }

  SessionTable(const SessionTable&) = delete;
  SessionTable& operator=(const SessionTable&) = delete;

  // INVALID_ARGUMENT for an empty or over-long id, ALREADY_EXISTS for an id in use,
  // RESOURCE_EXHAUSTED when max_sessions are open.
  absl::StatusOr<std::shared_ptr<Session>> Insert(const std::string& id,
                                                  std::shared_ptr<Session> session) {
    if (id.empty() || id.size() > kMaxSessionIdBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("session_id must be 1 to ", kMaxSessionIdBytes, " bytes"));
    }
    std::lock_guard lock(mutex_);
    if (entries_.contains(id)) {
      return absl::AlreadyExistsError(absl::StrCat("session \"", id, "\" is already open"));
    }
    if (entries_.size() >= max_sessions_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("all ", max_sessions_, " sessions are in use"));
    }
    entries_[id] = Entry{session, absl::Now()};
    Resized();
    return session;
  }

  // The session, its lease renewed; nullptr if unknown or expired.
  std::shared_ptr<Session> Find(const std::string& id) {
    std::lock_guard lock(mutex_);
    auto found = entries_.find(id);
    if (found == entries_.end()) return nullptr;
    found->second.last_used = absl::Now();
    return found->second.session;
  }

  // True if the session was open. A call still holding it finishes on its own copy.
  bool Erase(const std::string& id) {
    std::lock_guard lock(mutex_);
    const bool erased = entries_.erase(id) > 0;
    Resized();
    return erased;
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

  size_t max_sessions() const { return max_sessions_; }
  absl::Duration idle_timeout() const { return idle_timeout_; }

 private:
  struct Entry {
    std::shared_ptr<Session> session;
    absl::Time last_used;
  };

  void Reap() {
    // Checks a few times per timeout, so a lease ends at most a quarter late.
    const auto period = absl::ToChronoMilliseconds(
        std::clamp(idle_timeout_ / 4, absl::Milliseconds(10), absl::Seconds(1)));
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
      const absl::Time deadline = absl::Now() - idle_timeout_;
      if (std::erase_if(entries_,
                        [&](const auto& entry) { return entry.second.last_used < deadline; })) {
        Resized();
      }
    }
  }

  void Resized() {  // with mutex_ held
    if (on_size_) on_size_(entries_.size());
  }

  const size_t max_sessions_;
  const absl::Duration idle_timeout_;
  const std::function<void(size_t)> on_size_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::string, Entry> entries_;
  std::thread reaper_;  // last: it starts once everything it reads exists
};

}  // namespace specd::rpc
