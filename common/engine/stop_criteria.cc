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
  const bool may_end = generated_ >= config_.min_new_tokens;
  if (may_end && !config_.ignore_eos && Contains(config_.eos_ids, token)) {
    step.reason = StopReason::kEos;
  } else if (may_end && Contains(config_.stop_ids, token)) {
    step.reason = StopReason::kStopToken;
  }
  if (step.reason != StopReason::kNone) {
    if (config_.include_stop_str_in_output) held_.append(text);  // Finish releases it
    return step;
  }
  held_.append(text);
  // The earliest stop string in the text wins (the first listed, at the same place); everything
  // from it on is dropped. Before min_new_tokens one is ordinary text.
  size_t earliest = std::string::npos;
  for (const std::string& stop : config_.stop_strings) {
    const size_t found = stop.empty() || !may_end ? std::string::npos : held_.find(stop);
    if (found < earliest) {
      earliest = found;
      matched_stop_string_ = stop;
    }
  }
  if (earliest != std::string::npos) {
    const size_t end =
        config_.include_stop_str_in_output ? earliest + matched_stop_string_->size() : earliest;
    step.released_text = held_.substr(0, end);
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
