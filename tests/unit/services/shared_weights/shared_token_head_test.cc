// On the CPU there is nothing to share: a verifier there exports no weights, and a drafter cannot
// map what is not shared (it reads the checkpoint instead). tests/gpu/shared_token_head_test.cc
// maps the GPU's.
#include "services/shared_weights/shared_token_head.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/engine_fixture.h"

namespace specd::shared_weights {
namespace {

using ::testing::HasSubstr;

TEST(SharedTokenHeadTest, AModelOnTheCpuSharesNothing) {
  const std::unique_ptr<model::Qwen35Model> target = engine::testing::LoadTarget("qwen35-tiny-a");
  ASSERT_NE(target, nullptr);
  absl::StatusOr<std::map<std::string, v1::TensorHandle>> shared =
      ShareTokenHead(target->token_head(), "verifier-a", 1);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_TRUE(shared->empty());
}

TEST(SharedTokenHeadTest, NothingSharedCannotBeMapped) {
  const std::unique_ptr<model::Qwen35Model> target = engine::testing::LoadTarget("qwen35-tiny-a");
  ASSERT_NE(target, nullptr);
  const google::protobuf::Map<std::string, v1::TensorHandle> none;
  const absl::Status on_cpu = MapTokenHead(none, target->config(), {}).status();
  EXPECT_EQ(on_cpu.code(), absl::StatusCode::kFailedPrecondition) << on_cpu;
  const absl::Status on_gpu =
      MapTokenHead(none, target->config(), {.device = c10::kCUDA, .dtype = c10::kBFloat16})
          .status();
  EXPECT_EQ(on_gpu.code(), absl::StatusCode::kFailedPrecondition) << on_gpu;
}

}  // namespace
}  // namespace specd::shared_weights
