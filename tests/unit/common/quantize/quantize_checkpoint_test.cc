// QuantizeCheckpoint on the qwen35-tiny-a fixture and on random checkpoints of the multimodal
// layout: what it writes, that this project loads it and computes nearly the dense model's
// logits, and what it refuses.
#include "common/quantize/quantize_checkpoint.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "common/int4/float_encoding.h"
#include "common/int4/pack_quantized_io.h"
#include "common/io/checkpoint.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/json_file.h"
#include "common/io/safetensors_file.h"
#include "common/model/qwen35_model.h"
#include "common/model/synthetic/random_checkpoint.h"
#include "tests/support/odd_qwen35_shapes.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::quant {
namespace {

using ::specd::model::testing::AllClose;
using ::specd::model::testing::ReferenceTensor;
using ::testing::HasSubstr;

std::filesystem::path FixtureDir(const std::string& name) {
  return specd::testing::SharedDir() / "fixtures" / name;
}

QuantizeOptions Rtn(int64_t group_size, bool symmetric) {
  return {.rtn = {.group_size = group_size, .symmetric = symmetric, .scale_dtype = io::DType::kF32},
          .ignore = DefaultQuantizeIgnore(),
          .max_shard_bytes = uint64_t{1} << 30};
}

io::Checkpoint Open(const std::filesystem::path& dir) {
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  return *std::move(checkpoint);
}

nlohmann::json ReadJson(const std::filesystem::path& path) {
  absl::StatusOr<nlohmann::json> json = io::ReadJsonFile(path);
  EXPECT_TRUE(json.ok()) << json.status();
  return json.ok() ? *json : nlohmann::json();
}

bool SameTensor(const io::TensorView& a, const io::TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape &&
         std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin(), b.bytes.end());
}

// The quantized Linears of the text model: every weight of the attention, DeltaNet and MLP
// projections but in_proj_a/in_proj_b, which the default ignore list keeps dense.
bool IsQuantizedByDefault(const std::string& name) {
  return name.ends_with("_proj.weight") || name.ends_with("in_proj_qkv.weight") ||
         name.ends_with("in_proj_z.weight");
}

std::vector<int64_t> Ids(const at::Tensor& ids) {
  return {ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel()};
}

