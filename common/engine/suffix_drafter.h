#pragma once
// A model-free drafter (suffix decoding; arctic-inference's suffix trees are the reference idea):
// it proposes how the sequence went on after earlier occurrences of its own end, in the prompt or
// in the generated text. Each session indexes every substring of its sequence, up to a depth, in
// a trie that counts occurrences; a proposal follows the most frequent continuation of an earlier
// occurrence of the sequence's end (SuffixTrie::Continue says which), each token's confidence the
// share of occurrences that went on that way. It runs no forward and reads no hidden states: it
// wins where text repeats (code, templates, repetitive prompts) and proposes nothing where it does
// not.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/engine/draft_session.h"

namespace specd::engine {

// Every substring of up to `depth` tokens of a growing sequence, with its occurrence count.
class SuffixTrie {
 public:
  explicit SuffixTrie(int64_t depth);

  // Indexes the substrings that end at `token`, appended to the sequence.
  void Append(int64_t token);

  // Up to `count` tokens after `anchor` (which follows the sequence but is not in it): of the
  // suffixes of sequence + anchor, at most `max_match` tokens, that occurred before, the one
  // whose most frequent continuation, at most as long as the match, is expected to be accepted
  // longest (the longer match on a tie). Stops before a token whose confidence is below
  // `min_confidence`, and where the index ends. Empty when nothing matches.
  DraftProposal Continue(int64_t anchor, int64_t count, int64_t max_match,
                         double min_confidence) const;

  // The index's size: nodes of the trie.
  int64_t nodes() const { return static_cast<int64_t>(nodes_.size()); }

 private:
  struct Node {
    int32_t count = 0;        // occurrences of the substring it stands for
    int32_t token = 0;        // the substring's last token
    int32_t best_child = -1;  // its most frequent continuation (the latest of equals); -1: none
  };
  static uint64_t Key(int32_t node, int64_t token);
  int32_t Child(int32_t node, int64_t token) const;  // -1: none

  int64_t depth_;
  std::vector<Node> nodes_;                       // [0] is the root, the empty substring
  absl::flat_hash_map<uint64_t, int32_t> edges_;  // Key(parent, token) → child
  std::vector<int32_t> suffixes_;                 // [k]: the node of the sequence's last k tokens
  std::vector<int32_t> next_;                     // Append's buffer for the next suffixes_
};

class SuffixDrafter final : public Drafter {
 public:
  // Matches of up to this many tokens: longer ones rarely pick a different continuation.
  static constexpr int64_t kMaxMatch = 16;

  explicit SuffixDrafter(int64_t block_size);

  int64_t block_size() const override { return block_size_; }
  std::vector<int64_t> TargetHiddenStates() const override { return {}; }
  bool ReadsTokenIds() const override { return true; }
  // Any block up to block_size() and adaptive length; no window (it has no attention).
  absl::StatusOr<DraftOptions> Resolve(const DraftOptions& options) const override;
  absl::StatusOr<std::unique_ptr<DraftSession>> OpenSession(int64_t max_length) const override;
  // The trie, at worst a node per indexed depth per token.
  model::CacheFootprint SessionFootprint() const override;

 private:
  int64_t block_size_;
};

}  // namespace specd::engine
