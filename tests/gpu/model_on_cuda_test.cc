// The model and the engine on a GPU, bf16 (the model dtype there): the fixtures predict what
// transformers predicts, a verify block on a warm cache computes what one prefill does, and greedy
// speculative output is target-only output token for token, alone and batched with other requests.
// Skipped without a CUDA device.
#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/engine/generator.h"
#include "common/io/safetensors_file.h"
#include "common/model/dflash_drafter.h"
#include "common/model/qwen35_model.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::engine::testing {
namespace {

model::ModelOptions OnCuda(bool cuda_graphs = false) {
  return {.device = c10::kCUDA, .dtype = c10::kBFloat16, .cuda_graphs = cuda_graphs};
}

class ModelOnCudaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<model::Qwen35Model> target =
        model::Qwen35Model::Load(FixtureDir(GetParam()), OnCuda());
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = std::make_unique<model::Qwen35Model>(*std::move(target));
    absl::StatusOr<io::SafetensorsFile> reference =
        io::SafetensorsFile::Open(FixtureDir(GetParam()) / "reference.safetensors");
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = std::make_unique<io::SafetensorsFile>(*std::move(reference));
    const at::Tensor ids = model::testing::ReferenceTensor(*reference_, "input_ids");
    ids_.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }

  // Logits for every position of ids_[begin, end), on a cache that already holds ids_[0, begin).
  at::Tensor Logits(model::Qwen35Cache& cache, int64_t begin, int64_t end) {
    const std::vector<int64_t> ids(ids_.begin() + begin, ids_.begin() + end);
    const model::ForwardOptions all{.logit_rows = model::LogitRows::kAll, .hidden_states = {}};
    absl::StatusOr<model::ForwardOutput> out =
        begin == 0 ? target_->Prefill(ids, cache, all) : target_->ForwardBlock(ids, cache, all);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->logits.to(at::kCPU, at::kFloat) : at::Tensor();
  }

  // Eight requests of different prompt lengths sent to `generator` at once share its forwards (its
  // batchers), and each gets what the target alone gives it, without graphs. Where a kernel's
  // rounding depends on how many rows a forward has, this is where it shows.
  void ExpectRequestsAtOnceGetTargetOnlyOutput(const Generator& generator) {
    constexpr int kRequests = 8;
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < kRequests; ++i) {
      const auto prompt_length = static_cast<int64_t>(1 + (i * 13) % ids_.size());
      requests.push_back(Request(std::vector<int64_t>(ids_.begin(), ids_.begin() + prompt_length),
                                 /*max_new_tokens=*/24));
    }
    std::vector<absl::StatusOr<GenerationResult>> together(kRequests, absl::UnknownError(""));
    std::vector<std::thread> clients;
    for (int i = 0; i < kRequests; ++i) {
      clients.emplace_back([&, i] { together[i] = generator.Generate(requests[i]); });
    }
    for (std::thread& client : clients) client.join();
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_TRUE(together[i].ok()) << together[i].status();
      EXPECT_EQ(together[i]->ids, TargetOnly(*target_, requests[i]).ids) << "request " << i;
    }
  }

  std::unique_ptr<model::Qwen35Model> target_;
  std::unique_ptr<io::SafetensorsFile> reference_;
  std::vector<int64_t> ids_;
};

// As bf16 activations on the CPU predict (W4A16FixtureTest.Bfloat16ActivationsPredictLikeFloat32).
TEST_P(ModelOnCudaTest, PredictsWhatTransformersPredicts) {
  absl::StatusOr<model::Qwen35Cache> cache = target_->NewCache(256);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const at::Tensor logits = Logits(*cache, 0, static_cast<int64_t>(ids_.size()));
  const at::Tensor expected = model::testing::ReferenceTensor(*reference_, "prefill_logits");
  const double agreement =
      logits.argmax(-1).eq(expected.argmax(-1)).to(at::kDouble).mean().item<double>();
  std::cout << GetParam() << " on CUDA: max |dlogit| "
            << model::testing::MaxAbsDiff(logits, expected) << ", argmax agreement " << agreement
            << "\n";
  EXPECT_GE(agreement, 0.9);
}

