#pragma once
// When a generation stops, and which of its text may be shown so far. Shared by target-only
// decoding and the speculative engine, so that both stop at the same token with the same text.
//
// A stop string can span several tokens, so text that could be the start of one is held back
// until the next tokens show whether it is; the text before a stop string is released, and the
// stop string itself (or an ending token's text) only with include_stop_str_in_output.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specd::engine {

struct StopConfig {
  int64_t max_new_tokens = 0;
  std::vector<int64_t> eos_ids = {};   // the model's end-of-sequence ids; ignored with ignore_eos
  std::vector<int64_t> stop_ids = {};  // further ids that end the output, ignore_eos or not
  std::vector<std::string> stop_strings = {};
  bool ignore_eos = false;
  // The first min_new_tokens tokens end the output neither by an id nor by completing a stop
  // string (the sampler keeps the ending ids out of them; SamplingParams::min_new_tokens).
  int64_t min_new_tokens = 0;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;  // leave special tokens' text (<|im_end|>, …) out
};

// kCancelled: the caller ended the request (a client gone, an abort, a deadline).
enum class StopReason { kNone, kEos, kStopToken, kStopString, kMaxTokens, kCancelled };

// "eos", "stop_token", "stop_string", "max_tokens", "cancelled" ("" for kNone).
const char* StopReasonName(StopReason reason);

// The ids that end the output by themselves: the stop ids, and the EOS ids unless ignored.
std::vector<int64_t> EndingTokenIds(const StopConfig& config);

class StopCriteria {
 public:
  explicit StopCriteria(StopConfig config);

  struct Step {
    std::string released_text;  // text that can be shown now
    StopReason reason = StopReason::kNone;
  };

  // Accounts for one generated token and the text it completes (empty without a tokenizer).
  // The text of an EOS or stop token is not released. Call Finish once reason != kNone.
  Step Push(int64_t token, std::string_view text);

  // The held-back text once the output ends without a stop string (a partial match that never
  // completed is ordinary text).
  std::string Finish();

  int64_t generated() const { return generated_; }
  // The stop string that ended the output, once one has.
  const std::optional<std::string>& matched_stop_string() const { return matched_stop_string_; }

 private:
  // How many trailing bytes of held_ could still grow into a stop string.
  size_t PartialMatchLength() const;

  StopConfig config_;
  int64_t generated_ = 0;
  std::string held_;
  std::optional<std::string> matched_stop_string_;
};

}  // namespace specd::engine
