#pragma once
// Byte-level BPE: a piece starts as one token per byte, then the adjacent pair with the lowest
// merge rank is merged (leftmost first among equals) until no adjacent pair has a merge.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/text/token_id.h"
#include "common/text/vocabulary.h"

namespace specd::text {

class BpeModel {
 public:
  // State for encoding one text: buffers reused across pieces, and the ids of pieces already
  // seen (most pieces of a text are repeated words).
  class Workspace {
   private:
    friend class BpeModel;
    struct Symbol {
      TokenId id;  // -1 once merged into its left neighbor
      int32_t prev;
      int32_t next;
    };
    struct Candidate {
      int32_t rank;
      int32_t left;  // symbol index of the pair's left half
      TokenId left_id;
      TokenId right_id;
      TokenId result;
    };
    struct CachedIds {
      uint32_t offset;  // into cached_ids
      uint32_t count;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
    absl::flat_hash_map<std::string, CachedIds> cache;
    std::vector<TokenId> cached_ids;
  };

  // `merges` in rank order, each a pair of tokens (ByteLevel text) that merge into their
  // concatenation. Every byte and every merge's halves and result must be in `vocabulary`.
  static absl::StatusOr<BpeModel> Create(
      const Vocabulary& vocabulary, const std::vector<std::pair<std::string, std::string>>& merges);

  // Appends the ids of `piece` (raw bytes, non-empty) to `ids`.
  void Encode(std::string_view piece, Workspace& workspace, std::vector<TokenId>& ids) const;

 private:
  struct MergeRule {
    int32_t rank;
    TokenId result;
  };

  static uint64_t PairKey(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // Pieces longer than this are rare enough not to be worth caching.
  static constexpr size_t kMaxCachedPieceBytes = 64;

  // Merges `piece` from scratch.
  void Merge(std::string_view piece, Workspace& workspace, std::vector<TokenId>& ids) const;
  static bool RanksAfter(const Workspace::Candidate& a, const Workspace::Candidate& b);
  // Queues the pair starting at symbol `left` if it has a merge.
  void PushCandidate(Workspace& workspace, int32_t left) const;

  TokenId byte_ids_[256] = {};
  absl::flat_hash_map<uint64_t, MergeRule> merges_;
};

}  // namespace specd::text
