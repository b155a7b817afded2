#pragma once
// Times as the contract carries them (google.protobuf.Duration): compute times, request timings
// and lease lengths, from Abseil or std::chrono durations and back to milliseconds.
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/util/time_util.h>

#include <chrono>

#include "absl/time/time.h"

namespace specd::rpc {

inline google::protobuf::Duration ToProtoDuration(absl::Duration duration) {
  return google::protobuf::util::TimeUtil::NanosecondsToDuration(
      absl::ToInt64Nanoseconds(duration));
}

template <typename Rep, typename Period>
google::protobuf::Duration ToProtoDuration(std::chrono::duration<Rep, Period> duration) {
  return ToProtoDuration(absl::FromChrono(duration));
}

inline double ToMilliseconds(const google::protobuf::Duration& duration) {
  return static_cast<double>(google::protobuf::util::TimeUtil::DurationToNanoseconds(duration)) /
         1e6;
}

}  // namespace specd::rpc
