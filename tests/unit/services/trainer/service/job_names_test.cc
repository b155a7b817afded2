// Job type and state names: the proto enum names, short, and parsed back.
#include "services/trainer/service/job_names.h"

#include <gtest/gtest.h>

namespace specd::trainer {
namespace {

TEST(JobNames, AreTheEnumNamesWithoutPrefixInLowerCaseWithDashes) {
  EXPECT_EQ(JobTypeName(v1::JOB_TYPE_DRAFTER_STAGE1), "drafter-stage1");
  EXPECT_EQ(JobTypeName(v1::JOB_TYPE_GPTQ_DRAFTER), "gptq-drafter");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_CANCELLING), "cancelling");
}

TEST(JobNames, ParseBackEveryTypeAndStateButUnspecified) {
  for (int value = v1::JobType_MIN + 1; value <= v1::JobType_MAX; ++value) {
    const auto type = static_cast<v1::JobType>(value);
    EXPECT_EQ(ParseJobTypeName(JobTypeName(type)), type);
  }
  for (int value = v1::JobState_MIN + 1; value <= v1::JobState_MAX; ++value) {
    const auto state = static_cast<v1::JobState>(value);
    EXPECT_EQ(ParseJobStateName(JobStateName(state)), state);
  }
  for (const char* name : {"unspecified", "drafter_stage1", "DRAFTER-STAGE1x", "", "pre train"}) {
    EXPECT_FALSE(ParseJobTypeName(name).has_value()) << name;
  }
  EXPECT_FALSE(ParseJobStateName("unspecified").has_value());
}

TEST(JobNames, OnlySucceededFailedAndCancelledAreTerminal) {
  EXPECT_TRUE(IsTerminal(v1::JOB_STATE_SUCCEEDED));
  EXPECT_TRUE(IsTerminal(v1::JOB_STATE_FAILED));
  EXPECT_TRUE(IsTerminal(v1::JOB_STATE_CANCELLED));
  EXPECT_FALSE(IsTerminal(v1::JOB_STATE_CANCELLING));
  EXPECT_FALSE(IsTerminal(v1::JOB_STATE_RUNNING));
  EXPECT_FALSE(IsTerminal(v1::JOB_STATE_QUEUED));
}

}  // namespace
}  // namespace specd::trainer
