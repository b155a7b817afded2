#include "services/trainer/service/config_check.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/io/allowed_roots.h"
#include "common/io/atomic_file.h"
#include "services/trainer/service/child_process.h"

namespace specd::trainer {
namespace {

std::string LastNonEmptyLine(const std::string& output) {
  std::string last;
  for (const absl::string_view line : absl::StrSplit(output, absl::ByAnyChar("\r\n"))) {
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (!stripped.empty()) last = std::string(stripped);
  }
  return last;
}

}  // namespace

absl::Status CheckJobConfig(const std::filesystem::path& specd_binary, const JobPlan& plan,
                            const std::filesystem::path& scratch_file, absl::Duration timeout) {
  std::error_code error;
  std::filesystem::create_directories(scratch_file.parent_path(), error);
  if (absl::Status status = io::WriteFileAtomically(scratch_file, plan.config_yaml); !status.ok()) {
    return absl::InternalError(absl::StrCat("checking the config: ", status.message()));
  }
  std::vector<std::string> argv = {specd_binary.string()};
  for (std::string& argument : plan.Arguments(scratch_file, /*dry_run=*/true)) {
    argv.push_back(std::move(argument));
  }
  absl::StatusOr<CommandResult> result = RunCommand(argv, timeout);
  std::filesystem::remove(scratch_file, error);
  if (!result.ok()) {
    return absl::InternalError(absl::StrCat("checking the config: ", result.status().message()));
  }
  if (result->exit_code == 0) return absl::OkStatus();
  // specd reports a bad config as "specd train: FILE: message" with exit status 1, a path outside
  // the allowed roots with io::kPermissionDeniedExitStatus; the scratch file's name means nothing
  // to the submitter.
  std::string message = LastNonEmptyLine(result->output);
  if (result->exit_code == 1 || result->exit_code == io::kPermissionDeniedExitStatus) {
    for (const std::string prefix : {"specd train: ", "specd pipeline: "}) {
      if (message.starts_with(prefix)) message.erase(0, prefix.size());
    }
    absl::StrReplaceAll({{scratch_file.string(), "config"}}, &message);
    return result->exit_code == 1 ? absl::InvalidArgumentError(message)
                                  : absl::PermissionDeniedError(message);
  }
  return absl::InternalError(absl::StrCat("checking the config with ", specd_binary.string(),
                                          " failed: exit status ", result->exit_code, ": ",
                                          message));
}

}  // namespace specd::trainer
