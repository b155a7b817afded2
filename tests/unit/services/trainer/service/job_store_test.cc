// JobStore: every Job field survives a reopen, SubmitJob's idempotency rules, and ListJobs'
// order, filters and page tokens.
#include "services/trainer/service/job_store.h"

#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/temp_dir.h"

namespace specd::trainer {
namespace {

using google::protobuf::util::MessageDifferencer;
using google::protobuf::util::TimeUtil;

v1::SubmitJobRequest Request(const std::string& submission_id,
                             v1::JobType type = v1::JOB_TYPE_PACK) {
  v1::SubmitJobRequest request;
  request.set_submission_id(submission_id);
  request.set_type(type);
  request.set_config_yaml("input: texts.jsonl\n");
  (*request.mutable_labels())["team"] = "speculators";
  return request;
}

class JobStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<JobStore> Open() {
    absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(dir_.path() / "jobs.sqlite");
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // Creates jobs "job-0".."job-{n-1}" from submissions "s0".., types alternating pack/qad.
  void CreateJobs(JobStore& store, int n) {
    for (int i = 0; i < n; ++i) {
      const auto type = i % 2 == 0 ? v1::JOB_TYPE_PACK : v1::JOB_TYPE_QAD;
      ASSERT_TRUE(store
                      .Create(Request(absl::StrCat("s", i), type), absl::StrCat("job-", i),
                              absl::StrCat("/out/", i), absl::FromUnixSeconds(1000 + i))
                      .ok());
    }
  }

  std::vector<std::string> Ids(const v1::ListJobsResponse& response) {
    std::vector<std::string> ids;
    for (const v1::Job& job : response.jobs()) ids.push_back(job.job_id());
    return ids;
  }

  specd::testing::TempDir dir_;
};

TEST_F(JobStoreTest, CreateMakesAQueuedJobFromTheRequest) {
  std::unique_ptr<JobStore> store = Open();
  absl::StatusOr<JobStore::CreateResult> result =
      store->Create(Request("s1"), "job-1", "/out/job-1", absl::FromUnixSeconds(1700000000));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->created);
  const v1::Job& job = result->job;
  EXPECT_EQ(job.job_id(), "job-1");
  EXPECT_EQ(job.submission_id(), "s1");
  EXPECT_EQ(job.type(), v1::JOB_TYPE_PACK);
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.config_yaml(), "input: texts.jsonl\n");
  EXPECT_EQ(job.output_dir(), "/out/job-1");
  EXPECT_EQ(job.labels().at("team"), "speculators");
  EXPECT_EQ(job.attempt(), 0u);
  EXPECT_EQ(job.progress().stage(), v1::JOB_TYPE_PACK);
  EXPECT_EQ(job.create_time().seconds(), 1700000000);
  EXPECT_FALSE(job.has_start_time());
  EXPECT_FALSE(job.has_end_time());
  EXPECT_FALSE(job.has_exit_code());
}

TEST_F(JobStoreTest, EveryFieldSurvivesAReopen) {
  v1::Job expected;
  {
    std::unique_ptr<JobStore> store = Open();
    ASSERT_TRUE(
        store->Create(Request("s1"), "job-1", "/out/job-1", absl::FromUnixNanos(1234567891)).ok());
    absl::StatusOr<v1::Job> updated = store->Update("job-1", [](v1::Job& job) {
      job.set_state(v1::JOB_STATE_FAILED);
      job.set_failure_reason("exit status 1: config: unknown keys: lr_sched");
      job.set_exit_code(-9);
      job.set_attempt(3);
      job.set_last_checkpoint("/out/job-1/state");
      *job.mutable_start_time() = TimeUtil::NanosecondsToTimestamp(2000000001);
      *job.mutable_end_time() = TimeUtil::NanosecondsToTimestamp(3000000002);
      v1::JobProgress& progress = *job.mutable_progress();
      progress.set_step(1u << 20);
      progress.set_total_steps(1u << 21);
      progress.set_loss(2.5);
      progress.set_validation_loss(2.75);
      progress.set_tokens_per_second(1234.5);
      progress.set_stage(v1::JOB_TYPE_DRAFTER_STAGE2);
      *progress.mutable_update_time() = TimeUtil::NanosecondsToTimestamp(2500000003);
      *progress.mutable_estimated_time_remaining() = TimeUtil::NanosecondsToDuration(61000000004);
    });
    ASSERT_TRUE(updated.ok()) << updated.status();
    expected = *updated;
  }
  std::unique_ptr<JobStore> reopened = Open();
  absl::StatusOr<v1::Job> job = reopened->Get("job-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*job, expected)) << job->DebugString() << "\nexpected:\n"
                                                          << expected.DebugString();
  EXPECT_EQ(job->exit_code(), -9);
  EXPECT_EQ(job->progress().estimated_time_remaining().nanos(), 4);
}

TEST_F(JobStoreTest, UnsetOptionalFieldsStayUnset) {
  std::unique_ptr<JobStore> store = Open();
  ASSERT_TRUE(store->Create(Request("s1"), "job-1", "/out", absl::Now()).ok());
  absl::StatusOr<v1::Job> job = store->Get("job-1");
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE(job->has_exit_code());
  EXPECT_FALSE(job->progress().has_loss());
  EXPECT_FALSE(job->progress().has_validation_loss());
  EXPECT_FALSE(job->progress().has_update_time());
  EXPECT_FALSE(job->progress().has_estimated_time_remaining());
}

TEST_F(JobStoreTest, TheSameSubmissionReturnsTheSameJob) {
  std::unique_ptr<JobStore> store = Open();
  ASSERT_TRUE(store->Create(Request("s1"), "job-1", "/out/job-1", absl::Now()).ok());
  absl::StatusOr<JobStore::CreateResult> again =
      store->Create(Request("s1"), "job-2", "/out/job-2", absl::Now());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.job_id(), "job-1");
  absl::StatusOr<std::optional<v1::Job>> found = store->FindSubmission(Request("s1"));
  ASSERT_TRUE(found.ok());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->job_id(), "job-1");
  EXPECT_FALSE(store->Get("job-2").ok());
}

