// specctl jobs: submit, list, get, follow and cancel training jobs (specd.v1.TrainerService).
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/specctl/commands.h"
#include "services/trainer/service/job_names.h"
#include "specd/v1/trainer.grpc.pb.h"

namespace specd::specctl {
namespace {

using google::protobuf::util::TimeUtil;
using trainer::JobStateName;
using trainer::JobTypeName;

std::vector<std::string> TypeNames() {
  std::vector<std::string> names;
  for (int value = v1::JobType_MIN + 1; value <= v1::JobType_MAX; ++value) {
    names.push_back(JobTypeName(static_cast<v1::JobType>(value)));
  }
  return names;
}

std::vector<std::string> StateNames() {
  std::vector<std::string> names;
  for (int value = v1::JobState_MIN + 1; value <= v1::JobState_MAX; ++value) {
    names.push_back(JobStateName(static_cast<v1::JobState>(value)));
  }
  return names;
}

std::unique_ptr<v1::TrainerService::Stub> Trainer(const ClientOptions& options) {
  return v1::TrainerService::NewStub(Connect(options));
}

void PrintJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions json;
  json.add_whitespace = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, json).ok()) {
    ExitOnError(absl::InternalError("cannot print the response as JSON"));
  }
  std::cout << text;
  if (text.empty() || text.back() != '\n') std::cout << "\n";
}

std::string LocalTime(const google::protobuf::Timestamp& time) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S",
                          absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(time)),
                          absl::LocalTimeZone());
}

std::string StepText(const v1::JobProgress& progress) {
  if (progress.total_steps() == 0)
    return progress.step() == 0 ? "-" : absl::StrCat(progress.step());
  return absl::StrCat(progress.step(), "/", progress.total_steps());
}

void PrintJob(const v1::Job& job) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"job_id", job.job_id()},
      {"submission_id", job.submission_id()},
      {"type", JobTypeName(job.type())},
      {"state", JobStateName(job.state())},
      {"attempt", absl::StrCat(job.attempt())},
      {"output_dir", job.output_dir()},
  };
  if (!job.labels().empty()) {
    const std::map<std::string, std::string> sorted(job.labels().begin(), job.labels().end());
    fields.emplace_back("labels", absl::StrJoin(sorted, ", ", absl::PairFormatter("=")));
  }
  const v1::JobProgress& progress = job.progress();
  fields.emplace_back("stage", JobTypeName(progress.stage()));
  fields.emplace_back("step", StepText(progress));
  if (progress.has_loss()) fields.emplace_back("loss", absl::StrFormat("%.4f", progress.loss()));
  if (progress.has_validation_loss()) {
    fields.emplace_back("validation_loss", absl::StrFormat("%.4f", progress.validation_loss()));
  }
  if (progress.tokens_per_second() > 0) {
    fields.emplace_back("tokens_per_second", absl::StrFormat("%.1f", progress.tokens_per_second()));
  }
  if (progress.has_estimated_time_remaining()) {
    fields.emplace_back(
        "eta", absl::FormatDuration(absl::Seconds(progress.estimated_time_remaining().seconds())));
  }
  if (!job.last_checkpoint().empty()) fields.emplace_back("last_checkpoint", job.last_checkpoint());
  if (job.has_exit_code()) fields.emplace_back("exit_code", absl::StrCat(job.exit_code()));
  if (!job.failure_reason().empty()) fields.emplace_back("failure_reason", job.failure_reason());
  fields.emplace_back("created", LocalTime(job.create_time()));
  if (job.has_start_time()) fields.emplace_back("started", LocalTime(job.start_time()));
  if (job.has_end_time()) fields.emplace_back("ended", LocalTime(job.end_time()));
  for (const auto& [key, value] : fields) {
    std::cout << absl::StrFormat("%-18s %s\n", key + ":", value);
  }
}

