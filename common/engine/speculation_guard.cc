#include "common/engine/speculation_guard.h"

#include <algorithm>
#include <utility>

namespace specd::engine {
namespace {

// Costs older than this many steps at a batch size are measured again.
constexpr int64_t kRefreshSteps = 128;
// A request that stopped speculating tries again after this many steps, then twice as many, …
constexpr int64_t kFirstProbe = 32;
// …once the time it spent without speculating since it last did is worth this share of it.
constexpr double kProbeShare = 0.02;
// The regime's acceptance counts as this many of a request's own steps…
constexpr double kRegimeWeight = 4;
// …whose counts fade by this factor per step, so that what its text does now counts most.
constexpr double kOwnFading = 0.97;
// Past this many steps at the first position, a regime's counts are halved: recent steps count.
constexpr double kRegimeMemory = 4096;
// Speculating is chosen only when priced this much faster than target-only. Its price rests on
// fitted step times and acceptance odds (measured 7 % off at 16 requests on a CPU), and at a tie
// it is worse for a stream: its tokens come in bursts a draft and a verify apart (there 400 ms,
// against 67 ms between target-only tokens).
constexpr double kSpeculationMargin = 1.1;

double At(const std::vector<double>& counts, size_t i) { return i < counts.size() ? counts[i] : 0; }

// Per draft position i < `positions`: P(drafts 1 … i + 1 are accepted) and P(draft i + 1 is
// proposed) when asked for. Each position's odds given the drafts before it were accepted come
// from the steps that reached it: the regime's (a position none reached takes the odds of the one
// before it; the first, even odds), sharpened by the request's own.
struct DraftOdds {
  std::vector<double> accepted;
  std::vector<double> proposed;
};

DraftOdds OddsOf(const DraftPositionCounts& regime, const DraftPositionCounts& own,
                 int64_t positions) {
  DraftOdds odds;
  double regime_odds = 0.5;
  double accepted = 1;
  for (size_t i = 0; i < static_cast<size_t>(positions); ++i) {
    regime_odds = (At(regime.accepted, i) + regime_odds) / (At(regime.reached, i) + 1);
    accepted *=
        (At(own.accepted, i) + kRegimeWeight * regime_odds) / (At(own.reached, i) + kRegimeWeight);
    odds.accepted.push_back(accepted);

    const double regime_proposed = (At(regime.proposed, i) + 1) / (At(regime.asked, i) + 1);
    odds.proposed.push_back((At(own.proposed, i) + kRegimeWeight * regime_proposed) /
                            (At(own.asked, i) + kRegimeWeight));
  }
  return odds;
}

bool Stale(std::optional<int64_t> age) { return !age.has_value() || *age >= kRefreshSteps; }

}  // namespace

void DraftPositionCounts::Add(int64_t asked_drafts, int64_t proposed_drafts,
                              int64_t accepted_drafts) {
  if (static_cast<int64_t>(asked.size()) < asked_drafts) {
    for (std::vector<double>* counts : {&asked, &proposed, &reached, &accepted}) {
      counts->resize(asked_drafts, 0);
    }
  }
  for (int64_t i = 0; i < asked_drafts; ++i) {
    ++asked[i];
    if (i < proposed_drafts) ++proposed[i];
    if (i <= accepted_drafts) ++reached[i];
    if (i < accepted_drafts) ++accepted[i];
  }
}

void DraftPositionCounts::Scale(double factor) {
  for (std::vector<double>* counts : {&asked, &proposed, &reached, &accepted}) {
    for (double& count : *counts) count *= factor;
  }
}

SpeculationGuard::Request SpeculationGuard::Open(Regime regime, int64_t block_size,
                                                 int64_t prompt_length) {
  std::lock_guard lock(mutex_);
  ++open_;
  return Request(*this, regime, block_size, prompt_length);
}

SpeculationGuard::Request::Request(SpeculationGuard& guard, Regime regime, int64_t block_size,
                                   int64_t prompt_length)
    : guard_(&guard),
      regime_(regime),
      block_size_(block_size),
      probe_after_(kFirstProbe),
      pending_rows_(prompt_length) {}

SpeculationGuard::Request::Request(Request&& other) noexcept
    : guard_(std::exchange(other.guard_, nullptr)),
      regime_(other.regime_),
      block_size_(other.block_size_),
      own_(std::move(other.own_)),
      last_(other.last_),
      batch_(other.batch_),
      idle_steps_(other.idle_steps_),
      probe_after_(other.probe_after_),
      pending_rows_(other.pending_rows_),
      idle_ms_(other.idle_ms_) {}

SpeculationGuard::Request::~Request() {
  if (guard_ == nullptr) return;
  std::lock_guard lock(guard_->mutex_);
  --guard_->open_;
}

std::optional<SpeculationGuard::Request::Prices> SpeculationGuard::Request::Price(
    int64_t limit, int64_t batch) const {
  const StepCosts& costs = guard_->costs_;
  const auto requests = static_cast<double>(batch);
  const std::optional<double> single = costs.TargetOnlyMs(batch);
  if (!single.has_value() || !costs.DraftMs(batch, 0, 0).has_value()) return std::nullopt;
  // The batch's forward is every member's step, and its members run the same guard on the same
  // costs: each block is priced as if all of them chose it. Target-only, no one drafts, so the
  // step's draft call (asking for none) returns at once, whatever it waited for beside drafting
  // members when it was measured.
  const double target_only = 1 / *single;
  const DraftOdds odds = OddsOf(guard_->regimes_[static_cast<size_t>(regime_)], own_, limit - 1);
  Prices prices{.best = {.block_size = 1, .expected_tokens = 1, .expected_speedup = 1},
                .drafted = {}};
  double drafted_rate = 0;
  double tokens = 1;
  double block = 1;
  for (int64_t size = 2; size <= limit; ++size) {
    tokens += odds.accepted[size - 2];
    block += odds.proposed[size - 2];
    // The draft forward: each member's call takes in what its step before committed, runs its
    // whole block and is asked for size − 1 drafts.
    const double draft_ms =
        *costs.DraftMs(batch, requests * (static_cast<double>(block_size_) + tokens),
                       requests * static_cast<double>(size - 1));
    const double rate = tokens / (draft_ms + *costs.VerifyMs(batch, requests * block));
    if (rate > drafted_rate) {
      drafted_rate = rate;
      prices.drafted = {
          .block_size = size, .expected_tokens = tokens, .expected_speedup = rate / target_only};
    }
  }
  if (drafted_rate > kSpeculationMargin * target_only) prices.best = prices.drafted;
  return prices;
}

int64_t SpeculationGuard::Request::Choose(int64_t room) {
  const int64_t limit = std::min(room, block_size_);
  std::lock_guard lock(guard_->mutex_);
  batch_ = guard_->open_;
  if (limit <= 1) {
    last_ = {.block_size = 1, .expected_tokens = 1, .expected_speedup = 1};
    return 1;
  }
  own_.Scale(kOwnFading);
  const StepCosts& costs = guard_->costs_;
  const std::optional<Prices> prices = Price(limit, batch_);
  auto explore = [](GuardChoice choice) {
    choice.exploring = true;
    return choice;
  };
  BatchLook& look = guard_->look_;
  GuardChoice choice;
  if (look.left > 0 && looks_taken_ < look.number) {
    --look.left;
    looks_taken_ = look.number;
    choice = explore({.block_size = std::min(limit, look.block_size)});
  } else if (!prices.has_value()) {
    choice = StartBatchLook({.block_size = FirstLook(limit)});
  } else if (Stale(costs.DraftAge(batch_)) && Affords(prices->drafted, batch_)) {
    choice = StartBatchLook(prices->drafted);
  } else if (Stale(costs.TargetOnlyAge(batch_))) {
    choice = StartBatchLook({.block_size = 1, .expected_speedup = prices->best.expected_speedup});
  } else if (const int64_t other = OtherDraftCount(limit, prices->drafted);
             other > 1 && Affords(prices->drafted, batch_)) {
    // Priced as the best drafted block, which it is or is shorter than.
    choice = StartBatchLook({.block_size = other});
  } else {
    choice = prices->best;
    if (choice.block_size > 1) {
      idle_steps_ = 0;
      probe_after_ = kFirstProbe;
    } else if (++idle_steps_ >= probe_after_ && Affords(prices->drafted, 1)) {
      // Its own odds may have changed while it was not looking: the cheapest look is the block
      // that would pay soonest.
      idle_steps_ = 0;
      probe_after_ *= 2;
      choice = explore(prices->drafted);
    }
  }
  last_ = choice;
  return choice.block_size;
}

GuardChoice SpeculationGuard::Request::StartBatchLook(GuardChoice look) {
  BatchLook& batch_look = guard_->look_;
  batch_look = {.number = batch_look.number + 1, .block_size = look.block_size, .left = batch_ - 1};
  looks_taken_ = batch_look.number;
  look.exploring = true;
  return look;
}

int64_t SpeculationGuard::Request::FirstLook(int64_t limit) const {
  for (int64_t smaller = batch_; smaller > 1;) {
    smaller = (smaller + 1) / 2;  // the bucket below
    if (const std::optional<Prices> prices = Price(limit, smaller)) {
      return prices->drafted.block_size;
    }
  }
  return limit;
}

int64_t SpeculationGuard::Request::OtherDraftCount(int64_t limit,
                                                   const GuardChoice& drafted) const {
  const std::optional<int64_t> measured = guard_->costs_.OnlyDraftCount(batch_);
  if (!measured.has_value()) return 1;
  // The best-priced block if it asks for another count, else one asking for half as many.
  const int64_t block =
      std::min(limit, drafted.block_size - 1 != *measured ? drafted.block_size : 1 + *measured / 2);
  return block - 1 != *measured ? block : 1;
}

bool SpeculationGuard::Request::Affords(const GuardChoice& look, int64_t takers) const {
  // Only called with prices, so with both lines measured.
  const StepCosts& costs = guard_->costs_;
  const auto batch = static_cast<double>(batch_);
  const auto n = static_cast<double>(takers);
  // One device runs the batch, so the look's step holds all of it up: its time beyond that of the
  // target-only forwards that would emit its tokens (one per request, `expected_tokens` per
  // taker), each taker drafting with as many rows to take in as this request.
  const double tokens = batch - n + n * look.expected_tokens;
  const double loss_ms =
      *costs.DraftMs(batch_, n * static_cast<double>(block_size_ + pending_rows_),
                     n * static_cast<double>(look.block_size - 1)) +
      *costs.VerifyMs(batch_, batch - n + n * static_cast<double>(look.block_size)) -
      tokens / batch * *costs.TargetOnlyMs(batch_);
  // Its steps' time is the device's, shared by the batch: a request's own look is paid from its
  // share, a batch look from all of it.
  return idle_ms_ * kProbeShare * n / batch >= loss_ms;
}

void SpeculationGuard::Request::Record(const Drafts& drafts, const EmittedTokens& verified,
                                       std::optional<double> draft_ms, double verify_ms) {
  std::lock_guard lock(guard_->mutex_);
  const int64_t asked = last_.block_size - 1;
  const auto proposed = static_cast<int64_t>(drafts.tokens.size());
  const int64_t accepted = verified.accepted();
  if (asked > 0) {
    own_.Add(asked, proposed, accepted);
    DraftPositionCounts& regime = guard_->regimes_[static_cast<size_t>(regime_)];
    regime.Add(asked, proposed, accepted);
    if (regime.asked.front() > kRegimeMemory) regime.Scale(0.5);
  }
  if (asked > 0) {
    if (draft_ms.has_value()) {
      // A forward a remote drafter did not describe is taken as every member's call like this.
      const DraftForward& forward = drafts.forward;
      const int64_t rows = forward.rows > 0 ? forward.rows : batch_ * (block_size_ + pending_rows_);
      const int64_t forward_drafts = forward.drafts > 0 ? forward.drafts : batch_ * asked;
      guard_->costs_.RecordDraft(batch_, asked, rows, forward_drafts,
                                 *draft_ms - forward.queued_ms);
    }
    pending_rows_ = 0;
    idle_ms_ = 0;
  } else {
    idle_ms_ += draft_ms.value_or(0) + verify_ms;
  }
  guard_->costs_.RecordVerify(batch_, proposed + 1, verified.forward,
                              verify_ms - verified.forward.queued_ms);
  pending_rows_ += accepted + 1;
}

}  // namespace specd::engine
