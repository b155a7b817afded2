// AWQ on Qwen3.5: its folds leave the dense model computing the same function, its scales give
// INT4 weights a lower error than round-to-nearest on the calibration data, and bad calibration
// input is refused with an error that says what is wrong.
#include "common/quantize/awq.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/io/checkpoint.h"
#include "common/io/checkpoint_writer.h"
#include "common/model/qwen35_model.h"
#include "common/model/synthetic/random_checkpoint.h"
#include "common/model/weight_reader.h"
#include "common/quantize/quantize_checkpoint.h"
#include "common/text/tokenizer.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/common/text/tiny_tokenizer_json.h"

namespace specd::quant {
namespace {

namespace fs = std::filesystem;
using io::LayerType;
using ::specd::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int64_t kGroupSize = 32;

fs::path FixtureDir(const std::string& name) {
  return ::specd::testing::SharedDir() / "fixtures" / name;
}

// Gated DeltaNet and full attention without GQA (so v_proj → o_proj folds too), in the
// multimodal layout.
io::Qwen35TextConfig MhaShapes() {
  io::Qwen35TextConfig config;
  config.vocab_size = 256;
  config.hidden_size = 64;
  config.intermediate_size = 128;
  config.num_hidden_layers = 4;
  config.layer_types = {LayerType::kLinearAttention, LayerType::kFullAttention,
                        LayerType::kLinearAttention, LayerType::kFullAttention};
  config.num_attention_heads = 4;
  config.num_key_value_heads = 4;
  config.head_dim = 16;
  config.linear_num_key_heads = 2;
  config.linear_num_value_heads = 4;
  config.linear_key_head_dim = 16;
  config.linear_value_head_dim = 16;
  config.linear_conv_kernel_dim = 4;
  config.rms_norm_eps = 1e-6;
  config.rope_theta = 1e7;
  config.partial_rotary_factor = 0.25;
  config.max_position_embeddings = 1024;
  config.tie_word_embeddings = false;
  config.eos_token_ids = {1};
  return config;
}

at::Tensor ReadFloat32(const io::Checkpoint& checkpoint, const std::string& name) {
  absl::StatusOr<const io::TensorView*> view = checkpoint.Get(name);
  EXPECT_TRUE(view.ok()) << view.status();
  if (!view.ok()) return at::Tensor();
  absl::StatusOr<at::Tensor> tensor = model::TensorFromView(**view, at::kFloat, at::kCPU);
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return tensor.ok() ? *tensor : at::Tensor();
}

// `from`'s checkpoint, with the tensor `replace` returns (if defined) in place of each one.
void WriteCopy(
    const fs::path& from, const fs::path& to,
    const std::function<at::Tensor(const io::Checkpoint&, const io::TensorView&)>& replace) {
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(from);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  std::vector<at::Tensor> replacements;  // alive until written
  std::vector<io::TensorView> views;
  for (const io::TensorView& view : checkpoint->tensors()) {
    at::Tensor tensor = replace(*checkpoint, view);
    if (!tensor.defined()) {
      views.push_back(view);
      continue;
    }
    replacements.push_back(tensor.to(at::kFloat).contiguous());
    const at::Tensor& t = replacements.back();
    views.push_back({.name = view.name,
                     .dtype = io::DType::kF32,
                     .shape = view.shape,
                     .bytes = {static_cast<const std::byte*>(t.data_ptr()), t.nbytes()},
                     .owner = nullptr});
  }
  fs::create_directories(to);
  const absl::Status written = io::WriteCheckpointTensors(to, views, UINT64_MAX);
  ASSERT_TRUE(written.ok()) << written;
  fs::copy_file(from / "config.json", to / "config.json");
}

// The checkpoint with AWQ's overrides in place of the tensors they name.
void WriteFolded(const fs::path& from, const fs::path& to, const WeightOverrides& overrides) {
  WriteCopy(from, to, [&](const io::Checkpoint&, const io::TensorView& view) {
    const auto found = overrides.find(view.name);
    return found == overrides.end() ? at::Tensor() : found->second;
  });
}

// A random MHA checkpoint whose layer norms boost a few channels sixteenfold: the activation
// outliers of real LLMs, which round-to-nearest quantizes poorly.
fs::path WriteOutlierModel(const fs::path& root) {
  const fs::path random = root / "random";
  fs::create_directories(random);
  model::RandomCheckpointOptions options;
  options.layout = model::CheckpointLayout::kConditionalGeneration;
  options.seed = 7;
  const absl::Status status = model::WriteRandomQwen35Checkpoint(random, MhaShapes(), options);
  EXPECT_TRUE(status.ok()) << status;
  const fs::path outliers = root / "outliers";
  WriteCopy(random, outliers, [](const io::Checkpoint& checkpoint, const io::TensorView& view) {
    if (!view.name.ends_with("layernorm.weight")) return at::Tensor();
    at::Tensor w = ReadFloat32(checkpoint, view.name).clone();
    for (const int64_t channel : {5, 21, 46}) w[channel] = 15.0;  // 1 + w = 16
    return w;
  });
  return outliers;
}

std::vector<std::vector<int32_t>> RandomIds(int64_t sequences, int64_t length, int64_t vocab) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<std::vector<int32_t>> ids(sequences, std::vector<int32_t>(length));
  for (std::vector<int32_t>& sequence : ids) {
    for (int32_t& token : sequence) token = id(rng);
  }
  return ids;
}

struct ModelOutputs {
  at::Tensor logits;                      // [T, vocab]
  std::vector<at::Tensor> layer_outputs;  // hidden_states[1..L], the last after the final norm
};

ModelOutputs RunModel(const fs::path& dir, const std::vector<int32_t>& sequence) {
  absl::StatusOr<model::Qwen35Model> model = model::Qwen35Model::Load(dir);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  model::ForwardOptions options{.logit_rows = model::LogitRows::kAll, .hidden_states = {}};
  for (int64_t i = 1; i <= model->config().num_hidden_layers; ++i) {
    options.hidden_states.push_back(i);
  }
  absl::StatusOr<model::Qwen35Cache> cache = model->NewCache(sequence.size());
  EXPECT_TRUE(cache.ok()) << cache.status();
  const std::vector<int64_t> ids(sequence.begin(), sequence.end());
  absl::StatusOr<model::ForwardOutput> output = model->Prefill(ids, *cache, options);
  EXPECT_TRUE(output.ok()) << output.status();
  if (!output.ok()) return {};
  return {output->logits, output->hidden_states};
}

double RelativeMaxDiff(const at::Tensor& actual, const at::Tensor& expected) {
  return (actual - expected).abs().max().item<double>() / expected.abs().max().item<double>();
}

// Mean squared error of each decoder layer's output against the dense model's, summed over the
// calibration sequences.
std::vector<double> LayerErrors(const fs::path& dense, const fs::path& quantized,
                                const std::vector<std::vector<int32_t>>& calibration) {
  std::vector<double> errors;
  for (const std::vector<int32_t>& sequence : calibration) {
    const ModelOutputs expected = RunModel(dense, sequence);
    const ModelOutputs actual = RunModel(quantized, sequence);
    errors.resize(expected.layer_outputs.size());
    for (size_t i = 0; i < errors.size(); ++i) {
      errors[i] += (actual.layer_outputs[i] - expected.layer_outputs[i])
                       .square()
                       .mean(at::kDouble)
                       .item<double>();
    }
  }
  return errors;
}

double Sum(const std::vector<double>& values) {
  double sum = 0;
  for (const double v : values) sum += v;
  return sum;
}

std::vector<std::string> SmoothLayers(const AwqResult& result) {
  std::vector<std::string> names;
  for (const AwqMapping& mapping : result.mappings) names.push_back(mapping.smooth);
  return names;
}

AwqOptions Options(bool symmetric) {
  AwqOptions options;
  options.rtn = {.group_size = kGroupSize, .symmetric = symmetric, .scale_dtype = io::DType::kBF16};
  return options;
}

TEST(AwqTest, MapsEachNormToTheLinearsReadingItAndValuesToOutputsOnlyWithoutGqa) {
  const std::vector<std::vector<int32_t>> calibration = RandomIds(2, 16, 256);
  TempDir dir;
  const absl::StatusOr<AwqResult> mha =
      ComputeAwqOverrides(WriteOutlierModel(dir.path()), Options(false), calibration);
  ASSERT_TRUE(mha.ok()) << mha.status();
  const std::string deltanet = "model.language_model.layers.0.";
  const std::string attention = "model.language_model.layers.1.";
  ASSERT_GE(mha->mappings.size(), 6u);
  EXPECT_EQ(mha->mappings[0].smooth, deltanet + "input_layernorm");
  EXPECT_THAT(mha->mappings[0].balance, ElementsAre(deltanet + "linear_attn.in_proj_qkv",
                                                    deltanet + "linear_attn.in_proj_z"));
  EXPECT_EQ(mha->mappings[1].smooth, deltanet + "post_attention_layernorm");
  EXPECT_THAT(mha->mappings[1].balance,
              ElementsAre(deltanet + "mlp.gate_proj", deltanet + "mlp.up_proj"));
  EXPECT_EQ(mha->mappings[2].smooth, deltanet + "mlp.up_proj");
  EXPECT_THAT(mha->mappings[2].balance, ElementsAre(deltanet + "mlp.down_proj"));
  EXPECT_EQ(mha->mappings[3].smooth, attention + "input_layernorm");
  EXPECT_THAT(mha->mappings[3].balance,
              ElementsAre(attention + "self_attn.q_proj", attention + "self_attn.k_proj",
                          attention + "self_attn.v_proj"));
  EXPECT_EQ(mha->mappings[4].smooth, attention + "self_attn.v_proj");
  EXPECT_THAT(mha->mappings[4].balance, ElementsAre(attention + "self_attn.o_proj"));
  EXPECT_EQ(mha->mappings.size(), 14u);  // 3 per layer, plus v_proj → o_proj in the two MHA ones

  // The tiny fixture's attention has 4 query heads on 2 KV heads.
  const absl::StatusOr<AwqResult> gqa =
      ComputeAwqOverrides(FixtureDir("qwen35-tiny-a"), Options(false), calibration);
  ASSERT_TRUE(gqa.ok()) << gqa.status();
  EXPECT_EQ(gqa->mappings.size(), 12u);
  EXPECT_THAT(SmoothLayers(*gqa), Not(::testing::Contains(HasSubstr("v_proj"))));
}

TEST(AwqTest, FoldedScalesAloneLeaveTheDenseModelsLogitsUnchanged) {
  TempDir dir;
  const fs::path outliers = WriteOutlierModel(dir.path());
  const std::vector<std::vector<int32_t>> calibration = RandomIds(4, 32, 256);
  for (const fs::path& model : {outliers, FixtureDir("qwen35-tiny-a")}) {
    SCOPED_TRACE(model.string());
    const absl::StatusOr<AwqResult> awq = ComputeAwqOverrides(model, Options(false), calibration);
    ASSERT_TRUE(awq.ok()) << awq.status();
    ASSERT_THAT(awq->overrides, Not(IsEmpty()));
    const fs::path folded = dir.path() / ("folded-" + model.filename().string());
    WriteFolded(model, folded, awq->overrides);

    const std::vector<int32_t> held_out = RandomIds(5, 40, 256).back();
    const ModelOutputs dense = RunModel(model, held_out);
    const ModelOutputs after = RunModel(folded, held_out);
    ASSERT_TRUE(dense.logits.defined() && after.logits.defined());
    const double diff = RelativeMaxDiff(after.logits, dense.logits);
    RecordProperty("relative_logit_diff_" + model.filename().string(), std::to_string(diff));
    EXPECT_LE(diff, 1e-4);
  }
}

TEST(AwqTest, DeltaNetDecayAndBetaProjectionsAreCompensatedNotSearched) {
  TempDir dir;
  const fs::path outliers = WriteOutlierModel(dir.path());
  const absl::StatusOr<AwqResult> awq =
      ComputeAwqOverrides(outliers, Options(false), RandomIds(4, 32, 256));
  ASSERT_TRUE(awq.ok()) << awq.status();
  ASSERT_TRUE(awq->mappings[0].ratio.has_value()) << "the outliers should call for a scale";
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(outliers);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const std::string p = "model.language_model.layers.0.";
  const at::Tensor norm = ReadFloat32(*checkpoint, p + "input_layernorm.weight");
  ASSERT_EQ(awq->overrides.count(p + "input_layernorm.weight"), 1u);
  const at::Tensor folded_norm = awq->overrides.at(p + "input_layernorm.weight");
  const at::Tensor s = (norm + 1) / (folded_norm + 1);
  for (const char* name : {"in_proj_a", "in_proj_b", "in_proj_qkv", "in_proj_z"}) {
    SCOPED_TRACE(name);
    const std::string weight = p + "linear_attn." + name + ".weight";
    ASSERT_EQ(awq->overrides.count(weight), 1u);
    EXPECT_TRUE(
        at::allclose(awq->overrides.at(weight), ReadFloat32(*checkpoint, weight) * s, 1e-5, 1e-6));
  }
  EXPECT_EQ(awq->overrides.count(p + "linear_attn.out_proj.weight"), 0u)
      << "out_proj follows a norm shared by all heads and cannot take a per-channel scale";
}

TEST(AwqTest, LowersTheInt4ErrorBelowRoundToNearestOnTheCalibrationData) {
  TempDir dir;
  const fs::path outliers = WriteOutlierModel(dir.path());
  const std::vector<std::vector<int32_t>> calibration = RandomIds(4, 32, 256);
  for (const bool symmetric : {false, true}) {
    SCOPED_TRACE(symmetric ? "symmetric" : "asymmetric");
    const AwqOptions options = Options(symmetric);
    const absl::StatusOr<AwqResult> awq = ComputeAwqOverrides(outliers, options, calibration);
    ASSERT_TRUE(awq.ok()) << awq.status();

    // The search's own measure, per mapping: the balance Linears' output error.
    double rtn_total = 0, awq_total = 0;
    for (const AwqMapping& mapping : awq->mappings) {
      EXPECT_LE(mapping.awq_error, mapping.rtn_error) << mapping.smooth;
      rtn_total += mapping.rtn_error;
      awq_total += mapping.awq_error;
    }
    EXPECT_LT(awq_total, rtn_total);
    RecordProperty(symmetric ? "sym_mapping_error_rtn" : "asym_mapping_error_rtn",
                   std::to_string(rtn_total));
    RecordProperty(symmetric ? "sym_mapping_error_awq" : "asym_mapping_error_awq",
                   std::to_string(awq_total));

    // Measured on the W4A16 checkpoints themselves: every decoder layer's output against dense.
    const fs::path rtn_model = dir.path() / ("rtn-" + std::to_string(symmetric));
    const fs::path awq_model = dir.path() / ("awq-" + std::to_string(symmetric));
    QuantizeOptions quantize;
    quantize.rtn = options.rtn;
    const absl::Status rtn_written = QuantizeCheckpoint(outliers, rtn_model, quantize);
    ASSERT_TRUE(rtn_written.ok()) << rtn_written;
    const absl::Status awq_written =
        QuantizeCheckpoint(outliers, awq_model, quantize, {}, &awq->overrides);
    ASSERT_TRUE(awq_written.ok()) << awq_written;
    const std::vector<double> rtn_errors = LayerErrors(outliers, rtn_model, calibration);
    const std::vector<double> awq_errors = LayerErrors(outliers, awq_model, calibration);
    EXPECT_LT(Sum(awq_errors), Sum(rtn_errors));
    RecordProperty(symmetric ? "sym_layer_error_rtn" : "asym_layer_error_rtn",
                   std::to_string(Sum(rtn_errors)));
    RecordProperty(symmetric ? "sym_layer_error_awq" : "asym_layer_error_awq",
                   std::to_string(Sum(awq_errors)));
  }
}

TEST(AwqTest, ReportsProgressAfterEachCalibrationSequenceAndEachMapping) {
  std::vector<std::pair<int64_t, int64_t>> calls;
  const absl::StatusOr<AwqResult> awq =
      ComputeAwqOverrides(FixtureDir("qwen35-tiny-a"), Options(false), RandomIds(3, 8, 256),
                          [&](int64_t done, int64_t total) { calls.emplace_back(done, total); });
  ASSERT_TRUE(awq.ok()) << awq.status();
  const int64_t steps = 3 + 12;
  ASSERT_EQ(calls.size(), static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) EXPECT_EQ(calls[i], std::make_pair(i + 1, steps));
}

TEST(AwqTest, RefusesMissingEmptyOrOutOfVocabularyCalibration) {
  const fs::path model = FixtureDir("qwen35-tiny-a");  // vocabulary of 320
  const auto error = [&](const std::vector<std::vector<int32_t>>& ids) {
    return ComputeAwqOverrides(model, Options(false), ids).status();
  };
  EXPECT_THAT(error({}).message(), HasSubstr("calibration sequences"));
  EXPECT_THAT(error({{1, 2, 3}, {}}).message(), HasSubstr("calibration sequence 1 is empty"));
  const absl::Status outside = error({{1, 2, 3}, {4, 320}});
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outside.message(),
              HasSubstr("sequence 1, token 1: id 320 is outside the model's vocabulary [0, 320)"));
}

