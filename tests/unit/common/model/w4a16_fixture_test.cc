// The model serving the qwen35-tiny-a-w4a16 fixture (compressed-tensors pack-quantized INT4,
// group 32) against transformers' outputs computed with the dequantized weights
// (../shared/fixtures/README.md): prefill, decode steps, a verify block and a greedy
// continuation, with the quantized Linears run by the CPU kernel.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/io/checkpoint.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/json_file.h"
#include "common/io/quantization_config.h"
#include "common/io/safetensors_file.h"
#include "common/model/quantized_module_matcher.h"
#include "common/model/qwen35_model.h"
#include "common/model/weight_reader.h"
#include "gtest/gtest.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/vnni_gemm.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/common/model/tensor_matchers.h"
#include "tests/unit/common/model/tiny_fixture.h"

namespace specd::model {
namespace {

using testing::AllClose;
using testing::MaxAbsDiff;
using testing::ReferenceTensor;

constexpr char kFixture[] = "qwen35-tiny-a-w4a16";
constexpr double kTolerance = 2e-3;  // max |Δlogit|, as for the dense fixture
constexpr int64_t kSplit = 100;      // the reference prefills ids[:100] before decode and block
constexpr int64_t kBlockLength = 16;

std::filesystem::path FixtureDir() { return specd::testing::SharedDir() / "fixtures" / kFixture; }

ForwardOptions AllLogits() { return {.logit_rows = LogitRows::kAll, .hidden_states = {}}; }

QuantizedModuleMatcher FixtureQuantizedLinears() {
  absl::StatusOr<nlohmann::json> json = io::ReadJsonFile(FixtureDir() / "config.json");
  EXPECT_TRUE(json.ok()) << json.status();
  if (!json.ok()) return {};
  absl::StatusOr<std::optional<io::QuantizationConfig>> config =
      io::ParseQuantizationConfig(*json, "config.json");
  EXPECT_TRUE(config.ok() && config->has_value()) << config.status();
  if (!config.ok() || !config->has_value()) return {};
  absl::StatusOr<QuantizedModuleMatcher> linears = QuantizedModuleMatcher::FromConfig(*config);
  EXPECT_TRUE(linears.ok()) << linears.status();
  return linears.ok() ? *std::move(linears) : QuantizedModuleMatcher();
}

class W4A16FixtureTest : public testing::FixtureSuite {
 protected:
  static void SetUpTestSuite() { LoadFixture(kFixture); }

