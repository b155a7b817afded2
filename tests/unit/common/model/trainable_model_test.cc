// A model loaded trainable is the same function as one loaded for serving, exposes every weight
// under its checkpoint name, and trains: gradients reach every weight and an in-place step on
// them changes what the forward computes. W4A16 Linears train as fake-quant weights on their
// frozen grid. The drafter's many-anchor training forward equals drafting one block at a time.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/io/checkpoint.h"
#include "common/model/dflash_drafter.h"
#include "common/model/ops/op_table.h"
#include "common/model/qwen35_model.h"
#include "tests/support/paths.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::model {
namespace {

using testing::AllClose;

constexpr double kRounding = 1e-5;  // the same float32 function, computed in other batch shapes
// The same function by other arithmetic: the CPU kernels' (the delta rule token by token where
// the reference goes in chunks, attention with an online softmax).
constexpr double kKernelRounding = 1e-3;

std::filesystem::path FixtureDir(const std::string& name) {
  return specd::testing::SharedDir() / "fixtures" / name;
}

const std::vector<int64_t> kIds = {5, 17, 3, 99, 42, 8, 23, 64, 1, 77, 12, 30};

Qwen35Model LoadModel(const std::string& fixture, bool trainable) {
  absl::StatusOr<Qwen35Model> model =
      Qwen35Model::Load(FixtureDir(fixture), {.trainable = trainable});
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

at::Tensor AllLogits(const Qwen35Model& model) {
  absl::StatusOr<Qwen35Cache> cache = model.NewCache(static_cast<int64_t>(kIds.size()));
  EXPECT_TRUE(cache.ok()) << cache.status();
  absl::StatusOr<ForwardOutput> output =
      model.Prefill(kIds, *cache, {.logit_rows = LogitRows::kAll, .hidden_states = {}});
  EXPECT_TRUE(output.ok()) << output.status();
  return output->logits;
}

TEST(TrainableModelTest, ServingModelListsNoParameters) {
  EXPECT_TRUE(LoadModel("qwen35-tiny-a", false).parameters().empty());
}

TEST(TrainableModelTest, ParametersAreTheCheckpointsTextTensorsByName) {
  const Qwen35Model model = LoadModel("qwen35-tiny-a", true);
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(FixtureDir("qwen35-tiny-a"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  std::set<std::string> names;
  for (const NamedParameter& parameter : model.parameters()) {
    EXPECT_TRUE(names.insert(parameter.name).second) << parameter.name << " listed twice";
    ASSERT_TRUE(checkpoint->Get(parameter.name).ok()) << parameter.name;
    EXPECT_EQ(parameter.tensor.sizes().vec(), (*checkpoint->Get(parameter.name))->shape);
    EXPECT_TRUE(parameter.tensor.requires_grad()) << parameter.name;
    EXPECT_TRUE(parameter.tensor.is_leaf()) << parameter.name;
  }
  for (const io::TensorView& view : checkpoint->tensors()) {
    if (view.name.find("visual") != std::string::npos || view.name.find("mtp") != std::string::npos)
      continue;
    EXPECT_TRUE(names.contains(view.name)) << view.name << " is not a parameter";
  }
}

// Training runs the reference ops (kernels record no gradients): serving on them computes the
// same function, and serving on the CPU's kernels the same up to their rounding.
TEST(TrainableModelTest, ComputesWhatTheServingModelComputes) {
  const Qwen35Model serving = LoadModel("qwen35-tiny-a", false);
  const at::Tensor trained = AllLogits(LoadModel("qwen35-tiny-a", true));
  EXPECT_TRUE(trained.requires_grad());
  ops::UseReferenceOnly(true);
  const at::Tensor on_reference = AllLogits(serving);
  ops::UseReferenceOnly(false);
  EXPECT_TRUE(AllClose(trained.detach(), on_reference, kRounding));
  EXPECT_TRUE(AllClose(trained.detach(), AllLogits(serving), kKernelRounding));
}

TEST(TrainableModelTest, GradientsReachEveryParameterAndAStepChangesTheForward) {
  const Qwen35Model model = LoadModel("qwen35-tiny-a", true);
  const at::Tensor before = AllLogits(model);
  at::log_softmax(before, -1).select(1, 7).sum().backward();
  for (const NamedParameter& parameter : model.parameters()) {
    ASSERT_TRUE(parameter.tensor.grad().defined()) << parameter.name;
    EXPECT_TRUE(at::isfinite(parameter.tensor.grad()).all().item<bool>()) << parameter.name;
    EXPECT_GT(parameter.tensor.grad().abs().sum().item<double>(), 0.0) << parameter.name;
  }
  {
    at::NoGradGuard no_grad;
    for (const NamedParameter& parameter : model.parameters()) {
      parameter.tensor.add_(parameter.tensor.grad(), 1e-4);
    }
  }
  const at::Tensor after = AllLogits(model).detach();
  // A small step up the gradient of Σ log p(token 7) raises that sum.
  const auto log_p7 = [](const at::Tensor& logits) {
    return at::log_softmax(logits, -1).select(1, 7).sum().item<double>();
  };
  EXPECT_GT(log_p7(after), log_p7(before.detach()));
}

TEST(TrainableModelTest, W4A16LinearsTrainAsFakeQuantWeightsOnTheirGrid) {
  const Qwen35Model served = LoadModel("qwen35-tiny-a-w4a16", false);
  const Qwen35Model trained = LoadModel("qwen35-tiny-a-w4a16", true);
  int64_t fake_quant = 0;
  for (const NamedParameter& parameter : trained.parameters()) {
    if (parameter.fake_quant == nullptr) continue;
    ++fake_quant;
    EXPECT_TRUE(parameter.tensor.is_same(parameter.fake_quant->weight())) << parameter.name;
  }
  EXPECT_GT(fake_quant, 0);
  // The fake quantizer multiplies by the dequantized grid weights the kernel multiplies by: float32
  // both, summed in other orders (LibTorch's GEMM, the INT4 kernel's lanes); measured 1.05e-4
  // apart with the AVX-512 kernel and PyTorch 2.11's MKL, less on AVX2.
  EXPECT_TRUE(AllClose(AllLogits(trained).detach(), AllLogits(served), 2e-4));
}

TEST(DraftAnchoredBlocksTest, EachBlockSeesWhatDraftingItAloneSees) {
  absl::StatusOr<DFlashDrafter> drafter = DFlashDrafter::Load(FixtureDir("dflash-tiny-a"));
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  const int64_t taps = static_cast<int64_t>(drafter->config().target_layer_ids.size());
  const int64_t hidden = drafter->config().hidden_size;
  const int64_t block = 4;
  const at::Tensor context = at::randn({20, taps * hidden});
  const at::Tensor anchors = at::tensor(std::vector<int64_t>{3, 11, 20});
  const at::Tensor embeddings = at::randn({3 * block, hidden});
  absl::StatusOr<at::Tensor> together = drafter->DraftAnchoredBlocks(context, embeddings, anchors);
  ASSERT_TRUE(together.ok()) << together.status();
  for (int64_t j = 0; j < 3; ++j) {
    const int64_t anchor = anchors[j].item<int64_t>();
    absl::StatusOr<DFlashCache> cache = drafter->NewCache(anchor);
    ASSERT_TRUE(cache.ok());
    ASSERT_TRUE(drafter->AppendContext(context.narrow(0, 0, anchor), *cache).ok());
    absl::StatusOr<at::Tensor> alone =
        drafter->DraftBlock(embeddings.narrow(0, j * block, block), *cache);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_TRUE(AllClose(together->narrow(0, j * block, block), *alone, kRounding))
        << "block " << j;
  }
}

TEST(DraftAnchoredBlocksTest, AnchorsOutsideTheContextAreRefused) {
  absl::StatusOr<DFlashDrafter> drafter = DFlashDrafter::Load(FixtureDir("dflash-tiny-a"));
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  const int64_t taps = static_cast<int64_t>(drafter->config().target_layer_ids.size());
  const int64_t hidden = drafter->config().hidden_size;
  const at::Tensor context = at::randn({8, taps * hidden});
  const at::Tensor embeddings = at::randn({4, hidden});
  for (const int64_t anchor : {0, 9}) {
    EXPECT_EQ(
        drafter->DraftAnchoredBlocks(context, embeddings, at::tensor(std::vector<int64_t>{anchor}))
            .status()
            .code(),
        absl::StatusCode::kInvalidArgument)
        << anchor;
  }
}

}  // namespace
}  // namespace specd::model
