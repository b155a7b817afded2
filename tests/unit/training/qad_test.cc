// QAD on a tiny random teacher and its RTN W4A16 student: the distillation metric is zero for a
// model against itself, a short run lowers the validation KL and ships a W4A16 checkpoint that
// serves exactly the trained fake-quant function, and a student that is not W4A16 is refused.
#include "training/qad.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/model/synthetic/random_checkpoint.h"
#include "common/quantize/quantize_checkpoint.h"
#include "tests/support/odd_qwen35_shapes.h"
#include "tests/support/temp_dir.h"
#include "training/byte_tokenizer.h"
#include "training/parameter_io.h"

namespace specd::train {
namespace {

// The odd test shapes over the byte-level vocabulary, alternating DeltaNet and attention.
io::Qwen35TextConfig TinyConfig(int64_t layers) {
  io::Qwen35TextConfig config = specd::testing::OddQwen35Shapes();
  config.vocab_size = kByteLevelVocabSize;
  config.num_hidden_layers = layers;
  config.layer_types.clear();
  for (int64_t i = 0; i < layers; ++i) {
    config.layer_types.push_back(i % 2 == 0 ? io::LayerType::kLinearAttention
                                            : io::LayerType::kFullAttention);
  }
  config.eos_token_ids = {kByteLevelImEndId};
  return config;
}

std::vector<Conversation> Records() {
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog while the cat sleeps.",
      "Speculative decoding drafts a block of tokens and verifies them at once.",
      "A four-bit weight keeps one scale for every group of sixteen columns.",
      "Distillation matches the student's distribution to the teacher's.",
      "Gated DeltaNet layers keep a recurrent state instead of a growing cache.",
      "The optimizer keeps its moments in eight bits, block by block.",
      "Rounding to nearest puts every weight on the closest point of its grid.",
      "Packed sequences are cut from a stream of records separated by a token.",
      "Validation runs every few steps and the best model is kept on disk.",
      "A cosine schedule warms up linearly and then decays to zero.",
      "The straight-through estimator passes gradients through the rounding.",
      "Each epoch visits the training sequences in a fresh seeded order.",
  };
  std::vector<Conversation> records;
  for (const std::string& text : texts) records.push_back({.messages = {}, .text = text});
  return records;
}

model::Qwen35Model Load(const std::filesystem::path& dir, bool trainable) {
  absl::StatusOr<model::Qwen35Model> model =
      model::Qwen35Model::Load(dir, {.trainable = trainable});
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

class QadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(WriteModels(TinyConfig(2), teacher_dir(), student_dir()));
    ASSERT_TRUE(WriteByteLevelTokenizer(dir_.path() / "tokenizer").ok());
    absl::StatusOr<text::Tokenizer> tokenizer =
        text::Tokenizer::FromFile(dir_.path() / "tokenizer" / "tokenizer.json");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    const absl::Status packed = Pack(Records(), *tokenizer,
                                     {.sequence_length = 64,
                                      .validation_fraction = 0.25,
                                      .seed = 3,
                                      .flavor = text::ChatFlavor::kQwen3_5,
                                      .sequences_per_shard = 4096,
                                      .tokenizer_name = "bytes"},
                                     data_dir());
    ASSERT_TRUE(packed.ok()) << packed;
    absl::StatusOr<PackedDataset> data = PackedDataset::Open(data_dir());
    ASSERT_TRUE(data.ok()) << data.status();
    data_.emplace(*std::move(data));
  }

  // A random dense teacher and its RTN W4A16 (group 16) student.
  static void WriteModels(const io::Qwen35TextConfig& config, const std::filesystem::path& teacher,
                          const std::filesystem::path& student) {
    std::filesystem::create_directories(teacher);
    const absl::Status written =
        model::WriteRandomQwen35Checkpoint(teacher, config,
                                           {.layout = model::CheckpointLayout::kCausalLm,
                                            .seed = 7,
                                            .max_shard_bytes = std::numeric_limits<uint64_t>::max(),
                                            .dtype = io::DType::kF32,
                                            .quantization_config = nullptr});
    ASSERT_TRUE(written.ok()) << written;
    const absl::Status quantized = quant::QuantizeCheckpoint(
        teacher, student,
        {.rtn = {.group_size = 16, .symmetric = true, .scale_dtype = io::DType::kBF16},
         .ignore = quant::DefaultQuantizeIgnore(),
         .max_shard_bytes = uint64_t{2} << 30});
    ASSERT_TRUE(quantized.ok()) << quantized;
  }

  std::filesystem::path teacher_dir() const { return dir_.path() / "teacher"; }
  std::filesystem::path student_dir() const { return dir_.path() / "student"; }
  std::filesystem::path data_dir() const { return dir_.path() / "packed"; }
  std::filesystem::path run_dir() const { return dir_.path() / "run"; }