// Prefill of 100 tokens, then a 16-token verify block on that cache: the same predictions as one
// prefill of all 116 (both are bf16; the delta rule makes the same arithmetic per token).
TEST_P(ModelOnCudaTest, AVerifyBlockOnAWarmCachePredictsWhatOnePrefillDoes) {
  absl::StatusOr<model::Qwen35Cache> whole = target_->NewCache(256);
  absl::StatusOr<model::Qwen35Cache> split = target_->NewCache(256);
  ASSERT_TRUE(whole.ok() && split.ok());
  const at::Tensor expected = Logits(*whole, 0, 116).narrow(0, 100, 16);
  ASSERT_TRUE(Logits(*split, 0, 100).defined());
  const at::Tensor block = Logits(*split, 100, 116);
  std::cout << GetParam() << " on CUDA: block vs prefill max |dlogit| "
            << model::testing::MaxAbsDiff(block, expected) << "\n";
  EXPECT_TRUE(block.argmax(-1).equal(expected.argmax(-1)));
}

TEST_P(ModelOnCudaTest, GreedySpeculativeOutputIsTargetOnlys) {
  absl::StatusOr<model::DFlashDrafter> drafter =
      model::DFlashDrafter::Load(FixtureDir("dflash-tiny-a"), OnCuda());
  const std::unique_ptr<DFlashBlockDrafter> block = BlockDrafter(std::move(drafter), *target_);
  ASSERT_NE(block, nullptr);
  for (const int64_t prompt_length : {1, 40}) {
    const GenerationRequest request = Request(
        std::vector<int64_t>(ids_.begin(), ids_.begin() + prompt_length), /*max_new_tokens=*/32);
    const GenerationResult speculative =
        Speculative(*target_, *block, request, nullptr, nullptr,
                    {.block_size = 8, .window = 0, .min_confidence = 0});
    EXPECT_EQ(speculative.ids, TargetOnly(*target_, request).ids) << "prompt of " << prompt_length;
  }
}

// Lossless under load on the device: many requests at once on one speculative generator.
TEST_P(ModelOnCudaTest, GreedySpeculativeOutputInABatchIsTargetOnlys) {
  absl::StatusOr<model::DFlashDrafter> drafter =
      model::DFlashDrafter::Load(FixtureDir("dflash-tiny-a"), OnCuda());
  const std::unique_ptr<DFlashBlockDrafter> block = BlockDrafter(std::move(drafter), *target_);
  ASSERT_NE(block, nullptr);
  absl::StatusOr<Generator> speculative = Generator::Speculative(
      *target_, *block, nullptr, {.block_size = 8, .window = 0, .min_confidence = 0});
  ASSERT_TRUE(speculative.ok()) << speculative.status();
  ExpectRequestsAtOnceGetTargetOnlyOutput(*speculative);
}

