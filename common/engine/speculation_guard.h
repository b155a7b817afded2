#pragma once
// The speculation guard: before each decode step it picks the block size (1: no speculation)
// with the best expected tokens per second, so that speculating is never slower than not; and
// only when it is expected to be 10 % faster, since a tie would only make the stream burstier.
// One guard prices one pair (a served target and its drafter on one device); each request opens
// its own view of it.
//
// A step that asks for k − 1 drafts is expected to emit E(k) = 1 + Σ_{i<k−1} P(drafts 1 … i + 1
// are accepted) tokens, and to cost the draft call asked for k − 1 drafts plus the verify
// forward, which carries the block the drafter is expected to fill (a suffix drafter often
// proposes fewer than asked) beside the other requests' blocks. That forward is every batched
// request's step and they all run this guard on the same measurements, so a block is priced as if
// every open request chose it: alone, the request's own speed; among many, a wide block pays only
// if a forward of all of them does. Acceptance is counted per regime over the pair's requests, and
// per request, whose own recent steps weigh more as they come; costs are StepCosts at the number of
// requests open on the guard.
//
// It explores what it cannot price yet, and what it has not measured for a while: a batch size's
// first steps speculate (the block best priced at the batch size below, if any), verify a single
// token and then draft another number of tokens (how a draft call's time grows with its drafts;
// paid for as below), the first two again every kRefreshSteps steps at that batch size. Such a look
// is taken by the whole batch, each open request's next step, as the price it measures assumes: one
// request's single token beside the others' blocks measures a forward of their rows, not a
// target-only one. A request that stopped speculating tries its best-priced block after 32, 64,
// 128, … of its steps, so a drafter that becomes good again (the text turned repetitive) is taken
// back. Such a look costs the drafter's catch-up — every row committed since the request last
// drafted, the whole prompt the first time, which a model drafter projects — and its block, less
// the tokens it is expected to gain, in device time: one device runs the batch, so all of it waits.
// A request takes its own look only once its share of the time it spent without speculating (its
// steps' time over the batch size) is 50 times that loss, and the batch measures a stale draft cost
// again only once all of that time is; so looking at a drafter that never pays costs at most 2 %,
// and one that is nearly worth it is looked at soon.
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "common/engine/ports.h"
#include "common/engine/regime.h"
#include "common/engine/step_costs.h"

namespace specd::engine {

// One step's choice and what the guard expected of it.
struct GuardChoice {
  int64_t block_size = 1;
  bool exploring = false;      // chosen to measure, not by price
  double expected_tokens = 1;  // per step at that block size
  // Expected tokens/s over target-only's at this batch size; 0 while the guard cannot price.
  double expected_speedup = 0;
};

// Per draft position i: the steps that asked for a draft there, those where one was proposed,
// those that reached it (every draft before it accepted) and those where it was accepted too.
struct DraftPositionCounts {
  std::vector<double> asked, proposed, reached, accepted;

  void Add(int64_t asked_drafts, int64_t proposed_drafts, int64_t accepted_drafts);
  void Scale(double factor);
};

class SpeculationGuard {
 public:
  class Request {
   public:
    Request(Request&& other) noexcept;
    Request& operator=(Request&&) = delete;
    ~Request();

    // The next step's block size, at most min(`room`, the request's block size); 1 when the
    // step has room for one token only.
    int64_t Choose(int64_t room);
    // What the step Choose planned did: `drafts` proposed (none without a draft call) and
    // `verified` emitted, the draft call's time and the verify's. Times are priced without
    // their waits for a forward to start (DraftForward's and EmittedTokens' queued_ms): a wait
    // comes of requests out of step with each other, which the batch choosing one block would not
    // be.
    void Record(const Drafts& drafts, const EmittedTokens& verified, std::optional<double> draft_ms,
                double verify_ms);

    // The last choice.
    const GuardChoice& last() const { return last_; }

   private:
    friend class SpeculationGuard;
    Request(SpeculationGuard& guard, Regime regime, int64_t block_size, int64_t prompt_length);
    struct Prices {
      GuardChoice best;     // by price: speculating or not
      GuardChoice drafted;  // the best that speculates
    };
    // The prices of blocks up to `limit` at `batch` open requests; nullopt while the costs are
    // unknown. Under the guard's lock.
    std::optional<Prices> Price(int64_t limit, int64_t batch) const;
    // A batch size's first block: the one priced best at the nearest smaller batch size priced,
    // the whole block (at most `limit`) where none is, as on the first request. A whole block for
    // every member of a large batch is a forward of many rows, which a CPU runs compute-bound:
    // seconds at 16 requests, for all of them. Under the lock.
    int64_t FirstLook(int64_t limit) const;
    // While every draft call at its batch size asked for one count (what a call's time does
    // with the count is unknown), a block of at most `limit` asking for another: `drafted`, the
    // best priced, or half the drafts; 1 when there is none to ask. Under the lock.
    int64_t OtherDraftCount(int64_t limit, const GuardChoice& drafted) const;
    // Whether the time it spent without speculating pays for a look at `look` taken by `takers`
    // of the batch's requests (1: itself; the batch: a batch look). Under the lock.
    bool Affords(const GuardChoice& look, int64_t takers) const;
    // `look` as the whole batch's next step: this request's, then each other open request's.
    // Under the lock.
    GuardChoice StartBatchLook(GuardChoice look);

    SpeculationGuard* guard_;
    Regime regime_;
    int64_t block_size_;
    DraftPositionCounts own_;
    GuardChoice last_;
    int64_t batch_ = 1;        // requests open when the step was chosen
    int64_t idle_steps_ = 0;   // steps since it last speculated
    int64_t probe_after_ = 0;  // idle steps before it tries speculating again
    int64_t pending_rows_;     // committed rows its drafter has yet to take in
    int64_t looks_taken_ = 0;  // the last batch look it took (BatchLook::number)
    double idle_ms_ = 0;       // the time of its steps since it last speculated
  };

  // A request of `regime` after a prompt of `prompt_length` tokens, drafting blocks of up to
  // `block_size` tokens (anchor included); it counts as open, for the batch size, until it is
  // destroyed.
  Request Open(Regime regime, int64_t block_size, int64_t prompt_length);

 private:
  // A look the open requests take together: each of them once, at its next step.
  struct BatchLook {
    int64_t number = 0;  // 1, 2, … as they start
    int64_t block_size = 1;
    int64_t left = 0;  // requests yet to take it
  };

  std::mutex mutex_;
  StepCosts costs_;
  BatchLook look_;
  std::array<DraftPositionCounts, 3> regimes_;  // by Regime
  int64_t open_ = 0;
};

}  // namespace specd::engine