  // The fixture's prefill with the quantized Linears on `activations`: the share of argmax
  // predictions that agree with transformers' (printed with the largest |Δlogit| beside bf16
  // activations' throughout the model).
  static double PrefillAgreement(quant::Int4Activations activations) {
    absl::StatusOr<Qwen35Model> model =
        Qwen35Model::Load(FixtureDir(), {.int4_activations = activations});
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return 0;
    absl::StatusOr<Qwen35Cache> cache = model->NewCache(static_cast<int64_t>(ids_.size()));
    EXPECT_TRUE(cache.ok());
    if (!cache.ok()) return 0;
    absl::StatusOr<ForwardOutput> out = model->Prefill(ids_, *cache, AllLogits());
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return 0;
    const at::Tensor expected = ReferenceTensor(*reference_, "prefill_logits");
    const double agreement =
        out->logits.argmax(-1).eq(expected.argmax(-1)).to(at::kDouble).mean().item<double>();
    std::cout << quant::Int4ActivationsName(activations)
              << " INT4 activations: prefill max |dlogit| " << MaxAbsDiff(out->logits, expected)
              << " (logits span " << (expected.max() - expected.min()).item<double>()
              << "), argmax agreement " << agreement
              << " (bf16 activations throughout: " << Bfloat16PrefillAgreement(kFixture) << ")\n";
    return agreement;
  }
};

TEST_F(W4A16FixtureTest, PrefillLogitsMatchTransformers) {
  absl::StatusOr<ForwardOutput> out = model_->Prefill(ids_, *cache_, AllLogits());
  ASSERT_TRUE(out.ok()) << out.status();
  const at::Tensor expected = ReferenceTensor(*reference_, "prefill_logits");
  std::cout << "prefill max |dlogit| " << MaxAbsDiff(out->logits, expected) << "\n";
  EXPECT_TRUE(AllClose(out->logits, expected, kTolerance));
}

TEST_F(W4A16FixtureTest, DecodeStepsMatchTransformers) {
  const at::Tensor logits = DecodeStepLogits(kSplit);
  ASSERT_TRUE(logits.defined());
  const at::Tensor expected = ReferenceTensor(*reference_, "decode_logits");
  std::cout << "decode max |dlogit| " << MaxAbsDiff(logits, expected) << "\n";
  EXPECT_TRUE(AllClose(logits, expected, kTolerance));
}

TEST_F(W4A16FixtureTest, VerifyBlockMatchesTransformers) {
  ASSERT_TRUE(model_->Prefill(Ids(0, kSplit), *cache_).ok());
  absl::StatusOr<ForwardOutput> block =
      model_->ForwardBlock(Ids(kSplit, kSplit + kBlockLength), *cache_, AllLogits());
  ASSERT_TRUE(block.ok()) << block.status();
  const at::Tensor expected = ReferenceTensor(*reference_, "block_logits");
  std::cout << "block max |dlogit| " << MaxAbsDiff(block->logits, expected) << "\n";
  EXPECT_TRUE(AllClose(block->logits, expected, kTolerance));
}

TEST_F(W4A16FixtureTest, GreedyContinuationMatchesTransformers) {
  const std::vector<int64_t> expected = ReferenceIds("greedy_ids");
  EXPECT_EQ(GreedyContinuation(Ids(0, 40), expected.size()), expected);
}

// W4A8 (int8 activations) is not exact, and this fixture's random weights amplify any rounding:
// measured, max |Δlogit| 16 of a span of 74 and 89 % of the argmax predictions kept, where bf16
// activations keep 98 % (Q8_0-style blocks of 32 round about four times coarser than bf16 on
// Gaussian activations). The check is that it stays there; the op's own error on random data is
// BackendOpsTest.Int4ProjectionOnInt8Activations's.
TEST_F(W4A16FixtureTest, Int8ActivationsKeepMostPredictions) {
  if (kernels::cpu::BestVnniGemmIsa() == kernels::cpu::VnniGemmIsa::kNone) {
    GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  }
  EXPECT_GE(PrefillAgreement(quant::Int4Activations::kInt8), 0.85);
}

// bf16 activations into the INT4 projections alone (the rest of the model in float32): measured,
// max |Δlogit| 2.6 of the span of 74 and 97 % of the argmax predictions kept, about what bf16
// activations throughout the model keep (98 %).
TEST_F(W4A16FixtureTest, Bf16ActivationsKeepNearlyEveryPrediction) {
  if (!kernels::cpu::CpuHasBf16Gemm()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  EXPECT_GE(PrefillAgreement(quant::Int4Activations::kBf16), 0.95);
}

TEST(W4A16LinearsTest, ConfigSelectsEveryLinearButTheIgnoredOnes) {
  const QuantizedModuleMatcher linears = FixtureQuantizedLinears();
  EXPECT_TRUE(linears.Contains("model.layers.0.linear_attn.in_proj_qkv"));
  EXPECT_TRUE(linears.Contains("model.layers.3.self_attn.o_proj"));
  EXPECT_TRUE(linears.Contains("model.layers.2.mlp.down_proj"));
  EXPECT_FALSE(linears.Contains("model.layers.0.linear_attn.in_proj_a"));
  EXPECT_FALSE(linears.Contains("model.layers.1.linear_attn.in_proj_b"));
  EXPECT_FALSE(linears.Contains("lm_head"));
}

TEST(W4A16LinearsTest, QuantizedLinearIsNotHeldDense) {
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(FixtureDir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  WeightReader reader(*checkpoint, "model.", {}, FixtureQuantizedLinears());
  const Linear up = reader.Projection("layers.0.mlp.up_proj", 128, 64);
  const Linear a = reader.Projection("layers.0.linear_attn.in_proj_a", 4, 64);
  ASSERT_TRUE(reader.status().ok()) << reader.status();
  EXPECT_TRUE(up.quantized());
  EXPECT_FALSE(up.weight().defined());
  EXPECT_EQ(up.out_features(), 128);
  EXPECT_EQ(up.in_features(), 64);
  EXPECT_FALSE(a.quantized());
  EXPECT_TRUE(a.weight().defined());
  // The kernel's product equals the dequantized weight's to float32 rounding.
  const at::Tensor x = at::randn({3, 64});
  const at::Tensor y = up.Forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 128}));
  EXPECT_TRUE(AllClose(y[1], up.Forward(x[1]), 1e-4));
}

// bfloat16 activations run the same float32 kernel, rounded at its edges (checked on
// predictions, as for the dense fixture).
TEST_F(W4A16FixtureTest, Bfloat16ActivationsPredictLikeFloat32) {
  EXPECT_GE(Bfloat16PrefillAgreement(kFixture), 0.9);
}

TEST(W4A16LinearsTest, MissingScaleIsAnErrorNamingTheTensor) {
  const std::string missing = "model.layers.2.mlp.gate_proj.weight_scale";
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(FixtureDir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  std::vector<io::TensorView> kept;
  for (const io::TensorView& tensor : checkpoint->tensors()) {
    if (tensor.name != missing) kept.push_back(tensor);
  }
  ASSERT_EQ(kept.size() + 1, checkpoint->tensors().size());
  specd::testing::TempDir dir;
  std::filesystem::copy_file(FixtureDir() / "config.json", dir.path() / "config.json");
  ASSERT_TRUE(io::WriteCheckpointTensors(dir.path(), kept, uint64_t{1} << 30).ok());
  absl::StatusOr<Qwen35Model> model = Qwen35Model::Load(dir.path());
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find(missing), std::string::npos) << model.status();
}

}  // namespace
}  // namespace specd::model
