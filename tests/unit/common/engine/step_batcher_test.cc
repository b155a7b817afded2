// The step scheduler both models use: which waiting jobs form a step, how long a step waits for
// the sessions still to come, and that a job a step did not finish runs again in the next one.
#include "common/engine/step_batcher.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace specd::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

struct Job {
  int64_t id = 0;
  int64_t job_rows = 1;
  bool is_urgent = true;
  int64_t steps_needed = 1;  // steps until the job is finished

  int64_t rows() const { return job_rows; }
  bool urgent() const { return is_urgent; }
};

// A batcher whose steps record the ids of the jobs they ran.
class Recorder {
 public:
  explicit Recorder(BatchingOptions options)
      : batcher_(options, [this](std::span<Job* const> batch) {
          std::vector<int64_t> ids;
          std::vector<bool> done;
          for (Job* job : batch) {
            ids.push_back(job->id);
            done.push_back(--job->steps_needed == 0);
          }
          std::lock_guard lock(mutex_);
          steps_.push_back(ids);
          return done;
        }) {}

  StepBatcher<Job>& batcher() { return batcher_; }
  std::vector<std::vector<int64_t>> steps() {
    std::lock_guard lock(mutex_);
    return steps_;
  }

  // Runs every job on a thread of its own, each a member from the start until its job is done.
  void RunTogether(std::vector<Job>& jobs) {
    std::vector<StepBatcher<Job>::Membership> members;
    for (size_t i = 0; i < jobs.size(); ++i) members.push_back(batcher_.Join());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < jobs.size(); ++i) {
      threads.emplace_back([&, i] {
        batcher_.Run(jobs[i]);
        members[i] = {};
      });
    }
    for (std::thread& thread : threads) thread.join();
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<int64_t>> steps_;
  StepBatcher<Job> batcher_;  // last: its worker records into the members above
};

constexpr std::chrono::microseconds kLong = std::chrono::seconds(30);

TEST(StepBatcherTest, WhenEveryMemberHasQueuedTheyShareOneStep) {
  Recorder recorder({.max_rows = 100, .max_sequences = 64, .max_delay = kLong});
  std::vector<Job> jobs = {{.id = 1}, {.id = 2}, {.id = 3}, {.id = 4}};
  recorder.RunTogether(jobs);
  EXPECT_THAT(recorder.steps(), ElementsAre(UnorderedElementsAre(1, 2, 3, 4)));
  EXPECT_EQ(recorder.batcher().stats().mean_batch_size(), 4);
}

TEST(StepBatcherTest, AStepWaitsForAMissingMemberOnlyUpToTheDelay) {
  Recorder recorder(
      {.max_rows = 100, .max_sequences = 64, .max_delay = std::chrono::milliseconds(50)});
  StepBatcher<Job>::Membership absent = recorder.batcher().Join();
  StepBatcher<Job>::Membership present = recorder.batcher().Join();
  Job job{.id = 7};
  const auto start = std::chrono::steady_clock::now();
  const auto queued = recorder.batcher().Run(job);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(50));
  EXPECT_THAT(recorder.steps(), ElementsAre(ElementsAre(7)));
  // The job is told how long it waited for its step to start: the delay, not the step.
  EXPECT_GE(queued, std::chrono::milliseconds(50));
  EXPECT_LE(queued, took);
}

// Sessions that each run `jobs_each` jobs in turn, on threads of their own, through a batcher
// whose steps take `step`; `pause(session, n)` runs before a session's n-th job (work elsewhere,
// such as drafting). Members from the start until their last job is done.
BatchingStats RunSessions(std::chrono::milliseconds step, std::chrono::microseconds max_delay,
                          int sessions, int jobs_each,
                          const std::function<void(int session, int n)>& pause) {
  StepBatcher<Job> batcher({.max_rows = 100, .max_sequences = 64, .max_delay = max_delay},
                           [&](std::span<Job* const> batch) {
                             std::this_thread::sleep_for(step);
                             return std::vector<bool>(batch.size(), true);
                           });
  std::vector<StepBatcher<Job>::Membership> members;
  for (int i = 0; i < sessions; ++i) members.push_back(batcher.Join());
  std::vector<std::thread> threads;
  for (int i = 0; i < sessions; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < jobs_each; ++n) {
        pause(i, n);
        Job job{.id = i};
        batcher.Run(job);
      }
      members[i] = {};
    });
  }
  for (std::thread& thread : threads) thread.join();
  return batcher.stats();
}

