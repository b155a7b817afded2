#include "services/orchestrator/backend_pool.h"

#include <algorithm>
#include <iostream>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace specd::orchestrator {
namespace {

// Why a verifier serving `info` cannot join a pool serving `target`, or OK.
absl::Status SameTarget(const v1::TargetVerifierServiceInfoResponse& target,
                        const v1::TargetVerifierServiceInfoResponse& info) {
  auto shape = [](const v1::TargetVerifierServiceInfoResponse& of) {
    return absl::StrCat("vocabulary ", of.vocab_size(), ", hidden size ", of.hidden_size(), ", ",
                        of.num_layers(), " layers, EOS [", absl::StrJoin(of.eos_token_ids(), ","),
                        "], sessions of ", of.max_session_length(), " tokens");
  };
  if (shape(target) == shape(info)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("it serves another target (", shape(info),
                                                    "; the others: ", shape(target), ")"));
}

// Why `drafter` cannot draft for `target`, or OK.
absl::Status DrafterFits(const v1::TargetVerifierServiceInfoResponse& target,
                         const v1::DrafterServiceInfoResponse& drafter) {
  if (drafter.hidden_size() != target.hidden_size() ||
      drafter.vocab_size() != target.vocab_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the drafter expects hidden size ", drafter.hidden_size(), " and vocabulary ",
                     drafter.vocab_size(), " but the target has ", target.hidden_size(), " and ",
                     target.vocab_size()));
  }
  for (const uint32_t layer : drafter.target_layer_ids()) {
    if (layer >= target.num_layers()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the drafter reads target layer ", layer, " but the target has ", target.num_layers()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct BackendPool::Member {
  Member(BackendPair pair, v1::TargetVerifierServiceInfoResponse target, absl::Duration retry)
      : pair(std::move(pair)), target(std::move(target)), drafter_retry(retry) {}

  std::optional<v1::DrafterServiceInfoResponse> DrafterInfo() {
    if (pair.drafter == nullptr) return std::nullopt;
    std::lock_guard lock(drafter_mutex);
    if (drafter_info.has_value() || absl::Now() < drafter_next_try) return drafter_info;
    absl::StatusOr<v1::DrafterServiceInfoResponse> info = pair.drafter->Info();
    if (info.ok() && DrafterFits(target, *info).ok()) {
      drafter_info = *std::move(info);
    } else {
      drafter_next_try = absl::Now() + drafter_retry;
    }
    return drafter_info;
  }

  const BackendPair pair;
  const v1::TargetVerifierServiceInfoResponse target;
  const absl::Duration drafter_retry;
  std::atomic<int64_t> in_flight = 0;
  engine::SpeculationGuard guard;  // prices this pair's steps
  std::mutex drafter_mutex;
  std::optional<v1::DrafterServiceInfoResponse> drafter_info;
  absl::Time drafter_next_try = absl::InfinitePast();
};

BackendPool::BackendPool(Discover discover, Connect connect, absl::Duration drafter_retry)
    : discover_(std::move(discover)), connect_(std::move(connect)), drafter_retry_(drafter_retry) {}

BackendPool::~BackendPool() {
  {
    std::lock_guard lock(refresher_mutex_);
    stopping_ = true;
  }
  refresher_wake_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

absl::StatusOr<std::unique_ptr<BackendPool>> BackendPool::Fixed(BackendPair pair,
                                                                absl::Duration drafter_retry) {
  auto pool = std::unique_ptr<BackendPool>(new BackendPool(nullptr, nullptr, drafter_retry));
  if (absl::Status joined = pool->Join(std::move(pair)); !joined.ok()) return joined;
  return pool;
}

std::unique_ptr<BackendPool> BackendPool::Discovered(Discover discover, Connect connect,
                                                     absl::Duration drafter_retry) {
  return std::unique_ptr<BackendPool>(
      new BackendPool(std::move(discover), std::move(connect), drafter_retry));
}

absl::Status BackendPool::Join(BackendPair pair) {
  // Both Info calls go over the network: before the lock that every request's Acquire takes.
  absl::StatusOr<v1::TargetVerifierServiceInfoResponse> info = pair.verifier->Info();
  if (!info.ok()) {
    return absl::UnavailableError(absl::StrCat("the target verifier on ", pair.host,
                                               " cannot be reached: ", info.status().message()));
  }
  if (std::optional<v1::TargetVerifierServiceInfoResponse> pool_target = target();
      pool_target.has_value()) {
    if (absl::Status same = SameTarget(*pool_target, *info); !same.ok()) return same;
  }
  auto member = std::make_shared<Member>(std::move(pair), *info, drafter_retry_);
  if (member->pair.drafter != nullptr) {
    // A drafter made for another target is refused; one not up yet is asked again later.
    absl::StatusOr<v1::DrafterServiceInfoResponse> drafter = member->pair.drafter->Info();
    if (drafter.ok()) {
      if (absl::Status fits = DrafterFits(*info, *drafter); !fits.ok()) return fits;
      member->drafter_info = *std::move(drafter);
    } else {
      std::cerr << "orchestrator: the drafter on " << member->pair.host << " cannot be reached ("
                << drafter.status() << "); its requests decode target-only until it can\n";
      member->drafter_next_try = absl::Now() + drafter_retry_;
    }
  }
  std::lock_guard lock(mutex_);
  if (!target_.has_value()) target_ = *info;  // Joins happen one at a time (Refresh, Fixed)
  members_[member->pair.host] = std::move(member);
  return absl::OkStatus();
}

absl::Status BackendPool::Refresh() {
  if (discover_ == nullptr) return absl::OkStatus();  // a fixed pool
  absl::StatusOr<std::vector<std::string>> hosts = discover_();
  if (!hosts.ok()) return hosts.status();
  const std::set<std::string> listed(hosts->begin(), hosts->end());
  std::vector<std::string> fresh;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(members_, [&](const auto& entry) {
      if (listed.contains(entry.first)) return false;
      std::cerr << "orchestrator: pair " << entry.first << " left\n";
      return true;
    });
    std::erase_if(refused_, [&](const auto& entry) { return !listed.contains(entry.first); });
    for (const std::string& host : listed) {
      if (!members_.contains(host)) fresh.push_back(host);
    }
  }
  // Joining asks the new verifiers over the network: not under the lock requests take.
  for (const std::string& host : fresh) {
    const absl::Status joined = Join(connect_(host));
    std::lock_guard lock(mutex_);
    if (joined.ok()) {
      std::cerr << "orchestrator: pair " << host << " joined (" << members_.size() << " in all)\n";
      refused_.erase(host);
    } else if (refused_[host] != joined.message()) {
      std::cerr << "orchestrator: pair " << host << " not used yet: " << joined.message() << "\n";
      refused_[host] = std::string(joined.message());
    }
  }
  return absl::OkStatus();
}

void BackendPool::RefreshEvery(absl::Duration period) {
  refresher_ = std::thread([this, period] {
    std::unique_lock lock(refresher_mutex_);
    while (!refresher_wake_.wait_for(lock, absl::ToChronoSeconds(period),
                                     [this] { return stopping_; })) {
      lock.unlock();
      if (absl::Status refreshed = Refresh(); !refreshed.ok()) {
        std::cerr << "orchestrator: cannot list the pairs: " << refreshed << "\n";
      }
      lock.lock();
    }
  });
}

std::optional<v1::TargetVerifierServiceInfoResponse> BackendPool::target() const {
  std::lock_guard lock(mutex_);
  return target_;
}

size_t BackendPool::size() const {
  std::lock_guard lock(mutex_);
  return members_.size();
}

absl::StatusOr<BackendPool::Lease> BackendPool::Acquire() {
  std::lock_guard lock(mutex_);
  if (members_.empty()) return absl::UnavailableError("no target verifier is serving");
  // Ties go round the pairs, so that requests one after another spread over them too.
  std::vector<std::shared_ptr<Member>> members;
  for (const auto& [host, member] : members_) members.push_back(member);
  std::rotate(members.begin(), members.begin() + (next_start_++ % members.size()), members.end());
  return Lease(*std::min_element(members.begin(), members.end(),
                                 [](auto& a, auto& b) { return a->in_flight < b->in_flight; }));
}

std::optional<v1::DrafterServiceInfoResponse> BackendPool::AnyDrafterInfo() {
  std::vector<std::shared_ptr<Member>> members;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [host, member] : members_) members.push_back(member);
  }
  for (const std::shared_ptr<Member>& member : members) {
    if (std::optional<v1::DrafterServiceInfoResponse> info = member->DrafterInfo()) return info;
  }
  return std::nullopt;
}

BackendPool::Lease::Lease(std::shared_ptr<Member> member) : member_(std::move(member)) {
  ++member_->in_flight;
}

BackendPool::Lease::~Lease() {
  if (member_ != nullptr) --member_->in_flight;
}

verifier::VerifierApi& BackendPool::Lease::verifier() const { return *member_->pair.verifier; }

drafter::DrafterApi* BackendPool::Lease::drafter() const { return member_->pair.drafter.get(); }

engine::InProcessPair* BackendPool::Lease::in_process() const {
  return member_->pair.in_process.get();
}

engine::SpeculationGuard& BackendPool::Lease::guard() const { return member_->guard; }

std::optional<v1::DrafterServiceInfoResponse> BackendPool::Lease::drafter_info() const {
  return member_->DrafterInfo();
}

}  // namespace specd::orchestrator
