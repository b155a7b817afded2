#pragma once
// What the engine needs from a drafter: a `Drafter` (the weights, shared by every request) opens
// one `DraftSession` per request (its cache). The session is told about every position the target
// commits, as the target commits them, with the hidden states the drafter asked for, and proposes
// the tokens that follow an anchor. A LibTorch failure inside a drafter may escape as c10::Error;
// the callers turn it into a status.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/draft_sampling.h"
#include "common/engine/ports.h"
#include "common/model/cache_footprint.h"

namespace specd::engine {

// How a request drafts.
struct DraftOptions {
  int64_t block_size = 0;  // tokens per block with the anchor, at most the drafter's; 0: its own
  int64_t window = 0;      // model::DraftOptions::window; 0: the drafter's own
  // Adaptive draft length: the proposals stop before the first position whose most likely token
  // has a draft probability below this, so unlikely drafts cost no verify work. 0: fixed blocks.
  double min_confidence = 0;
  // Rejection sampling for a sampled request (temperature > 0): drafts drawn from the drafter's
  // distribution and accepted with probability min(1, p / q), which accepts more than matching
  // the drafter's most likely token against the target's draw, with the same output
  // distribution; but a seed's output then depends on the blocks drafted, where matching gives
  // target-only decoding's tokens exactly. Greedy requests match either way.
  bool rejection_sampling = false;
  // How the drafts are drawn: the request's DraftSamplingFor when rejection sampling a sampled
  // request (set where the request's ports open), the most likely tokens otherwise.
  DraftSampling sampling = {};
};

// OK when `options` are in range for a drafter trained on blocks of `trained_block_size`; the
// options with the block size and window resolved (0 → the trained one; a drafter trained
// without a window has `trained_window` 0, none). Every caller that takes draft options from a
// user checks them here.
absl::StatusOr<DraftOptions> ResolveDraftOptions(const DraftOptions& options,
                                                 int64_t trained_block_size,
                                                 int64_t trained_window);

// Positions the target has committed: [begin, begin + ids.size()), their ids and, when the drafter
// reads hidden states, their tapped rows side by side in TargetHiddenStates() order
// [ids.size(), taps × hidden] (undefined otherwise).
struct CommittedContext {
  int64_t begin = 0;
  std::vector<int64_t> ids;
  at::Tensor rows;
};

struct DraftProposal {
  std::vector<int64_t> tokens;
  // The drafter's probability of its most likely token at each position, when reported.
  std::vector<float> confidence;
  // What each token was drawn from, when drawn (DraftOptions::sampling); empty otherwise.
  std::vector<DraftDistribution> distributions;
};

class DraftSession {
 public:
  virtual ~DraftSession() = default;

  // Committed positions the session holds, [0, length()).
  virtual int64_t length() const = 0;

  // Takes in `context`; positions it held from context.begin on are forgotten first (the target
  // rewrote them). context.begin must not be past length().
  virtual absl::Status Append(const CommittedContext& context) = 0;

  // Up to `count` (< the block size) proposals for the positions after `anchor`, the last token
  // generated, which itself follows the committed positions. `options` are resolved.
  virtual absl::StatusOr<DraftProposal> Propose(int64_t anchor, int64_t count,
                                                const DraftOptions& options,
                                                bool report_confidence) = 0;
};

// One session's part of a batched draft: `session` (opened by the drafter that runs the call)
// takes in `context` in order (DraftSession::Append), then proposes (DraftSession::Propose).
struct DraftCall {
  DraftSession* session = nullptr;
  std::span<const CommittedContext> context;
  int64_t anchor = 0;
  int64_t count = 0;
  DraftOptions options;  // resolved
  bool report_confidence = false;
};

class Drafter {
 public:
  virtual ~Drafter() = default;

  // The largest block it drafts, and the one it drafts when a request names none.
  virtual int64_t block_size() const = 0;
  // The target hidden_states indices (ForwardOptions::hidden_states) its sessions read.
  virtual std::vector<int64_t> TargetHiddenStates() const = 0;
  // Whether its sessions read the committed ids (CommittedContext::ids); those of a drafter that
  // does not may be given rows alone.
  virtual bool ReadsTokenIds() const = 0;
  // ResolveDraftOptions, plus whatever this drafter cannot honour.
  virtual absl::StatusOr<DraftOptions> Resolve(const DraftOptions& options) const = 0;
  // A session for sequences of up to `max_length` positions.
  virtual absl::StatusOr<std::unique_ptr<DraftSession>> OpenSession(int64_t max_length) const = 0;
  // The memory such a session holds (a CachePool reserves it before OpenSession).
  virtual model::CacheFootprint SessionFootprint() const = 0;

  // Every call of `batch`; result i is call i's. This runs them one after another; a drafter
  // that can put many sessions into one forward does so.
  virtual std::vector<absl::StatusOr<DraftProposal>> ProposeBatch(
      std::span<const DraftCall> batch) const;
};

}  // namespace specd::engine
