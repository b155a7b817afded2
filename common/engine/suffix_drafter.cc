#include "common/engine/suffix_drafter.h"

#include <algorithm>
#include <utility>

namespace specd::engine {
namespace {

class SuffixDraftSession final : public DraftSession {
 public:
  explicit SuffixDraftSession(int64_t depth) : depth_(depth), trie_(depth) {}

  int64_t length() const override { return static_cast<int64_t>(sequence_.size()); }

  absl::Status Append(const CommittedContext& context) override {
    if (context.begin > length()) {
      return absl::OutOfRangeError("context leaves a gap after the suffix index's positions");
    }
    if (context.begin < length()) {  // rewritten positions: index the kept ones anew
      sequence_.resize(context.begin);
      trie_ = SuffixTrie(depth_);
      for (const int64_t token : sequence_) trie_.Append(token);
    }
    for (const int64_t token : context.ids) {
      sequence_.push_back(token);
      trie_.Append(token);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<DraftProposal> Propose(int64_t anchor, int64_t count, const DraftOptions& options,
                                        bool report_confidence) override {
    DraftProposal proposal =
        trie_.Continue(anchor, count, SuffixDrafter::kMaxMatch, options.min_confidence);
    if (!report_confidence) proposal.confidence.clear();
    return proposal;
  }

 private:
  int64_t depth_;
  std::vector<int64_t> sequence_;
  SuffixTrie trie_;
};

// A match of kMaxMatch tokens still has room for a whole block's continuation.
int64_t TrieDepth(int64_t block_size) { return SuffixDrafter::kMaxMatch + block_size - 1; }

}  // namespace

SuffixTrie::SuffixTrie(int64_t depth) : depth_(depth), nodes_(1), suffixes_{0} {}

uint64_t SuffixTrie::Key(int32_t node, int64_t token) {
  return (static_cast<uint64_t>(node) << 32) | static_cast<uint32_t>(token);
}

int32_t SuffixTrie::Child(int32_t node, int64_t token) const {
  const auto edge = edges_.find(Key(node, token));
  return edge == edges_.end() ? -1 : edge->second;
}

void SuffixTrie::Append(int64_t token) {
  // suffixes_[k] stands for k tokens: those below the depth grow by `token` into next_[k + 1].
  next_.assign(1, 0);
  const size_t growing = std::min<size_t>(suffixes_.size(), depth_);
  for (size_t k = 0; k < growing; ++k) {
    const int32_t parent = suffixes_[k];
    auto [edge, added] = edges_.try_emplace(Key(parent, token), nodes_.size());
    if (added) {
      nodes_.push_back({.count = 0, .token = static_cast<int32_t>(token), .best_child = -1});
    }
    const int32_t child = edge->second;
    ++nodes_[child].count;
    int32_t& best = nodes_[parent].best_child;
    if (best < 0 || nodes_[child].count >= nodes_[best].count) best = child;
    next_.push_back(child);
  }
  suffixes_.swap(next_);  // the old suffixes become next time's buffer
}

DraftProposal SuffixTrie::Continue(int64_t anchor, int64_t count, int64_t max_match,
                                   double min_confidence) const {
  DraftProposal best;
  double best_expected = 0;
  // The anchor is not indexed, so a node for a suffix ending in it is an earlier occurrence.
  // Longest matches first: a shorter one must be expected to be accepted longer to win.
  for (int64_t k = std::min<int64_t>(static_cast<int64_t>(suffixes_.size()), max_match); k >= 1;
       --k) {
    int32_t node = Child(suffixes_[k - 1], anchor);
    if (node < 0) continue;
    DraftProposal proposal;
    double expected = 0, all_accepted = 1;
    // No more tokens than the match is long: a short match predicts little.
    while (static_cast<int64_t>(proposal.tokens.size()) < std::min(count, k)) {
      const int32_t next = nodes_[node].best_child;
      if (next < 0) break;
      const double confidence = static_cast<double>(nodes_[next].count) / nodes_[node].count;
      if (confidence < min_confidence) break;
      proposal.tokens.push_back(nodes_[next].token);
      proposal.confidence.push_back(static_cast<float>(confidence));
      all_accepted *= confidence;
      expected += all_accepted;
      node = next;
    }
    if (expected > best_expected) {
      best = std::move(proposal);
      best_expected = expected;
    }
  }
  return best;
}

SuffixDrafter::SuffixDrafter(int64_t block_size) : block_size_(block_size) {}

absl::StatusOr<DraftOptions> SuffixDrafter::Resolve(const DraftOptions& options) const {
  if (options.window != 0) {
    return absl::InvalidArgumentError("a draft window applies to DFlash drafters, not suffix");
  }
  return ResolveDraftOptions(options, block_size_, /*trained_window=*/0);
}

absl::StatusOr<std::unique_ptr<DraftSession>> SuffixDrafter::OpenSession(int64_t) const {
  return std::make_unique<SuffixDraftSession>(TrieDepth(block_size_));
}

model::CacheFootprint SuffixDrafter::SessionFootprint() const {
  // A node (12 bytes), its edge in the hash map (12 bytes and slack) and a token of the sequence.
  return {.fixed_bytes = 0, .bytes_per_token = TrieDepth(block_size_) * 32 + 8};
}

}  // namespace specd::engine
