// A LinearInputTap sees the input of every Linear a forward runs, under the module name the
// checkpoint gives it: what calibration (AWQ, GPTQ) collects its activations with.
#include "common/model/linear_input_tap.h"

#include <ATen/ATen.h>

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/common/model/tiny_fixture.h"

namespace specd::model {
namespace {

class LinearInputTapTest : public testing::FixtureSuite {
 protected:
  static void SetUpTestSuite() { LoadFixture("qwen35-tiny-a"); }
};

TEST_F(LinearInputTapTest, SeesEveryProjectionOfAForwardOnceWithItsInput) {
  std::map<std::string, at::Tensor> inputs;
  {
    LinearInputTap tap([&](const std::string& module, const at::Tensor& input) {
      EXPECT_TRUE(inputs.emplace(module, input).second) << module << " seen twice";
    });
    ASSERT_TRUE(model_->Prefill(Ids(0, 10), *cache_).ok());
  }
  // 3 Gated DeltaNet layers (5 projections, 3 MLP), 1 attention layer (4 projections, 3 MLP).
  EXPECT_EQ(inputs.size(), 3 * 8 + 1 * 7);
  const at::Tensor& down = inputs.at("model.layers.3.mlp.down_proj");
  EXPECT_EQ(down.sizes(), (std::vector<int64_t>{10, 128}));
  EXPECT_TRUE(inputs.contains("model.layers.0.linear_attn.in_proj_a"));
  EXPECT_TRUE(inputs.contains("model.layers.3.self_attn.o_proj"));
}

TEST_F(LinearInputTapTest, TheInnermostTapSeesTheInputsAndNoneOutsideATap) {
  int outer_calls = 0, inner_calls = 0;
  LinearInputTap outer([&](const std::string&, const at::Tensor&) { ++outer_calls; });
  {
    LinearInputTap inner([&](const std::string&, const at::Tensor&) { ++inner_calls; });
    ASSERT_TRUE(model_->Prefill(Ids(0, 4), *cache_).ok());
  }
  EXPECT_EQ(outer_calls, 0);
  EXPECT_EQ(inner_calls, 31);
  ASSERT_TRUE(model_->Decode(ids_[4], *cache_).ok());
  EXPECT_EQ(outer_calls, 31);
}

}  // namespace
}  // namespace specd::model
