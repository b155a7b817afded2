#include "common/rpc/status.h"

#include <gtest/gtest.h>

namespace specd::rpc {
namespace {

TEST(ToGrpcStatus, KeepsCodeAndMessageOfEveryCode) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "what went wrong");
    const grpc::Status converted = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(converted.error_code()), code);
    EXPECT_EQ(converted.error_message(), "what went wrong");
  }
}

TEST(ToGrpcStatus, MapsOkToOk) { EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok()); }

TEST(FromGrpcStatus, InvertsToGrpcStatus) {
  for (int code = 0; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), code == 0 ? "" : "message");
    EXPECT_EQ(FromGrpcStatus(ToGrpcStatus(status)), status) << "code " << code;
  }
}

TEST(FromGrpcStatus, KeepsCodeAndMessage) {
  const absl::Status status =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::ABORTED, "stale generation"));
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), "stale generation");
}

TEST(StatusCodeName, IsTheCanonicalUpperCaseName) {
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::CANCELLED), "CANCELLED");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAVAILABLE), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
}

TEST(StatusCodeName, IsUnknownForValuesOutsideTheCodes) {
  EXPECT_EQ(StatusCodeName(static_cast<grpc::StatusCode>(17)), "UNKNOWN");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::DO_NOT_USE), "UNKNOWN");
}

}  // namespace
}  // namespace specd::rpc
