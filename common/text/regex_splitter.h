#pragma once
// The Split pre-tokenizer with behavior "Isolated": every regex match becomes a piece, and so
// does any text between matches. The pattern is the tokenizer.json regex (Oniguruma syntax in
// HF tokenizers), compiled by PCRE2 in UTF + Unicode-property mode and JIT-compiled.
#include <memory>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

// PCRE2's compiled pattern type (pcre2_code for 8-bit code units), declared here so that
// includers do not see pcre2.h.
struct pcre2_real_code_8;

namespace specd::text {

class RegexSplitter {
 public:
  static absl::StatusOr<RegexSplitter> Compile(std::string_view pattern);

  // Calls `piece` with each non-empty piece of `text` (valid UTF-8) in order. Fails only when
  // PCRE2 gives up on a match (e.g. its JIT stack is exhausted by a pathological input).
  absl::Status Split(std::string_view text, absl::FunctionRef<void(std::string_view)> piece) const;

 private:
  struct CodeDeleter {
    void operator()(pcre2_real_code_8* code) const;
  };

  explicit RegexSplitter(pcre2_real_code_8* code) : code_(code) {}

  std::unique_ptr<pcre2_real_code_8, CodeDeleter> code_;
};

}  // namespace specd::text