TEST(AwqTest, RefusesAQuantizedCheckpointAGroupSizeThatDoesNotFitAndAnEmptyGrid) {
  const std::vector<std::vector<int32_t>> calibration = {{1, 2, 3, 4}};
  const absl::Status quantized =
      ComputeAwqOverrides(FixtureDir("qwen35-tiny-a-w4a16"), Options(false), calibration).status();
  EXPECT_EQ(quantized.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(quantized.message(), HasSubstr("already quantized"));

  AwqOptions wide = Options(false);
  wide.rtn.group_size = 48;  // the tiny model's Linears read 64 or 128 features
  const absl::Status group =
      ComputeAwqOverrides(FixtureDir("qwen35-tiny-a"), wide, calibration).status();
  EXPECT_THAT(group.message(), HasSubstr("model.layers.0.linear_attn.in_proj_qkv"));
  EXPECT_THAT(group.message(), HasSubstr("group size 48"));

  AwqOptions no_grid = Options(false);
  no_grid.grid_points = 0;
  EXPECT_EQ(ComputeAwqOverrides(FixtureDir("qwen35-tiny-a"), no_grid, calibration).status().code(),
            absl::StatusCode::kInvalidArgument);
}

class ReadCalibrationTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() / "tokenizer.json") << text::TinyTokenizerJson().dump();
  }
  fs::path WriteText(const std::string& text) {
    const fs::path path = dir_.path() / "calibration.txt";
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  TempDir dir_;
};