// Two members that queue while a step of the other two runs (a step longer than the delay) must
// not take turns with them for ever: the next step waits for the members the last one returned.
TEST(StepBatcherTest, MembersThatQueuedDuringAStepJoinTheOnesItReturns) {
  const BatchingStats stats = RunSessions(
      std::chrono::milliseconds(60), std::chrono::milliseconds(10), 4, 10, [](int session, int n) {
        // Two sessions start together; the other two come during the first step.
        if (session >= 2 && n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      });
  // Taking turns would be 20 steps of 2; merged, all but the first and last steps carry 4.
  EXPECT_GT(stats.mean_batch_size(), 3.0) << stats.steps << " steps";
}

// A member that misses a step waits for the whole next one, so after a long step (one that took
// a prefill chunk) a step waits for a member still busy elsewhere (drafting) longer than the
// delay: up to a quarter of the last step's time.
TEST(StepBatcherTest, AfterALongStepAStepWaitsLongerForAMemberStillToCome) {
  const auto kDrafting = std::chrono::milliseconds(10);  // well within 200 / 4, far past 1
  const BatchingStats stats = RunSessions(
      std::chrono::milliseconds(200), std::chrono::milliseconds(1), 2, 4, [&](int session, int n) {
        if (session == 1 && n > 0) std::this_thread::sleep_for(kDrafting);
      });
  // 4 steps of both; 5 if one thread started late for the first (waiting 1 ms alone: 8 of one).
  EXPECT_LE(stats.steps, 5);
}

TEST(StepBatcherTest, UrgentJobsGoFirstAndTheRowBudgetDefersWhatDoesNotFit) {
  Recorder recorder({.max_rows = 10, .max_sequences = 64, .max_delay = kLong});
  std::vector<Job> jobs = {{.id = 1, .job_rows = 8, .is_urgent = false},
                           {.id = 2, .job_rows = 4, .is_urgent = true},
                           {.id = 3, .job_rows = 3, .is_urgent = false}};
  recorder.RunTogether(jobs);
  EXPECT_THAT(recorder.steps(), ElementsAre(ElementsAre(2, 3), ElementsAre(1)));
}

TEST(StepBatcherTest, TheObserverSeesEachStepsSequencesAndRows) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> seen;
  Recorder recorder({.max_rows = 10,
                     .max_sequences = 64,
                     .max_delay = kLong,
                     .on_step = [&](int64_t sequences, int64_t rows) {
                       std::lock_guard lock(mutex);
                       seen.emplace_back(sequences, rows);
                     }});
  std::vector<Job> jobs = {{.id = 1, .job_rows = 8, .is_urgent = false},
                           {.id = 2, .job_rows = 4, .is_urgent = true},
                           {.id = 3, .job_rows = 3, .is_urgent = false}};
  recorder.RunTogether(jobs);
  std::lock_guard lock(mutex);
  EXPECT_THAT(seen,
              ElementsAre(std::pair<int64_t, int64_t>(2, 7), std::pair<int64_t, int64_t>(1, 8)));
}

TEST(StepBatcherTest, OneSequencePerStepTurnsBatchingOff) {
  Recorder recorder({.max_rows = 100, .max_sequences = 1, .max_delay = kLong});
  std::vector<Job> jobs = {{.id = 1}, {.id = 2}, {.id = 3}};
  recorder.RunTogether(jobs);
  EXPECT_EQ(recorder.steps().size(), 3u);
  EXPECT_EQ(recorder.batcher().stats().mean_batch_size(), 1);
}

TEST(StepBatcherTest, AnUnfinishedJobRunsAgainAlongsideNewOnes) {
  // A prefill of three chunks keeps its place while a decode job joins at the next step.
  Recorder recorder({.max_rows = 100, .max_sequences = 64, .max_delay = kLong});
  std::vector<Job> jobs = {{.id = 1, .job_rows = 50, .is_urgent = false, .steps_needed = 3},
                           {.id = 2, .steps_needed = 1}};
  recorder.RunTogether(jobs);
  const std::vector<std::vector<int64_t>> steps = recorder.steps();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_THAT(steps[0], ElementsAre(2, 1));
  EXPECT_THAT(steps[1], ElementsAre(1));
  EXPECT_THAT(steps[2], ElementsAre(1));
}

// The target's and the drafter's batchers of one process, sharing the device: sessions that
// draft then verify, half of them starting while the first step runs. Side by side the halves
// would take turns for ever (one drafting while the other verifies, every forward half full, two
// at once on the cores); taking turns on the device, one forward runs at a time and each waits
// for the members the other's gives back, so the halves merge.
TEST(StepBatcherTest, BatchersTakingTurnsOnADeviceRunOneStepAtATimeAndMergeTheirSessions) {
  const auto turns = std::make_shared<DeviceTurns>();
  std::atomic<int> running = 0, most_running = 0;
  const auto step = [&](std::span<Job* const> batch) {
    most_running = std::max(most_running.load(), ++running);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --running;
    return std::vector<bool>(batch.size(), true);
  };
  const BatchingOptions options{.max_rows = 100,
                                .max_sequences = 64,
                                .max_delay = std::chrono::milliseconds(2),
                                .turns = turns};
  StepBatcher<Job> drafter(options, step), target(options, step);
  constexpr int kSessions = 4, kSteps = 10;
  std::vector<StepBatcher<Job>::Membership> drafting, verifying;
  for (int i = 0; i < kSessions; ++i) {
    drafting.push_back(drafter.Join());
    verifying.push_back(target.Join());
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kSessions; ++i) {
    threads.emplace_back([&, i] {
      if (i >= kSessions / 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      for (int n = 0; n < kSteps; ++n) {
        Job draft{.id = i}, verify{.id = i};
        drafter.Run(draft);
        target.Run(verify);
      }
      drafting[i] = {};
      verifying[i] = {};
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(most_running, 1);
  EXPECT_GT(drafter.stats().mean_batch_size(), 3.0) << drafter.stats().steps << " steps";
  EXPECT_GT(target.stats().mean_batch_size(), 3.0) << target.stats().steps << " steps";
}

}  // namespace
}  // namespace specd::engine