// Decode steps and verify blocks replayed as CUDA graphs (ModelOptions::cuda_graphs) predict what
// forwards run as they are predict: a sequence alone (its first step runs as it is, its second is
// captured, the rest replay), batches that change, verify blocks rolled back to different lengths
// (whose accepted rows replay before the next graph); and eight requests at once on a target-only
// generator get the tokens each gets alone without graphs.
TEST_P(ModelOnCudaTest, StepsReplayedAsCudaGraphsPredictWhatEagerStepsDo) {
  absl::StatusOr<model::Qwen35Model> loaded =
      model::Qwen35Model::Load(FixtureDir(GetParam()), OnCuda(/*cuda_graphs=*/true));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const model::Qwen35Model& graphed = *loaded;
  struct Pair {
    model::Qwen35Cache eager, graphed;
  };
  std::vector<Pair> pairs;
  for (const int64_t prompt_length : {20, 31, 7}) {
    absl::StatusOr<model::Qwen35Cache> eager = target_->NewCache(128);
    absl::StatusOr<model::Qwen35Cache> replayed = graphed.NewCache(128);
    ASSERT_TRUE(eager.ok() && replayed.ok());
    const std::vector<int64_t> prompt(ids_.begin(), ids_.begin() + prompt_length);
    ASSERT_TRUE(target_->Prefill(prompt, *eager).ok() && graphed.Prefill(prompt, *replayed).ok());
    pairs.push_back({*std::move(eager), *std::move(replayed)});
  }
  double worst = 0;
  // Each of `batch` fed its next `rows` ids (a verify block when more than one), every row's
  // logits.
  const auto step = [&](const std::vector<size_t>& batch, int64_t rows) {
    const model::ForwardOptions all{.logit_rows = model::LogitRows::kAll, .hidden_states = {}};
    std::vector<model::SequenceInput> eager_batch, graphed_batch;
    for (const size_t i : batch) {
      const std::span<const int64_t> next(&ids_[pairs[i].eager.length()], rows);
      eager_batch.push_back(
          {.ids = next, .cache = &pairs[i].eager, .options = all, .keep_for_rollback = rows > 1});
      graphed_batch.push_back(
          {.ids = next, .cache = &pairs[i].graphed, .options = all, .keep_for_rollback = rows > 1});
    }
    absl::StatusOr<std::vector<model::ForwardOutput>> expected = target_->ForwardBatch(eager_batch);
    absl::StatusOr<std::vector<model::ForwardOutput>> actual = graphed.ForwardBatch(graphed_batch);
    ASSERT_TRUE(expected.ok() && actual.ok());
    for (size_t i = 0; i < batch.size(); ++i) {
      const at::Tensor want = (*expected)[i].logits.to(at::kCPU, at::kFloat);
      const at::Tensor got = (*actual)[i].logits.to(at::kCPU, at::kFloat);
      worst = std::max(worst, model::testing::MaxAbsDiff(got, want));
      EXPECT_TRUE(got.argmax(-1).equal(want.argmax(-1))) << "sequence " << batch[i];
    }
  };
  const auto rollback = [&](size_t i, int64_t accepted) {
    ASSERT_TRUE(pairs[i].eager.Rollback(accepted).ok());
    ASSERT_TRUE(pairs[i].graphed.Rollback(accepted).ok());
  };
  for (int i = 0; i < 4; ++i) step({0}, 1);
  for (int i = 0; i < 4; ++i) step({0, 1}, 1);
  for (const int64_t accepted : {2, 5, 0, 3}) {
    step({2, 0}, 5);
    rollback(2, accepted);
    rollback(0, 5 - accepted);
  }
  for (int i = 0; i < 4; ++i) step({2, 0, 1}, 1);
  std::cout << GetParam() << " on CUDA: graph-replayed steps vs eager, max |dlogit| " << worst
            << "\n";

  ExpectRequestsAtOnceGetTargetOnlyOutput(Generator(graphed, /*tokenizer=*/nullptr));
}

// With the target's decode steps and the drafter's blocks as CUDA graphs, greedy speculative output
// is still target-only output (without graphs), for a request alone and for eight at once.
TEST_P(ModelOnCudaTest, GreedySpeculativeOutputWithCudaGraphsIsTargetOnlys) {
  absl::StatusOr<model::Qwen35Model> target =
      model::Qwen35Model::Load(FixtureDir(GetParam()), OnCuda(/*cuda_graphs=*/true));
  ASSERT_TRUE(target.ok()) << target.status();
  const std::unique_ptr<DFlashBlockDrafter> block = BlockDrafter(
      model::DFlashDrafter::Load(FixtureDir("dflash-tiny-a"), OnCuda(/*cuda_graphs=*/true)),
      *target);
  ASSERT_NE(block, nullptr);
  absl::StatusOr<Generator> speculative = Generator::Speculative(
      *target, *block, nullptr, {.block_size = 8, .window = 0, .min_confidence = 0});
  ASSERT_TRUE(speculative.ok()) << speculative.status();
  const GenerationRequest request = Request(std::vector<int64_t>(ids_.begin(), ids_.begin() + 14),
                                            /*max_new_tokens=*/24);
  absl::StatusOr<GenerationResult> alone = speculative->Generate(request);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->ids, TargetOnly(*target_, request).ids);
  ExpectRequestsAtOnceGetTargetOnlyOutput(*speculative);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelOnCudaTest,
                         ::testing::Values("qwen35-tiny-a", "qwen35-tiny-a-w4a16"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "qwen35-tiny-a" ? std::string("Dense")
                                                                : std::string("W4A16");
                         });

}  // namespace
}  // namespace specd::engine::testing
