// When generation stops and which text is released on the way.
#include "common/engine/stop_criteria.h"

#include <string>

#include "gtest/gtest.h"

namespace specd::engine {
namespace {

TEST(StopCriteriaTest, StopsAfterMaxNewTokens) {
  StopCriteria stop({.max_new_tokens = 2});
  EXPECT_EQ(stop.Push(5, "a").reason, StopReason::kNone);
  const StopCriteria::Step last = stop.Push(6, "b");
  EXPECT_EQ(last.reason, StopReason::kMaxTokens);
  EXPECT_EQ(last.released_text, "b");
}

TEST(StopCriteriaTest, StopsOnAnEosIdWithoutReleasingItsText) {
  StopCriteria stop({.max_new_tokens = 10, .eos_ids = {7}});
  const StopCriteria::Step step = stop.Push(7, "<eos>");
  EXPECT_EQ(step.reason, StopReason::kEos);
  EXPECT_EQ(step.released_text, "");
}

TEST(StopCriteriaTest, IgnoreEosKeepsGoingButStopIdsStillStop) {
  StopCriteria stop({.max_new_tokens = 10, .eos_ids = {7}, .stop_ids = {8}, .ignore_eos = true});
  EXPECT_EQ(stop.Push(7, "").reason, StopReason::kNone);
  EXPECT_EQ(stop.Push(8, "").reason, StopReason::kStopToken);
}

TEST(StopCriteriaTest, IncludeStopStrInOutputReleasesTheStopStringOrTheEndingTokensText) {
  StopCriteria strings(
      {.max_new_tokens = 10, .stop_strings = {"END"}, .include_stop_str_in_output = true});
  EXPECT_EQ(strings.Push(1, "hi E").released_text, "hi ");
  const StopCriteria::Step stopped = strings.Push(2, "NDless");
  EXPECT_EQ(stopped.reason, StopReason::kStopString);
  EXPECT_EQ(stopped.released_text, "END");  // what follows the stop string still goes
  StopCriteria ids({.max_new_tokens = 10, .eos_ids = {7}, .include_stop_str_in_output = true});
  EXPECT_EQ(ids.Push(7, "<eos>").reason, StopReason::kEos);
  EXPECT_EQ(ids.Finish(), "<eos>");
}

TEST(StopCriteriaTest, BeforeMinNewTokensNeitherIdsNorStopStringsEndTheOutput) {
  StopCriteria stop({.max_new_tokens = 10,
                     .eos_ids = {7},
                     .stop_ids = {8},
                     .stop_strings = {"END"},
                     .min_new_tokens = 3});
  EXPECT_EQ(stop.Push(7, "a").reason, StopReason::kNone);
  const StopCriteria::Step early = stop.Push(8, "END");
  EXPECT_EQ(early.reason, StopReason::kNone);
  EXPECT_EQ(early.released_text, "END");  // ordinary text this early
  const StopCriteria::Step third = stop.Push(1, "xEND");
  EXPECT_EQ(third.reason, StopReason::kStopString);
  EXPECT_EQ(third.released_text, "x");
}

TEST(StopCriteriaTest, HoldsBackAPartialStopStringUntilItResolves) {
  StopCriteria stop({.max_new_tokens = 10, .stop_strings = {"END"}});
  EXPECT_EQ(stop.Push(1, "abE").released_text, "ab");
  EXPECT_EQ(stop.Push(2, "Nx").released_text, "ENx");  // "ENx" can no longer become "END"
}

TEST(StopCriteriaTest, StopsOnAStopStringSpanningTokensAndDropsIt) {
  StopCriteria stop({.max_new_tokens = 10, .stop_strings = {"END"}});
  EXPECT_EQ(stop.Push(1, "hi E").released_text, "hi ");
  const StopCriteria::Step step = stop.Push(2, "ND more");
  EXPECT_EQ(step.reason, StopReason::kStopString);
  EXPECT_EQ(step.released_text, "");
  EXPECT_EQ(stop.Finish(), "");
}

TEST(StopCriteriaTest, TheEarliestOfSeveralStopStringsWins) {
  StopCriteria stop({.max_new_tokens = 10, .stop_strings = {"cd", "b"}});
  EXPECT_EQ(stop.matched_stop_string(), std::nullopt);
  const StopCriteria::Step step = stop.Push(1, "abcd");
  EXPECT_EQ(step.reason, StopReason::kStopString);
  EXPECT_EQ(step.released_text, "a");
  EXPECT_EQ(stop.matched_stop_string(), "b");
}

TEST(StopCriteriaTest, FinishReleasesAPartialMatchThatNeverCompleted) {
  StopCriteria stop({.max_new_tokens = 1, .stop_strings = {"END"}});
  const StopCriteria::Step step = stop.Push(1, "xEN");
  EXPECT_EQ(step.reason, StopReason::kMaxTokens);
  EXPECT_EQ(step.released_text, "x");
  EXPECT_EQ(stop.Finish(), "EN");
}

}  // namespace
}  // namespace specd::engine
