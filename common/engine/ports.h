#pragma once
// The two sides the decode loop drives, one request each: the target (prefill, verify a block)
// and the drafter (propose a block). In-process ports call the engine's sessions directly and
// hand the committed hidden states over as tensors; remote ports are the gRPC clients of the
// target-verifier and drafter services. Destroying a port releases its session.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace specd::engine {

struct TokenLogprob {
  int64_t token = 0;
  float logprob = 0;                           // under the target's raw distribution
  std::vector<std::pair<int64_t, float>> top;  // the row's most likely tokens, best first
};

// The distribution a draft was drawn from under rejection sampling: the drafter's probabilities
// of its most likely tokens, which hold all of the distribution's mass.
struct DraftDistribution {
  std::vector<int64_t> ids;
  std::vector<float> probabilities;
};

// One step's drafts: the drafter's most likely tokens (accepted where they equal the target's own
// draw), or tokens drawn from its distributions (accepted with probability min(1, p / q)).
// The draft forward that ran a call, other requests' batched with it: its rows (each call's block
// and the context rows it took in) and the drafts asked of it (0: unknown), and how long the call
// waited for it to start (as TargetForward::queued_ms).
struct DraftForward {
  int64_t rows = 0;
  int64_t drafts = 0;
  double queued_ms = 0;
};

struct Drafts {
  std::vector<int64_t> tokens;
  std::vector<DraftDistribution> distributions;  // empty, or one per token when drawn
  DraftForward forward = {};
};

// The target forward that ran a step, other requests' batched with it: its rows and sequences
// (0: unknown), of its rows those the LM head ran over (0: unknown, all; a prefill chunk's skip
// it but its last), the rows of earlier verify blocks its DeltaNet layers replayed first (work
// that block's step deferred, which its rows do not count), and of the step's time how long it
// waited for that forward to start (others' forwards running, batch members still to come): what
// a step costs beyond its forward when requests are out of step with each other.
struct TargetForward {
  int64_t rows = 0;
  int64_t sequences = 0;
  int64_t logit_rows = 0;
  int64_t replayed_rows = 0;
  double queued_ms = 0;
};

// What one target step gave the output.
struct EmittedTokens {
  // Prefill: the first token; Verify: the accepted drafts, then the target's own token.
  std::vector<int64_t> ids;
  std::vector<TokenLogprob> logprobs;  // one per id, when asked for
  TargetForward forward = {};

  int64_t accepted() const { return static_cast<int64_t>(ids.size()) - 1; }
};

class TargetPort {
 public:
  virtual ~TargetPort() = default;
  // The prompt's forward and the first token; once, first.
  virtual absl::StatusOr<EmittedTokens> Prefill() = 0;
  // One forward over [the last emitted token, drafts…]; the drafts it accepted and its own token.
  virtual absl::StatusOr<EmittedTokens> Verify(const Drafts& drafts) = 0;
};

class DraftPort {
 public:
  virtual ~DraftPort() = default;
  // Up to min(max_tokens, block size − 1) proposals for the tokens after `anchor`, the last token
  // emitted, having taken in whatever its target port committed since the last call. With
  // max_tokens 0 the step drafts nothing: the port may take the context in now or with its next
  // proposal, and its drafter's step batcher must not wait for it meanwhile.
  virtual absl::StatusOr<Drafts> Propose(int64_t anchor, int64_t max_tokens) = 0;
};

// One request's ports; the draft port, which may refer to the target port, goes first.
struct RequestPorts {
  std::unique_ptr<TargetPort> target;
  std::unique_ptr<DraftPort> draft;  // null: target-only
};

}  // namespace specd::engine