at::Tensor PrefillLogits(const std::filesystem::path& dir, const std::vector<int64_t>& ids) {
  absl::StatusOr<model::Qwen35Model> model = model::Qwen35Model::Load(dir);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return at::Tensor();
  absl::StatusOr<model::Qwen35Cache> cache = model->NewCache(static_cast<int64_t>(ids.size()));
  absl::StatusOr<model::ForwardOutput> out =
      model->Prefill(ids, *cache, {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->logits : at::Tensor();
}

// ‖actual − expected‖ / ‖expected‖ over all elements.
double RelativeError(const at::Tensor& actual, const at::Tensor& expected) {
  return ((actual - expected).norm() / expected.norm()).item<double>();
}

// The share of rows whose largest logit is at the same index: the greedy next tokens.
double ArgmaxAgreement(const at::Tensor& a, const at::Tensor& b) {
  return a.argmax(-1).eq(b.argmax(-1)).to(at::kDouble).mean().item<double>();
}

TEST(QuantizeCheckpointTest, QuantizesTheTextLinearsAndCopiesEveryOtherTensorUnchanged) {
  specd::testing::TempDir out;
  std::vector<QuantizeProgress> progress;
  const absl::Status status =
      QuantizeCheckpoint(FixtureDir("qwen35-tiny-a"), out.path(), Rtn(32, true),
                         [&](const QuantizeProgress& p) { progress.push_back(p); });
  ASSERT_TRUE(status.ok()) << status;

  const io::Checkpoint dense = Open(FixtureDir("qwen35-tiny-a"));
  const io::Checkpoint quantized = Open(out.path());
  ASSERT_EQ(progress.size(), dense.tensors().size());
  int64_t quantized_count = 0;
  for (size_t i = 0; i < progress.size(); ++i) {
    const io::TensorView& source = dense.tensors()[i];
    EXPECT_EQ(progress[i].done, static_cast<int64_t>(i + 1));
    EXPECT_EQ(progress[i].total, static_cast<int64_t>(dense.tensors().size()));
    EXPECT_EQ(progress[i].name, source.name);
    EXPECT_EQ(progress[i].quantized, IsQuantizedByDefault(source.name)) << source.name;
    if (progress[i].quantized) {
      ++quantized_count;
      const std::string linear = source.name.substr(0, source.name.size() - 7);
      EXPECT_EQ(quantized.Find(source.name), nullptr) << source.name << " is also kept dense";
      EXPECT_NE(quantized.Find(linear + ".weight_packed"), nullptr) << linear;
      EXPECT_EQ(quantized.Find(linear + ".weight_zero_point"), nullptr) << "symmetric";
      EXPECT_EQ((*quantized.Get(linear + ".weight_scale"))->dtype, io::DType::kF32);
    } else {
      const io::TensorView* copy = quantized.Find(source.name);
      ASSERT_NE(copy, nullptr) << source.name;
      EXPECT_TRUE(SameTensor(*copy, source)) << source.name;
    }
  }
  EXPECT_EQ(quantized_count, 25);  // as in the qwen35-tiny-a-w4a16 fixture
  EXPECT_NE(dense.Find("model.layers.0.linear_attn.in_proj_a.weight"), nullptr);
  EXPECT_NE(quantized.Find("model.layers.0.linear_attn.in_proj_a.weight"), nullptr);
}

TEST(QuantizeCheckpointTest, ConfigIsTheInputsPlusACompressedTensorsBlockTheModelLoads) {
  specd::testing::TempDir out;
  ASSERT_TRUE(QuantizeCheckpoint(FixtureDir("qwen35-tiny-a"), out.path(), Rtn(16, false)).ok());
  nlohmann::json config = ReadJson(out.path() / "config.json");
  const nlohmann::json block = config["quantization_config"];
  EXPECT_EQ(block, CompressedTensorsConfig(Rtn(16, false).rtn, DefaultQuantizeIgnore()));
  EXPECT_EQ(block["quant_method"], "compressed-tensors");
  EXPECT_EQ(block["format"], "pack-quantized");
  EXPECT_EQ(block["quantization_status"], "compressed");
  EXPECT_EQ(block["kv_cache_scheme"], nullptr);
  const nlohmann::json& group = block["config_groups"]["group_0"];
  EXPECT_EQ(group["targets"], nlohmann::json::array({"Linear"}));
  EXPECT_EQ(group["weights"]["num_bits"], 4);
  EXPECT_EQ(group["weights"]["type"], "int");
  EXPECT_EQ(group["weights"]["symmetric"], false);
  EXPECT_EQ(group["weights"]["strategy"], "group");
  EXPECT_EQ(group["weights"]["group_size"], 16);
  EXPECT_EQ(group["weights"]["dynamic"], false);
  EXPECT_EQ(group["weights"]["actorder"], nullptr);
  EXPECT_EQ(group["weights"]["observer"], "minmax");
  EXPECT_EQ(block["ignore"], nlohmann::json(DefaultQuantizeIgnore()));
  config.erase("quantization_config");
  EXPECT_EQ(config, ReadJson(FixtureDir("qwen35-tiny-a") / "config.json"));

  const nlohmann::json channel = CompressedTensorsConfig(
      {.group_size = 0, .symmetric = true, .scale_dtype = io::DType::kBF16}, {"lm_head"});
  EXPECT_EQ(channel["config_groups"]["group_0"]["weights"]["strategy"], "channel");
  EXPECT_EQ(channel["config_groups"]["group_0"]["weights"]["group_size"], nullptr);
  EXPECT_EQ(channel["ignore"], nlohmann::json::array({"lm_head"}));
}

TEST(QuantizeCheckpointTest, PackedTensorsAreQuantizeRtnOfTheSourceWeights) {
  const io::Checkpoint dense = Open(FixtureDir("qwen35-tiny-a"));
  for (const QuantizeOptions& options : {Rtn(32, true), Rtn(16, false), Rtn(0, false)}) {
    specd::testing::TempDir out;
    ASSERT_TRUE(QuantizeCheckpoint(FixtureDir("qwen35-tiny-a"), out.path(), options).ok());
    const io::Checkpoint quantized = Open(out.path());
    for (const io::TensorView& source : dense.tensors()) {
      if (!IsQuantizedByDefault(source.name)) continue;
      const std::string linear = source.name.substr(0, source.name.size() - 7);
      absl::StatusOr<PackedInt4Weight> written = LoadPackedInt4Weight(quantized, linear);
      ASSERT_TRUE(written.ok()) << written.status();
      absl::StatusOr<PackedInt4Weight> expected =
          QuantizeRtn(*DecodeFloats(source), source.shape[0], source.shape[1], options.rtn);
      ASSERT_TRUE(expected.ok()) << expected.status();
      EXPECT_EQ(written->packed, expected->packed) << linear;
      EXPECT_EQ(written->grid.group_size, expected->grid.group_size) << linear;
      EXPECT_EQ(written->grid.scales, expected->grid.scales) << linear;
      EXPECT_EQ(written->grid.zero_points, expected->grid.zero_points) << linear;
    }
  }
}

// 4-bit weights move this random model a lot: the qwen35-tiny-a-w4a16 fixture, the peer's RTN
// of it (symmetric, group 32, bf16 scales), already moves the prefill logits by 70 % of their
// norm (max |Δ| ≈ 40, as wide as the logits) and keeps only a third of the next-token argmaxes.
// So the bound is the peer's: RTN here (float32 scales for this float32 model) may not be
// worse than it by more than a quarter, nor agree with the dense argmax much less often.
TEST(QuantizeCheckpointTest, PrefillLogitsAreAsCloseToTheDenseModelsAsThePeersRtn) {
  const auto dense_reference =
      io::SafetensorsFile::Open(FixtureDir("qwen35-tiny-a") / "reference.safetensors");
  const auto peer_reference =
      io::SafetensorsFile::Open(FixtureDir("qwen35-tiny-a-w4a16") / "reference.safetensors");
  ASSERT_TRUE(dense_reference.ok() && peer_reference.ok());
  const at::Tensor dense = ReferenceTensor(*dense_reference, "prefill_logits");
  const at::Tensor peer = ReferenceTensor(*peer_reference, "prefill_logits");
  const std::vector<int64_t> ids = Ids(ReferenceTensor(*dense_reference, "input_ids"));
  const double peer_error = RelativeError(peer, dense);
  const double peer_agreement = ArgmaxAgreement(peer, dense);
  std::cout << "peer RTN: relative error " << peer_error << ", argmax agreement " << peer_agreement
            << "\n";

  for (const QuantizeOptions& options : {Rtn(32, true), Rtn(16, false)}) {
    specd::testing::TempDir out;
    ASSERT_TRUE(QuantizeCheckpoint(FixtureDir("qwen35-tiny-a"), out.path(), options).ok());
    const at::Tensor logits = PrefillLogits(out.path(), ids);
    ASSERT_TRUE(logits.defined());
    const double error = RelativeError(logits, dense);
    const double agreement = ArgmaxAgreement(logits, dense);
    std::cout << "group " << options.rtn.group_size << (options.rtn.symmetric ? " sym" : " asym")
              << ": relative error " << error << ", argmax agreement " << agreement << "\n";
    EXPECT_LT(error, 1.25 * peer_error);
    EXPECT_GT(agreement, peer_agreement - 0.1);
  }
}

std::filesystem::path WriteRandom(const std::filesystem::path& dir,
                                  const model::RandomCheckpointOptions& options) {
  std::filesystem::create_directories(dir);
  const absl::Status status =
      model::WriteRandomQwen35Checkpoint(dir, specd::testing::OddQwen35Shapes(), options);
  EXPECT_TRUE(status.ok()) << status;
  return dir;
}

// A dense copy of `dense_dir` whose quantized Linears hold, as float32, the weights that
// `quantized_dir` dequantizes to.
std::filesystem::path WriteDequantized(const std::filesystem::path& dense_dir,
                                       const std::filesystem::path& quantized_dir,
                                       const std::filesystem::path& out) {
  const io::Checkpoint dense = Open(dense_dir);
  const io::Checkpoint quantized = Open(quantized_dir);
  std::deque<OwnedTensor> owned;  // a deque: the views keep pointing into its elements
  std::vector<io::TensorView> views;
  for (const io::TensorView& tensor : dense.tensors()) {
    const std::string linear = tensor.name.substr(0, tensor.name.rfind(".weight"));
    if (quantized.Find(linear + ".weight_packed") == nullptr) {
      views.push_back(tensor);
      continue;
    }
    owned.push_back({.name = tensor.name,
                     .dtype = io::DType::kF32,
                     .shape = tensor.shape,
                     .data = EncodeFloats(Dequantize(*LoadPackedInt4Weight(quantized, linear)),
                                          io::DType::kF32)});
    views.push_back(owned.back().View());
  }
  std::filesystem::create_directories(out);
  EXPECT_TRUE(io::WriteCheckpointTensors(out, views, std::numeric_limits<uint64_t>::max()).ok());
  std::filesystem::copy_file(dense_dir / "config.json", out / "config.json");
  return out;
}

TEST(QuantizeCheckpointTest, ShardedBfloat16MultimodalCheckpointKeepsVisionMtpAndDtypes) {
  specd::testing::TempDir root;
  const auto input =
      WriteRandom(root.path() / "dense", {.layout = model::CheckpointLayout::kConditionalGeneration,
                                          .seed = 4,
                                          .max_shard_bytes = 20'000,
                                          .dtype = io::DType::kBF16,
                                          .quantization_config = nullptr});
  ASSERT_TRUE(std::filesystem::exists(input / io::kShardIndexFileName));
  std::ofstream(input / "tokenizer.json") << "{}";
  std::ofstream(input / "generation_config.json") << R"({"eos_token_id": 1})";
  QuantizeOptions options = Rtn(16, false);
  options.max_shard_bytes = 20'000;
  const auto output = root.path() / "quantized";
  ASSERT_TRUE(QuantizeCheckpoint(input, output, options).ok());

  EXPECT_TRUE(std::filesystem::exists(output / io::kShardIndexFileName));
  EXPECT_TRUE(std::filesystem::exists(output / "tokenizer.json"));
  EXPECT_TRUE(std::filesystem::exists(output / "generation_config.json"));
  const nlohmann::json config = ReadJson(output / "config.json");
  EXPECT_EQ(config["architectures"][0], "Qwen3_5ForConditionalGeneration");
  EXPECT_TRUE(config.contains("quantization_config"));
  EXPECT_FALSE(config["text_config"].contains("quantization_config"));

  const io::Checkpoint dense = Open(input);
  const io::Checkpoint quantized = Open(output);
  const std::string up = "model.language_model.layers.0.mlp.up_proj";
  ASSERT_EQ(quantized.Find(up + ".weight"), nullptr);
  EXPECT_EQ((*quantized.Get(up + ".weight_scale"))->dtype, io::DType::kBF16);
  EXPECT_NE(quantized.Find(up + ".weight_zero_point"), nullptr);
  for (const char* kept : {"model.visual.patch_embed.proj.weight", "mtp.fc.weight",
                           "lm_head.weight", "model.language_model.embed_tokens.weight",
                           "model.language_model.layers.0.linear_attn.A_log",
                           "model.language_model.layers.2.linear_attn.in_proj_b.weight"}) {
    const io::TensorView* copy = quantized.Find(kept);
    ASSERT_NE(copy, nullptr) << kept;
    EXPECT_TRUE(SameTensor(*copy, **dense.Get(kept))) << kept;
  }
  EXPECT_EQ((*quantized.Get("model.language_model.layers.0.linear_attn.A_log"))->dtype,
            io::DType::kF32);

  // The W4A16 model computes what the dense one does with the weights dequantized: float32 on both
  // sides, summed in other orders (the INT4 kernel's lanes, the dense GEMM's). Logits reach 5.7
  // here; measured 1.2e-4 apart with the AVX-512 kernels (2e-5 of the largest), less with AVX2.
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % 97);
  const at::Tensor logits = PrefillLogits(output, ids);
  const at::Tensor expected =
      PrefillLogits(WriteDequantized(input, output, root.path() / "dequantized"), ids);
  ASSERT_TRUE(logits.defined() && expected.defined());
  EXPECT_TRUE(AllClose(logits, expected, 2e-4));
}

TEST(QuantizeCheckpointTest, RandomCheckpointWrittenQuantizedEqualsTheDenseOneQuantized) {
  for (const io::DType dtype : {io::DType::kF32, io::DType::kBF16}) {
    specd::testing::TempDir root;
    const QuantizeOptions options = Rtn(16, true);
    const auto dense =
        WriteRandom(root.path() / "dense", {.layout = model::CheckpointLayout::kCausalLm,
                                            .seed = 8,
                                            .max_shard_bytes = std::numeric_limits<uint64_t>::max(),
                                            .dtype = dtype,
                                            .quantization_config = nullptr});
    const auto direct =
        WriteRandom(root.path() / "direct",
                    {.layout = model::CheckpointLayout::kCausalLm,
                     .seed = 8,
                     .max_shard_bytes = std::numeric_limits<uint64_t>::max(),
                     .dtype = dtype,
                     .quantization_config = CompressedTensorsConfig(options.rtn, options.ignore)});
    ASSERT_TRUE(QuantizeCheckpoint(dense, root.path() / "quantized", options).ok());

    const io::Checkpoint expected = Open(root.path() / "quantized");
    const io::Checkpoint actual = Open(direct);
    ASSERT_EQ(actual.tensors().size(), expected.tensors().size());
    for (const io::TensorView& tensor : expected.tensors()) {
      const io::TensorView* written = actual.Find(tensor.name);
      ASSERT_NE(written, nullptr) << tensor.name;
      EXPECT_TRUE(SameTensor(*written, tensor)) << tensor.name;
    }
    EXPECT_EQ(ReadJson(direct / "config.json"), ReadJson(root.path() / "quantized/config.json"));
  }
}

TEST(QuantizeCheckpointTest, OverridesReplaceWeightsBeforeQuantizingAndNormsAsTheirDtype) {
  const std::string gate = "model.layers.1.mlp.gate_proj";
  const std::string norm = "model.layers.1.post_attention_layernorm.weight";
  const io::Checkpoint dense = Open(FixtureDir("qwen35-tiny-a"));
  WeightOverrides overrides;
  overrides[gate + ".weight"] = at::linspace(-1, 1, 128 * 64).reshape({128, 64});
  overrides[norm] = at::full({64}, 0.25, at::kDouble);
  specd::testing::TempDir out;
  const QuantizeOptions options = Rtn(32, true);
  ASSERT_TRUE(
      QuantizeCheckpoint(FixtureDir("qwen35-tiny-a"), out.path(), options, {}, &overrides).ok());

  const io::Checkpoint quantized = Open(out.path());
  const at::Tensor values = overrides[gate + ".weight"].contiguous();
  const absl::StatusOr<PackedInt4Weight> expected = QuantizeRtn(
      {values.data_ptr<float>(), static_cast<size_t>(values.numel())}, 128, 64, options.rtn);
  EXPECT_EQ(LoadPackedInt4Weight(quantized, gate)->packed, expected->packed);
  const io::TensorView& written_norm = **quantized.Get(norm);
  EXPECT_EQ(written_norm.dtype, io::DType::kF32);
  EXPECT_EQ(*DecodeFloats(written_norm), std::vector<float>(64, 0.25f));
  const std::string other = "model.layers.0.mlp.gate_proj";
  EXPECT_EQ(
      LoadPackedInt4Weight(quantized, other)->packed,
      QuantizeRtn(*DecodeFloats(**dense.Get(other + ".weight")), 128, 64, options.rtn)->packed);
}

TEST(QuantizeCheckpointTest, RefusesBadInputsBeforeWritingAnything) {
  const auto dense = FixtureDir("qwen35-tiny-a");
  specd::testing::TempDir root;
  const auto out = root.path() / "out";
  const auto refusal = [&](const std::filesystem::path& input, const QuantizeOptions& options,
                           const WeightOverrides* overrides = nullptr) {
    const absl::Status status = QuantizeCheckpoint(input, out, options, {}, overrides);
    EXPECT_FALSE(std::filesystem::exists(out)) << "wrote " << out;
    return std::string(status.message());
  };
  EXPECT_THAT(refusal(FixtureDir("qwen35-tiny-a-w4a16"), Rtn(32, true)),
              HasSubstr("already has a quantization_config: quantize a dense checkpoint"));
  EXPECT_THAT(refusal(dense, Rtn(48, true)),
              HasSubstr("group size 48 does not divide the 64 input columns of "
                        "model.layers.0.linear_attn.in_proj_qkv"));
  EXPECT_THAT(refusal(dense, Rtn(-8, true)), HasSubstr("group size -8 is negative"));
  QuantizeOptions bad_pattern = Rtn(32, true);
  bad_pattern.ignore = {"re:(unclosed"};
  EXPECT_THAT(refusal(dense, bad_pattern), HasSubstr("bad pattern \"re:(unclosed\""));

  WeightOverrides missing{{"model.layers.9.mlp.up_proj.weight", at::zeros({128, 64})}};
  EXPECT_THAT(refusal(dense, Rtn(32, true), &missing),
              HasSubstr("an override names model.layers.9.mlp.up_proj.weight, which the "
                        "checkpoint does not have"));
  WeightOverrides misshaped{{"model.layers.0.mlp.up_proj.weight", at::zeros({64, 128})}};
  EXPECT_THAT(refusal(dense, Rtn(32, true), &misshaped),
              HasSubstr("the override of model.layers.0.mlp.up_proj.weight is not a float "
                        "tensor of shape [128, 64]"));

  std::filesystem::create_directories(out);
  std::ofstream(out / "config.json") << "{}";
  EXPECT_THAT(std::string(QuantizeCheckpoint(dense, out, Rtn(32, true)).message()),
              HasSubstr("is not empty: write the quantized checkpoint to a new directory"));
}

}  // namespace
}  // namespace specd::quant