void PrintTable(const std::vector<v1::Job>& jobs) {
  const char* format = "%-17s %-15s %-11s %-12s %-8s %s\n";
  std::cout << absl::StrFormat(format, "JOB ID", "TYPE", "STATE", "STEP", "LOSS", "CREATED");
  for (const v1::Job& job : jobs) {
    const v1::JobProgress& progress = job.progress();
    std::cout << absl::StrFormat(
        format, job.job_id(), JobTypeName(job.type()), JobStateName(job.state()),
        StepText(progress), progress.has_loss() ? absl::StrFormat("%.4f", progress.loss()) : "-",
        LocalTime(job.create_time()));
  }
}

std::string ReadConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ExitOnError(absl::NotFoundError(absl::StrCat("cannot read the config ", path)));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string RandomSubmissionId() {
  std::random_device random;
  return absl::StrFormat("specctl-%08x%08x", random(), random());
}

struct SubmitFlags {
  std::string type;
  std::string config;
  std::string output_dir;
  std::string submission_id;
  std::vector<std::string> labels;
};

void Submit(const ClientOptions& options, const SubmitFlags& flags) {
  v1::SubmitJobRequest request;
  request.set_type(*trainer::ParseJobTypeName(flags.type));  // CLI::IsMember checked it
  request.set_config_yaml(ReadConfig(flags.config));
  request.set_output_dir(flags.output_dir);
  request.set_submission_id(flags.submission_id.empty() ? RandomSubmissionId()
                                                        : flags.submission_id);
  for (const std::string& label : flags.labels) {
    const size_t equals = label.find('=');
    if (equals == std::string::npos || equals == 0) {
      ExitOnError(
          absl::InvalidArgumentError(absl::StrCat("--label ", label, ": expected KEY=VALUE")));
    }
    (*request.mutable_labels())[label.substr(0, equals)] = label.substr(equals + 1);
  }
  grpc::ClientContext context;
  ConfigureCall(context, options);
  v1::SubmitJobResponse response;
  ExitOnError(Trainer(options)->SubmitJob(&context, request, &response));
  std::cout << absl::StrFormat("%-18s %s\n", "job_id:", response.job().job_id())
            << absl::StrFormat("%-18s %s\n", "created:", response.created() ? "true" : "false")
            << absl::StrFormat("%-18s %s\n", "state:", JobStateName(response.job().state()))
            << absl::StrFormat("%-18s %s\n", "output_dir:", response.job().output_dir());
}

struct ListFlags {
  std::vector<std::string> states;
  std::vector<std::string> types;
  bool json = false;
};

void List(const ClientOptions& options, const ListFlags& flags) {
  v1::ListJobsRequest request;
  for (const std::string& state : flags.states) {
    request.add_states(*trainer::ParseJobStateName(state));
  }
  for (const std::string& type : flags.types) request.add_types(*trainer::ParseJobTypeName(type));
  const std::unique_ptr<v1::TrainerService::Stub> stub = Trainer(options);
  v1::ListJobsResponse all;
  do {
    grpc::ClientContext context;
    ConfigureCall(context, options);
    v1::ListJobsResponse page;
    ExitOnError(stub->ListJobs(&context, request, &page));
    for (v1::Job& job : *page.mutable_jobs()) *all.add_jobs() = std::move(job);
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  if (flags.json) {
    PrintJson(all);
  } else {
    PrintTable({all.jobs().begin(), all.jobs().end()});
  }
}

void Get(const ClientOptions& options, const std::string& job_id, bool json) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  grpc::ClientContext context;
  ConfigureCall(context, options);
  v1::GetJobResponse response;
  ExitOnError(Trainer(options)->GetJob(&context, request, &response));
  if (json) {
    PrintJson(response.job());
  } else {
    PrintJob(response.job());
  }
}