  QadOptions Options(int64_t steps) const {
    // The recipe's lr 2e-6 moves a real model's latent weights by a fraction of a grid step over
    // thousands of steps; this tiny random model has to cross grid points within a few dozen, so
    // it takes 1e-3 (AdamW's steps are about lr in size whatever the gradient's scale).
    QadOptions options{.teacher = teacher_dir(), .student = student_dir(), .data = data_dir()};
    options.loop.dir = run_dir();
    options.loop.steps = steps;
    options.loop.accumulation = 2;
    options.loop.lr = 1e-3;
    options.loop.warmup_ratio = 0.1;
    // Validating only before the first step and after the last makes the last step's model the
    // best one, the model the state/ directory holds too.
    options.loop.validate_every = 0;
    options.loop.save_every = 0;
    return options;
  }

  at::Tensor Logits(const model::Qwen35Model& model) const {
    const at::Tensor ids = data_->Get(Split::kValidation, 0).ids;
    const std::vector<int64_t> values(ids.data_ptr<int64_t>(),
                                      ids.data_ptr<int64_t>() + ids.numel());
    absl::StatusOr<model::Qwen35Cache> cache = model.NewCache(ids.numel());
    EXPECT_TRUE(cache.ok()) << cache.status();
    at::NoGradGuard no_grad;
    absl::StatusOr<model::ForwardOutput> output =
        model.Prefill(values, *cache, {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
    EXPECT_TRUE(output.ok()) << output.status();
    return output->logits;
  }

  specd::testing::TempDir dir_;
  std::optional<PackedDataset> data_;
};

TEST_F(QadTest, AModelAgainstItselfHasZeroKl) {
  const model::Qwen35Model teacher = Load(teacher_dir(), false);
  absl::StatusOr<DistillationMetrics> metrics =
      MeasureDistillation(teacher, teacher, *data_, Split::kValidation, 0);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NEAR(metrics->kl, 0, 1e-7);
  EXPECT_GT(metrics->tokens, 0);
  EXPECT_GT(metrics->perplexity, 1);
  EXPECT_NEAR(metrics->perplexity, std::exp(metrics->student_loss), 1e-9);

  const model::Qwen35Model student = Load(student_dir(), false);
  absl::StatusOr<DistillationMetrics> quantized =
      MeasureDistillation(teacher, student, *data_, Split::kValidation, 1);
  ASSERT_TRUE(quantized.ok()) << quantized.status();
  EXPECT_GT(quantized->kl, 0);
  EXPECT_LE(quantized->tokens, 64);
}

TEST_F(QadTest, AShortRunLowersTheKlAndShipsTheTrainedModelAsW4A16) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t steps = 30;
  absl::StatusOr<QadResult> result = RunQad(Options(steps));
  ASSERT_TRUE(result.ok()) << result.status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("QAD KL %.6f -> %.6f, perplexity %.3f -> %.3f, %.1f ms per step\n", result->before.kl,
              result->after.kl, result->before.perplexity, result->after.perplexity,
              1e3 * seconds / steps);
  EXPECT_GT(result->before.kl, 0);
  EXPECT_LT(result->after.kl, result->before.kl);
  EXPECT_EQ(result->before.tokens, result->after.tokens);
  EXPECT_EQ(result->checkpoint, run_dir() / "best");

  // The trained fake-quant student (the last step's state) and the served checkpoint compute the
  // same function, so the KL measured on the checkpoint is the run's.
  const model::Qwen35Model trained = Load(student_dir(), true);
  ASSERT_TRUE(
      LoadParameters(trained.parameters(), run_dir() / "state" / "parameters.safetensors").ok());
  const model::Qwen35Model served = Load(result->checkpoint, false);
  EXPECT_TRUE(at::allclose(Logits(served), Logits(trained), 1e-4, 1e-4));
  const model::Qwen35Model teacher = Load(teacher_dir(), false);
  absl::StatusOr<DistillationMetrics> measured =
      MeasureDistillation(teacher, served, *data_, Split::kValidation, 0);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_NEAR(measured->kl, result->after.kl, 1e-5);
  EXPECT_NEAR(measured->perplexity, result->after.perplexity, 1e-5 * result->after.perplexity);
}

TEST_F(QadTest, RefusesAStudentThatIsNotW4A16OrNotTheTeachersModel) {
  QadOptions dense = Options(1);
  dense.student = teacher_dir();
  EXPECT_EQ(RunQad(dense).status().code(), absl::StatusCode::kInvalidArgument);

  const std::filesystem::path deeper = dir_.path() / "deeper";
  ASSERT_NO_FATAL_FAILURE(WriteModels(TinyConfig(3), dir_.path() / "deeper-teacher", deeper));
  QadOptions other = Options(1);
  other.student = deeper;
  EXPECT_EQ(RunQad(other).status().code(), absl::StatusCode::kInvalidArgument);

  QadOptions no_steps = Options(0);
  EXPECT_EQ(RunQad(no_steps).status().code(), absl::StatusCode::kInvalidArgument);
  QadOptions no_batch = Options(1);
  no_batch.loop.accumulation = 0;
  EXPECT_EQ(RunQad(no_batch).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(run_dir()));
}

}  // namespace
}  // namespace specd::train
