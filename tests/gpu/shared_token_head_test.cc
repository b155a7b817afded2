// The target's embedding and head shared from a model on the GPU and mapped back (in this process
// through the exporter's own memory; across processes the same handles go through CUDA IPC, as
// cuda_ipc_region_test proves): the mapped head embeds and predicts what the model's own does,
// reading the same memory, no copy. Skipped without a CUDA device.
#include "services/shared_weights/shared_token_head.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <memory>

#include "gtest/gtest.h"
#include "tests/unit/common/engine/engine_fixture.h"

namespace specd::shared_weights {
namespace {

TEST(SharedTokenHeadOnCudaTest, TheMappedHeadIsTheVerifiersOwnMemory) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const model::ModelOptions on_cuda{.device = c10::kCUDA, .dtype = c10::kBFloat16};
  absl::StatusOr<model::Qwen35Model> target =
      model::Qwen35Model::Load(engine::testing::FixtureDir("qwen35-tiny-a"), on_cuda);
  ASSERT_TRUE(target.ok()) << target.status();
  absl::StatusOr<std::map<std::string, v1::TensorHandle>> shared =
      ShareTokenHead(target->token_head(), "verifier-a", 7);
  ASSERT_TRUE(shared.ok()) << shared.status();
  ASSERT_EQ(shared->size(), 2u);
  const v1::TensorHandle& embed = shared->at(kEmbedTokens);
  EXPECT_TRUE(embed.has_cuda_ipc());
  EXPECT_EQ(embed.buffer_id(), 7u);
  EXPECT_EQ(embed.generation(), 0u);
  EXPECT_EQ(embed.dtype(), v1::DTYPE_BFLOAT16);

  google::protobuf::Map<std::string, v1::TensorHandle> handles(shared->begin(), shared->end());
  absl::StatusOr<model::TokenHead> mapped = MapTokenHead(handles, target->config(), on_cuda);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ(mapped->embed_tokens().data_ptr(), target->token_head().embed_tokens().data_ptr());
  const at::Tensor ids = at::arange(0, 16, at::TensorOptions().dtype(at::kLong).device(c10::kCUDA));
  EXPECT_TRUE(mapped->Embed(ids).equal(target->token_head().Embed(ids)));
  const at::Tensor hidden = target->token_head().Embed(ids);
  EXPECT_TRUE(mapped->Head(hidden).equal(target->token_head().Head(hidden)));

  handles[kLmHead].set_shape(0, target->config().vocab_size + 1);
  EXPECT_EQ(MapTokenHead(handles, target->config(), on_cuda).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::shared_weights
