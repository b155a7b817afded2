#include "cli/specd/token_id_list.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace specd::cli {

absl::StatusOr<std::vector<int64_t>> ParseIdList(const std::string& list, const std::string& flag) {
  std::vector<int64_t> ids;
  for (absl::string_view field : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    int64_t id;
    if (!absl::SimpleAtoi(field, &id)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", field, "\" is not a token id"));
    }
    ids.push_back(id);
  }
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": no token ids"));
  return ids;
}

}  // namespace specd::cli
