#include "services/trainer/service/job_plan.h"

#include <yaml-cpp/yaml.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace specd::trainer {
namespace {

// Where a stage writes, as its YAML names it, and the default the trainer gives it: the job's
// output directory, or a file or an empty subdirectory in it for the stages that need one.
struct OutputKey {
  std::string key;
  std::filesystem::path default_path;  // relative to output_dir; empty: output_dir itself
  bool is_run_dir = true;              // the stage keeps metrics.jsonl and state/ there
};

struct StageOf {
  std::string stage;
  OutputKey output;
};

std::optional<StageOf> Stage(v1::JobType type) {
  switch (type) {
    case v1::JOB_TYPE_PACK:
      return StageOf{"pack", {"out", "", true}};
    case v1::JOB_TYPE_REGENERATE:
      return StageOf{"regenerate", {"output", "answers.jsonl", false}};
    case v1::JOB_TYPE_PRETRAIN:
      return StageOf{"pretrain", {"out", "", true}};
    case v1::JOB_TYPE_QAD:
      return StageOf{"qad", {"out", "", true}};
    // Both drafter stages are `specd train drafter`; the config's `init` (a random drafter or
    // stage 1's best) and `target` make the difference.
    case v1::JOB_TYPE_DRAFTER_STAGE1:
    case v1::JOB_TYPE_DRAFTER_STAGE2:
      return StageOf{"drafter", {"out", "", true}};
    // Checkpoint writers want an empty directory: the job's holds config.yaml and job.log.
    case v1::JOB_TYPE_GPTQ_DRAFTER:
      return StageOf{"gptq-drafter", {"out", "model", true}};
    case v1::JOB_TYPE_QUANTIZE:
      return StageOf{"quantize", {"out", "model", true}};
    default:
      return std::nullopt;
  }
}

// `path` without "." and ".." components and without a trailing separator.
std::filesystem::path Normal(const std::filesystem::path& path) {
  std::filesystem::path normal = path.lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path() && normal != normal.root_path()) {
    normal = normal.parent_path();
  }
  return normal;
}

absl::StatusOr<YAML::Node> ParseMapping(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", e.what()));
  }
  if (!root.IsMap() && !root.IsNull()) {
    return absl::InvalidArgumentError("config: the config is not a YAML mapping");
  }
  return root;
}

std::optional<std::string> StringValue(const YAML::Node& root, const std::string& key) {
  if (!root.IsMap() || !root[key].IsDefined()) return std::nullopt;
  try {
    return root[key].as<std::string>();
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

// `text` with `key: value` added. Appending a line keeps the submitter's comments and layout;
// where that does not parse to the same mapping plus the key (flow style, a document end
// marker), the mapping is written out again instead.
std::string WithKey(const std::string& text, const YAML::Node& root, const std::string& key,
                    const std::string& value) {
  YAML::Emitter quoted;
  quoted << YAML::DoubleQuoted << value;
  std::string appended = text;
  if (!appended.empty() && appended.back() != '\n') appended.push_back('\n');
  absl::StrAppend(&appended, key, ": ", quoted.c_str(), "\n");
  absl::StatusOr<YAML::Node> reparsed = ParseMapping(appended);
  if (reparsed.ok() && reparsed->IsMap() && reparsed->size() == root.size() + 1 &&
      StringValue(*reparsed, key) == value) {
    return appended;
  }
  YAML::Node copy = YAML::Clone(root);
  copy[key] = value;
  YAML::Emitter emitter;
  emitter << YAML::BeginMap;
  for (const auto& entry : copy) emitter << YAML::Key << entry.first << YAML::Value << entry.second;
  emitter << YAML::EndMap;
  return std::string(emitter.c_str()) + "\n";
}

}  // namespace

std::vector<std::string> JobPlan::Arguments(const std::filesystem::path& config_file,
                                            bool dry_run) const {
  std::vector<std::string> arguments;
  if (stage.empty()) {
    arguments = {"pipeline", "--preset", preset, "--out", output_dir.string()};
  } else {
    arguments = {
        "train", stage, "--config", config_file.string(), "--base-dir", output_dir.string()};
    for (const std::filesystem::path& root : allowed_roots) {
      arguments.insert(arguments.end(), {"--allowed-root", root.string()});
    }
  }
  if (dry_run) arguments.push_back("--dry-run");
  return arguments;
}

absl::StatusOr<JobPlan> PlanJob(v1::JobType type, const std::string& config_yaml,
                                const std::filesystem::path& output_dir,
                                std::vector<std::filesystem::path> allowed_roots) {
  absl::StatusOr<YAML::Node> root = ParseMapping(config_yaml);
  if (!root.ok()) return root.status();
  JobPlan plan;
  plan.output_dir = output_dir;
  plan.allowed_roots = std::move(allowed_roots);
  plan.config_yaml = config_yaml;

  if (type == v1::JOB_TYPE_PIPELINE) {
    std::vector<std::string> unknown;
    if (root->IsMap()) {
      for (const auto& entry : *root) {
        const std::string key = entry.first.as<std::string>();
        if (key != "preset") unknown.push_back(key);
      }
    }
    if (!unknown.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config: unknown keys: ", absl::StrJoin(unknown, ", "), " (a pipeline takes `preset`)"));
    }
    plan.preset = "smoke";
    if (root->IsMap() && (*root)["preset"].IsDefined()) {
      const std::optional<std::string> preset = StringValue(*root, "preset");
      if (!preset.has_value()) {
        return absl::InvalidArgumentError("config: preset must be a preset name (smoke, tiny)");
      }
      plan.preset = *preset;
    }
    plan.run_dir = output_dir;
    return plan;
  }

  const std::optional<StageOf> stage = Stage(type);
  if (!stage.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job type ", v1::JobType_Name(type), " has no command"));
  }
  plan.stage = stage->stage;
  const OutputKey& output = stage->output;
  std::filesystem::path out = Normal(output_dir / output.default_path);
  if (root->IsMap() && (*root)[output.key].IsDefined()) {
    // A value of the wrong type is left for the stage's own check to report.
    if (const std::optional<std::string> given = StringValue(*root, output.key); given) {
      out = Normal(output_dir / *given);  // an absolute value replaces output_dir
    }
  } else {
    plan.config_yaml = WithKey(config_yaml, *root, output.key, out.string());
  }
  if (output.is_run_dir) plan.run_dir = out;
  return plan;
}

}  // namespace specd::trainer
