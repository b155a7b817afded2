#include "common/text/bpe_model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/text/byte_level.h"

namespace specd::text {
namespace {}  // namespace

absl::StatusOr<BpeModel> BpeModel::Create(
    const Vocabulary& vocabulary, const std::vector<std::pair<std::string, std::string>>& merges) {
  BpeModel model;
  for (int byte = 0; byte < 256; ++byte) {
    const std::optional<TokenId> id = vocabulary.Find(ByteLevelChar(static_cast<uint8_t>(byte)));
    if (!id) {
      return absl::InvalidArgumentError(
          absl::StrCat("BPE vocab has no token for byte ", byte, " (\"",
                       std::string(ByteLevelChar(static_cast<uint8_t>(byte))), "\")"));
    }
    model.byte_ids_[byte] = *id;
  }
  model.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const std::optional<TokenId> left_id = vocabulary.Find(left);
    const std::optional<TokenId> right_id = vocabulary.Find(right);
    const std::optional<TokenId> result = vocabulary.Find(left + right);
    if (!left_id || !right_id || !result) {
      return absl::InvalidArgumentError(absl::StrCat("BPE merge ", rank, " (\"", left, "\" \"",
                                                     right, "\") names a token not in the vocab"));
    }
    // A repeated pair keeps its first (lowest) rank.
    model.merges_.try_emplace(PairKey(*left_id, *right_id),
                              MergeRule{static_cast<int32_t>(rank), *result});
  }
  return model;
}

// std::*_heap build a max-heap; this order puts the lowest rank, then the leftmost, on top.
bool BpeModel::RanksAfter(const Workspace::Candidate& a, const Workspace::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
}

void BpeModel::PushCandidate(Workspace& workspace, int32_t left) const {
  const int32_t right = workspace.symbols[left].next;
  if (right < 0) return;
  const TokenId left_id = workspace.symbols[left].id;
  const TokenId right_id = workspace.symbols[right].id;
  const auto it = merges_.find(PairKey(left_id, right_id));
  if (it == merges_.end()) return;
  workspace.heap.push_back({it->second.rank, left, left_id, right_id, it->second.result});
  std::push_heap(workspace.heap.begin(), workspace.heap.end(), RanksAfter);
}

void BpeModel::Encode(std::string_view piece, Workspace& workspace,
                      std::vector<TokenId>& ids) const {
  if (piece.size() == 1) {
    ids.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (piece.size() > kMaxCachedPieceBytes) {
    Merge(piece, workspace, ids);
    return;
  }
  std::vector<TokenId>& cached_ids = workspace.cached_ids;
  const auto [it, inserted] =
      workspace.cache.try_emplace(absl::string_view(piece.data(), piece.size()));
  if (inserted) {
    const size_t first = ids.size();
    Merge(piece, workspace, ids);
    it->second = {static_cast<uint32_t>(cached_ids.size()),
                  static_cast<uint32_t>(ids.size() - first)};
    cached_ids.insert(cached_ids.end(), ids.begin() + first, ids.end());
    return;
  }
  const auto cached = cached_ids.begin() + it->second.offset;
  ids.insert(ids.end(), cached, cached + it->second.count);
}

void BpeModel::Merge(std::string_view piece, Workspace& workspace,
                     std::vector<TokenId>& ids) const {
  const auto size = static_cast<int32_t>(piece.size());
  std::vector<Workspace::Symbol>& symbols = workspace.symbols;
  symbols.resize(size);
  for (int32_t i = 0; i < size; ++i) {
    symbols[i] = {byte_ids_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < size ? i + 1 : -1};
  }
  workspace.heap.clear();
  for (int32_t i = 0; i + 1 < size; ++i) PushCandidate(workspace, i);

  while (!workspace.heap.empty()) {
    std::pop_heap(workspace.heap.begin(), workspace.heap.end(), RanksAfter);
    const Workspace::Candidate candidate = workspace.heap.back();
    workspace.heap.pop_back();
    Workspace::Symbol& left = symbols[candidate.left];
    // Skip pairs that earlier merges changed: the left symbol was absorbed or either half grew.
    if (left.id != candidate.left_id || left.next < 0 ||
        symbols[left.next].id != candidate.right_id) {
      continue;
    }
    const int32_t right = left.next;
    left.id = candidate.result;
    left.next = symbols[right].next;
    if (left.next >= 0) symbols[left.next].prev = candidate.left;
    symbols[right].id = -1;
    if (left.prev >= 0) PushCandidate(workspace, left.prev);
    PushCandidate(workspace, candidate.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace specd::text
