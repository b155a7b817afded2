#pragma once
// The verifier + drafter pairs an orchestrator sends requests to. A drafter reads its verifier's
// context buffers from shared memory by name, so the two of a pair share a host (a Pod); a request
// runs on one pair from Prefill to its last Verify, the pair with the fewest requests in flight.
// Pairs are fixed (in process, or one verifier and drafter address) or discovered: a list of hosts
// asked for again on every Refresh (the A records of a Kubernetes headless Service), each host
// serving a verifier and a drafter on known ports. Every pair must serve the same target.
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/speculation_guard.h"
#include "services/drafter/drafter_api.h"
#include "services/verifier/verifier_api.h"

namespace specd::engine {
class InProcessPair;  // common/engine/in_process_ports.h
}  // namespace specd::engine

namespace specd::orchestrator {

struct BackendPair {
  std::string host;  // names the pair in logs
  std::shared_ptr<verifier::VerifierApi> verifier;
  std::shared_ptr<drafter::DrafterApi> drafter;  // null: target-only
  // In process: the engine's pair, whose ports call the sessions directly (the clients then only
  // answer Info); null: requests go through the clients.
  std::shared_ptr<engine::InProcessPair> in_process = nullptr;
};

class BackendPool {
 private:
  struct Member;

 public:
  // The hosts serving now.
  using Discover = std::function<absl::StatusOr<std::vector<std::string>>()>;
  // The clients of the pair on a host.
  using Connect = std::function<BackendPair(const std::string& host)>;

  // One fixed pair whose verifier must answer now; its drafter may come later.
  static absl::StatusOr<std::unique_ptr<BackendPool>> Fixed(BackendPair pair,
                                                            absl::Duration drafter_retry);
  // Pairs found by Refresh; none until the first call.
  static std::unique_ptr<BackendPool> Discovered(Discover discover, Connect connect,
                                                 absl::Duration drafter_retry);
  ~BackendPool();

  // Asks `discover` again: a new host joins once its verifier answers and serves the pool's
  // target (hosts that do not are asked again next time); a host no longer listed leaves, its
  // running requests finishing on it.
  absl::Status Refresh();
  // Refreshes every `period` on a thread of its own, until the pool is destroyed.
  void RefreshEvery(absl::Duration period);

  // The target every pair serves (the first verifier's Info); nullopt until a pair has joined.
  std::optional<v1::TargetVerifierServiceInfoResponse> target() const;
  size_t size() const;

  // A pair held for one request; the pair's count of requests in flight drops when it ends.
  class Lease {
   public:
    Lease(Lease&&) noexcept = default;
    Lease& operator=(Lease&&) noexcept = default;
    ~Lease();
    verifier::VerifierApi& verifier() const;
    drafter::DrafterApi* drafter() const;
    engine::InProcessPair* in_process() const;
    // The pair's speculation guard, which its requests share.
    engine::SpeculationGuard& guard() const;
    // The drafter's Info; nullopt while it cannot be reached (asked again at most every
    // drafter_retry) or when the pair has none.
    std::optional<v1::DrafterServiceInfoResponse> drafter_info() const;

   private:
    friend class BackendPool;
    explicit Lease(std::shared_ptr<Member> member);
    std::shared_ptr<Member> member_;
  };
  // The pair with the fewest requests in flight (ties taken in turn); UNAVAILABLE when there is
  // none.
  absl::StatusOr<Lease> Acquire();
  // A drafter's Info (the first pair's that answers), for GetModelInfo.
  std::optional<v1::DrafterServiceInfoResponse> AnyDrafterInfo();

 private:
  BackendPool(Discover discover, Connect connect, absl::Duration drafter_retry);
  // Joins `pair` when its verifier answers and fits; the reason when it does not.
  absl::Status Join(BackendPair pair);

  const Discover discover_;
  const Connect connect_;
  const absl::Duration drafter_retry_;
  mutable std::mutex mutex_;
  std::optional<v1::TargetVerifierServiceInfoResponse> target_;
  std::map<std::string, std::shared_ptr<Member>> members_;  // by host
  std::map<std::string, std::string> refused_;              // host → why, logged once
  size_t next_start_ = 0;                                   // where Acquire's look begins

  std::mutex refresher_mutex_;
  std::condition_variable refresher_wake_;
  bool stopping_ = false;
  std::thread refresher_;
};

}  // namespace specd::orchestrator