void Logs(const ClientOptions& options, const std::string& job_id, bool follow, int64_t tail) {
  v1::StreamLogsRequest request;
  request.set_job_id(job_id);
  request.set_follow(follow);
  if (tail >= 0) request.set_tail_lines(static_cast<uint32_t>(tail));
  grpc::ClientContext context;
  ConfigureCall(context, options, /*streaming=*/follow);
  std::unique_ptr<grpc::ClientReader<v1::StreamLogsResponse>> reader =
      Trainer(options)->StreamLogs(&context, request);
  v1::StreamLogsResponse response;
  while (reader->Read(&response)) {
    for (const v1::LogLine& line : response.lines()) std::cout << line.text() << "\n";
    std::cout << std::flush;
  }
  ExitOnError(reader->Finish());
}

void Cancel(const ClientOptions& options, const std::string& job_id, const std::string& reason) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason(reason);
  grpc::ClientContext context;
  ConfigureCall(context, options);
  v1::CancelJobResponse response;
  ExitOnError(Trainer(options)->CancelJob(&context, request, &response));
  std::cout << absl::StrFormat("%-18s %s\n", "job_id:", response.job().job_id())
            << absl::StrFormat("%-18s %s\n", "state:", JobStateName(response.job().state()));
}

}  // namespace

void AddJobsCommands(CLI::App& app, const ClientOptions& options) {
  CLI::App* jobs = app.add_subcommand("jobs", "training jobs of a trainer");
  jobs->require_subcommand(1);

  auto submit = std::make_shared<SubmitFlags>();
  CLI::App* submit_command = jobs->add_subcommand("submit", "submit a job");
  submit_command->add_option("type", submit->type, "what to run")
      ->required()
      ->check(CLI::IsMember(TypeNames()));
  submit_command->add_option("--config", submit->config, "the stage's YAML config")->required();
  submit_command->add_option("--output-dir", submit->output_dir,
                             "where the job writes, on the trainer (default: a new directory "
                             "under its work root)");
  submit_command->add_option("--submission-id", submit->submission_id,
                             "idempotency key: submitting again with it returns the same job "
                             "(default: random)");
  submit_command->add_option("--label", submit->labels, "KEY=VALUE, repeatable");
  submit_command->callback([&options, submit] { Submit(options, *submit); });

  auto list = std::make_shared<ListFlags>();
  CLI::App* list_command = jobs->add_subcommand("list", "list jobs, newest first");
  list_command->add_option("--state", list->states, "only jobs in this state, repeatable")
      ->check(CLI::IsMember(StateNames()));
  list_command->add_option("--type", list->types, "only jobs of this type, repeatable")
      ->check(CLI::IsMember(TypeNames()));
  list_command->add_flag("--json", list->json, "print the jobs as JSON");
  list_command->callback([&options, list] { List(options, *list); });

  auto job_id = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* get_command = jobs->add_subcommand("get", "show one job");
  get_command->add_option("id", *job_id, "the job's id")->required();
  get_command->add_flag("--json", *json, "print the job as JSON");
  get_command->callback([&options, job_id, json] { Get(options, *job_id, *json); });

  auto logs_id = std::make_shared<std::string>();
  auto follow = std::make_shared<bool>(false);
  auto tail = std::make_shared<int64_t>(-1);
  CLI::App* logs_command = jobs->add_subcommand("logs", "print a job's log");
  logs_command->add_option("id", *logs_id, "the job's id")->required();
  logs_command->add_flag("-f,--follow", *follow, "keep printing new lines until the job ends");
  logs_command->add_option("--tail", *tail, "start this many lines before the end")
      ->check(CLI::NonNegativeNumber);
  logs_command->callback(
      [&options, logs_id, follow, tail] { Logs(options, *logs_id, *follow, *tail); });

  auto cancel_id = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  CLI::App* cancel_command = jobs->add_subcommand("cancel", "cancel a job");
  cancel_command->add_option("id", *cancel_id, "the job's id")->required();
  cancel_command->add_option("--reason", *reason, "recorded in the job's log");
  cancel_command->callback([&options, cancel_id, reason] { Cancel(options, *cancel_id, *reason); });
}

}  // namespace specd::specctl