TEST_F(JobStoreTest, ASubmissionIdUsedForAnotherRequestIsAlreadyExists) {
  std::unique_ptr<JobStore> store = Open();
  ASSERT_TRUE(store->Create(Request("s1"), "job-1", "", absl::Now()).ok());
  std::vector<std::pair<std::string, v1::SubmitJobRequest>> changed;
  changed.emplace_back("type", Request("s1", v1::JOB_TYPE_QAD));
  changed.emplace_back("config_yaml", Request("s1"));
  changed.back().second.set_config_yaml("input: other.jsonl\n");
  changed.emplace_back("output_dir", Request("s1"));
  changed.back().second.set_output_dir("/elsewhere");
  changed.emplace_back("labels", Request("s1"));
  (*changed.back().second.mutable_labels())["team"] = "verifiers";
  for (const auto& [field, request] : changed) {
    absl::StatusOr<JobStore::CreateResult> result =
        store->Create(request, "job-2", "/out", absl::Now());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kAlreadyExists) << field;
    EXPECT_NE(result.status().message().find(field), std::string::npos) << result.status();
    EXPECT_EQ(store->FindSubmission(request).status().code(), absl::StatusCode::kAlreadyExists);
  }
}

TEST_F(JobStoreTest, RequestsBreakingTheSubmissionRulesAreInvalid) {
  std::unique_ptr<JobStore> store = Open();
  std::vector<v1::SubmitJobRequest> invalid;
  for (const std::string& id : {std::string(""), std::string(129, 'a'), std::string("a b"),
                                std::string("a/b"), std::string("caf\xc3\xa9")}) {
    invalid.push_back(Request(id));
  }
  invalid.push_back(Request("s1", v1::JOB_TYPE_UNSPECIFIED));
  invalid.push_back(Request("s1"));
  for (int i = 0; i < 65; ++i)
    invalid.back().mutable_labels()->insert({absl::StrCat("k", i), absl::StrCat("v", i)});
  for (const v1::SubmitJobRequest& request : invalid) {
    EXPECT_EQ(store->Create(request, "job-1", "/out", absl::Now()).status().code(),
              absl::StatusCode::kInvalidArgument)
        << request.DebugString();
  }
  EXPECT_TRUE(store->Create(Request(std::string(128, 'a')), "job-1", "/o", absl::Now()).ok());
  EXPECT_TRUE(store->Create(Request("A-z_0.9"), "job-2", "/o", absl::Now()).ok());
}

