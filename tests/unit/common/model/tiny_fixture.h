#pragma once
// The qwen35-tiny-a fixture or one of its variants (../shared/fixtures/README.md): the model,
// transformers' reference outputs for it, and the input ids those outputs came from.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/io/safetensors_file.h"
#include "common/model/qwen35_model.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::model::testing {

struct TinyFixture {
  std::unique_ptr<Qwen35Model> model;  // null when loading failed (the test has failed then)
  std::unique_ptr<io::SafetensorsFile> reference;
  std::vector<int64_t> ids;  // the reference's input_ids
};

inline TinyFixture LoadTinyFixture(const std::string& name = "qwen35-tiny-a",
                                   const ModelOptions& options = {}) {
  TinyFixture fixture;
  const auto dir = specd::testing::SharedDir() / "fixtures" / name;
  absl::StatusOr<Qwen35Model> model = Qwen35Model::Load(dir, options);
  absl::StatusOr<io::SafetensorsFile> reference =
      io::SafetensorsFile::Open(dir / "reference.safetensors");
  if (!model.ok() || !reference.ok()) {
    ADD_FAILURE() << "cannot load the fixture: " << model.status() << "; " << reference.status();
    return fixture;
  }
  fixture.model = std::make_unique<Qwen35Model>(*std::move(model));
  fixture.reference = std::make_unique<io::SafetensorsFile>(*std::move(reference));
  const at::Tensor ids = ReferenceTensor(*fixture.reference, "input_ids");
  fixture.ids.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  return fixture;
}

// A suite over one fixture: the model and its reference are loaded once per suite (by the
// derived suite's SetUpTestSuite calling LoadFixture), and every test gets a fresh cache.
class FixtureSuite : public ::testing::Test {
 protected:
  static void LoadFixture(const std::string& name) {
    TinyFixture fixture = LoadTinyFixture(name);
    model_ = std::move(fixture.model);
    reference_ = std::move(fixture.reference);
    ids_ = std::move(fixture.ids);
  }
  static void TearDownTestSuite() {
    model_.reset();
    reference_.reset();
  }

  void SetUp() override {
    ASSERT_NE(model_, nullptr);
    absl::StatusOr<Qwen35Cache> cache = model_->NewCache(256);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::make_unique<Qwen35Cache>(*std::move(cache));
  }

  // The share of the reference prefill's positions where a bfloat16 copy of fixture `name`
  // predicts (greedily) what transformers' float32 model does; -1 when it cannot run.
  static double Bfloat16PrefillAgreement(const std::string& name) {
    absl::StatusOr<Qwen35Model> bf16 = Qwen35Model::Load(
        specd::testing::SharedDir() / "fixtures" / name, {.dtype = at::kBFloat16});
    EXPECT_TRUE(bf16.ok()) << bf16.status();
    if (!bf16.ok()) return -1;
    absl::StatusOr<Qwen35Cache> cache = bf16->NewCache(256);
    absl::StatusOr<ForwardOutput> out =
        cache.ok()
            ? bf16->Prefill(ids_, *cache, {.logit_rows = LogitRows::kAll, .hidden_states = {}})
            : absl::StatusOr<ForwardOutput>(cache.status());
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return -1;
    EXPECT_EQ(out->logits.scalar_type(), at::kFloat);
    const at::Tensor expected = ReferenceTensor(*reference_, "prefill_logits");
    return out->logits.argmax(-1).eq(expected.argmax(-1)).to(at::kDouble).mean().item<double>();
  }

  // The reference's int64 tensor `name` (e.g. "greedy_ids") as ids.
  static std::vector<int64_t> ReferenceIds(const std::string& name) {
    const at::Tensor ids = ReferenceTensor(*reference_, name);
    return std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }

  // `count` greedy tokens after prefilling `prompt` on cache_, one decode step each.
  std::vector<int64_t> GreedyContinuation(std::span<const int64_t> prompt, size_t count) {
    std::vector<int64_t> generated;
    absl::StatusOr<ForwardOutput> prefill = model_->Prefill(prompt, *cache_);
    EXPECT_TRUE(prefill.ok()) << prefill.status();
    if (!prefill.ok()) return generated;
    at::Tensor logits = prefill->logits[0];
    while (generated.size() < count) {
      generated.push_back(logits.argmax().item<int64_t>());
      absl::StatusOr<at::Tensor> next = model_->Decode(generated.back(), *cache_);
      EXPECT_TRUE(next.ok()) << next.status();
      if (!next.ok()) break;
      logits = *next;
    }
    return generated;
  }

  // The logits [n, V] of decoding ids_[split:] one step at a time after prefilling ids_[:split]
  // on cache_ (the reference's "decode_logits"); undefined after a failure.
  at::Tensor DecodeStepLogits(int64_t split) {
    absl::StatusOr<ForwardOutput> prefill = model_->Prefill(Ids(0, split), *cache_);
    EXPECT_TRUE(prefill.ok()) << prefill.status();
    if (!prefill.ok()) return {};
    std::vector<at::Tensor> rows;
    for (int64_t t = split; t < static_cast<int64_t>(ids_.size()); ++t) {
      absl::StatusOr<at::Tensor> logits = model_->Decode(ids_[t], *cache_);
      EXPECT_TRUE(logits.ok()) << logits.status();
      if (!logits.ok()) return {};
      rows.push_back(*logits);
    }
    return at::stack(rows);
  }

  std::span<const int64_t> Ids(int64_t begin, int64_t end) const {
    return std::span<const int64_t>(ids_).subspan(begin, end - begin);
  }

  static inline std::unique_ptr<Qwen35Model> model_;
  static inline std::unique_ptr<io::SafetensorsFile> reference_;
  static inline std::vector<int64_t> ids_;
  std::unique_ptr<Qwen35Cache> cache_;
};

}  // namespace specd::model::testing
