#include "common/engine/stop_criteria.h"

#include <algorithm>
#include <utility>

namespace specd::engine {
namespace {

bool Contains(const std::vector<int64_t>& ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "";
    case StopReason::kEos:
      return "eos";
    case StopReason::kStopToken:
      return "stop_token";
    case StopReason::kStopString:
      return "stop_string";
    case StopReason::kMaxTokens:
      return "max_tokens";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "";
}

std::vector<int64_t> EndingTokenIds(const StopConfig& config) {
  std::vector<int64_t> ids = config.stop_ids;
  if (!config.ignore_eos) ids.insert(ids.end(), config.eos_ids.begin(), config.eos_ids.end());
  return ids;
}

StopCriteria::StopCriteria(StopConfig config) : config_(std::move(config)) {}

StopCriteria::Step StopCriteria::Push(int64_t token, std::string_view text) {
  ++generated_;
  Step step;
  if (!config_.ignore_eos && Contains(config_.eos_ids, token)) {
    step.reason = StopReason::kEos;
    return step;
  }
  if (Contains(config_.stop_ids, token)) {
    step.reason = StopReason::kStopToken;
    return step;
  }
  held_.append(text);
  // The earliest stop string in the text wins (the first listed, at the same place); everything
  // from it on is dropped.
  size_t earliest = std::string::npos;
  for (const std::string& stop : config_.stop_strings) {
    const size_t found = stop.empty() ? std::string::npos : held_.find(stop);
    if (found < earliest) {
      earliest = found;
      matched_stop_string_ = stop;
    }
  }
  if (earliest != std::string::npos) {
    step.released_text = held_.substr(0, earliest);
    held_.clear();
    step.reason = StopReason::kStopString;
    return step;
  }
  const size_t keep = PartialMatchLength();
  step.released_text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  if (generated_ >= config_.max_new_tokens) step.reason = StopReason::kMaxTokens;
  return step;
}

std::string StopCriteria::Finish() {
  return matched_stop_string_.has_value() ? "" : std::exchange(held_, "");
}

size_t StopCriteria::PartialMatchLength() const {
  size_t longest = 0;
  for (const std::string& stop : config_.stop_strings) {
    if (stop.empty()) continue;
    // A complete match was handled by the caller, so only proper prefixes of `stop` count.
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > longest; --length) {
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

}  // namespace specd::engine