TEST_F(JobStoreTest, UpdateCannotChangeWhatSubmitJobSet) {
  std::unique_ptr<JobStore> store = Open();
  ASSERT_TRUE(store->Create(Request("s1"), "job-1", "/out", absl::Now()).ok());
  EXPECT_EQ(
      store->Update("job-1", [](v1::Job& job) { job.set_config_yaml("x: 1"); }).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->Get("job-1")->config_yaml(), "input: texts.jsonl\n");
  EXPECT_EQ(store->Update("job-9", [](v1::Job&) {}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, GetOfAnUnknownIdIsNotFound) {
  std::unique_ptr<JobStore> store = Open();
  EXPECT_EQ(store->Get("job-404").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, ListIsNewestFirstInPagesThatEndWithoutAToken) {
  std::unique_ptr<JobStore> store = Open();
  CreateJobs(*store, 5);
  v1::ListJobsRequest request;
  request.set_page_size(2);
  std::vector<std::string> seen;
  int pages = 0;
  do {
    absl::StatusOr<v1::ListJobsResponse> page = store->List(request);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const std::string& id : Ids(*page)) seen.push_back(id);
    request.set_page_token(page->next_page_token());
    ++pages;
  } while (!request.page_token().empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, (std::vector<std::string>{"job-4", "job-3", "job-2", "job-1", "job-0"}));
}

TEST_F(JobStoreTest, AFullLastPageHasNoToken) {
  std::unique_ptr<JobStore> store = Open();
  CreateJobs(*store, 2);
  v1::ListJobsRequest request;
  request.set_page_size(2);
  absl::StatusOr<v1::ListJobsResponse> page = store->List(request);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs_size(), 2);
  EXPECT_TRUE(page->next_page_token().empty());
}

TEST_F(JobStoreTest, ListFiltersByStateAndType) {
  std::unique_ptr<JobStore> store = Open();
  CreateJobs(*store, 4);  // pack, qad, pack, qad
  ASSERT_TRUE(
      store->Update("job-2", [](v1::Job& job) { job.set_state(v1::JOB_STATE_RUNNING); }).ok());
  v1::ListJobsRequest by_type;
  by_type.add_types(v1::JOB_TYPE_QAD);
  EXPECT_EQ(Ids(*store->List(by_type)), (std::vector<std::string>{"job-3", "job-1"}));
  v1::ListJobsRequest by_state;
  by_state.add_states(v1::JOB_STATE_QUEUED);
  by_state.add_types(v1::JOB_TYPE_PACK);
  EXPECT_EQ(Ids(*store->List(by_state)), (std::vector<std::string>{"job-0"}));
  v1::ListJobsRequest unspecified;
  unspecified.add_states(v1::JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(store->List(unspecified).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobStoreTest, APageTokenNotIssuedOrUsedWithOtherFiltersIsInvalid) {
  std::unique_ptr<JobStore> store = Open();
  CreateJobs(*store, 3);
  v1::ListJobsRequest request;
  request.set_page_size(1);
  absl::StatusOr<v1::ListJobsResponse> first = store->List(request);
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->next_page_token().empty());

  v1::ListJobsRequest forged = request;
  forged.set_page_token("0123456789abcdef0123456789abcdef");
  EXPECT_EQ(store->List(forged).status().code(), absl::StatusCode::kInvalidArgument);

  v1::ListJobsRequest other_filters = request;
  other_filters.set_page_token(first->next_page_token());
  other_filters.add_types(v1::JOB_TYPE_PACK);
  EXPECT_EQ(store->List(other_filters).status().code(), absl::StatusCode::kInvalidArgument);

  v1::ListJobsRequest next = request;
  next.set_page_token(first->next_page_token());
  next.set_page_size(10);  // the page size may change between pages
  EXPECT_EQ(Ids(*store->List(next)), (std::vector<std::string>{"job-1", "job-0"}));
}

TEST_F(JobStoreTest, PageTokensAndJobsSurviveAReopen) {
  std::string token;
  {
    std::unique_ptr<JobStore> store = Open();
    CreateJobs(*store, 3);
    v1::ListJobsRequest request;
    request.set_page_size(2);
    token = store->List(request)->next_page_token();
  }
  std::unique_ptr<JobStore> reopened = Open();
  v1::ListJobsRequest request;
  request.set_page_size(2);
  request.set_page_token(token);
  absl::StatusOr<v1::ListJobsResponse> page = reopened->List(request);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(Ids(*page), (std::vector<std::string>{"job-0"}));
}

TEST_F(JobStoreTest, InStatesIsInSubmissionOrderAndCountByStateCountsEachState) {
  std::unique_ptr<JobStore> store = Open();
  CreateJobs(*store, 4);
  ASSERT_TRUE(
      store->Update("job-1", [](v1::Job& job) { job.set_state(v1::JOB_STATE_RUNNING); }).ok());
  absl::StatusOr<std::vector<v1::Job>> queued = store->InStates({v1::JOB_STATE_QUEUED});
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->size(), 3u);
  EXPECT_EQ((*queued)[0].job_id(), "job-0");
  EXPECT_EQ((*queued)[2].job_id(), "job-3");
  absl::StatusOr<std::map<v1::JobState, int64_t>> counts = store->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, (std::map<v1::JobState, int64_t>{{v1::JOB_STATE_QUEUED, 3},
                                                      {v1::JOB_STATE_RUNNING, 1}}));
}

}  // namespace
}  // namespace specd::trainer