TEST_F(ReadCalibrationTextTest, CutsTheTokenizedTextIntoSequencesOfSeqLenUpToSamples) {
  const std::string text = "the quick brown fox jumps over the lazy dog, again and again.";
  absl::StatusOr<text::Tokenizer> tokenizer =
      text::Tokenizer::FromFile(dir_.path() / "tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_GT(ids->size(), 24u);
  const auto piece = [&](size_t begin, size_t end) {
    return std::vector<int32_t>(ids->begin() + begin, ids->begin() + std::min(end, ids->size()));
  };

  absl::StatusOr<std::vector<std::vector<int32_t>>> capped =
      ReadCalibrationText(WriteText(text), dir_.path(), 8, 3);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_THAT(*capped, ElementsAre(piece(0, 8), piece(8, 16), piece(16, 24)));

  absl::StatusOr<std::vector<std::vector<int32_t>>> all =
      ReadCalibrationText(WriteText(text), dir_.path(), 20, 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), (ids->size() + 19) / 20);
  EXPECT_EQ(all->back(), piece(20 * (all->size() - 1), ids->size()));  // the rest, shorter
}

TEST_F(ReadCalibrationTextTest, AnEmptyOrMissingFileOrTokenizerIsAnError) {
  const absl::Status empty = ReadCalibrationText(WriteText(""), dir_.path(), 8, 3).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("is empty"));

  const absl::Status missing =
      ReadCalibrationText(dir_.path() / "absent.txt", dir_.path(), 8, 3).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("absent.txt"));

  const fs::path no_tokenizer = dir_.path() / "model";
  fs::create_directories(no_tokenizer);
  const absl::Status tokenizer =
      ReadCalibrationText(WriteText("some text"), no_tokenizer, 8, 3).status();
  EXPECT_EQ(tokenizer.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tokenizer.message(), HasSubstr("tokenizer.json"));

  EXPECT_EQ(ReadCalibrationText(WriteText("text"), dir_.path(), 0, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd::quant
