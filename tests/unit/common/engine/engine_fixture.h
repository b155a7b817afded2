#pragma once
// What the speculative engine's tests share: the qwen35-tiny-a targets (dense and W4A16), DFlash
// drafters for them (the dflash-tiny-a fixture, or random ones written like `specd drafter
// init`), and generation run to completion, target-only and speculative.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/engine/dflash_block_drafter.h"
#include "common/engine/draft_session.h"
#include "common/engine/generator.h"
#include "common/io/safetensors_file.h"
#include "common/model/dflash_drafter.h"
#include "common/model/qwen35_model.h"
#include "common/model/synthetic/random_drafter.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::engine::testing {

using specd::testing::FixtureDir;

inline std::unique_ptr<model::Qwen35Model> LoadTarget(const std::string& name,
                                                      const model::ModelOptions& options = {}) {
  absl::StatusOr<model::Qwen35Model> target = model::Qwen35Model::Load(FixtureDir(name), options);
  EXPECT_TRUE(target.ok()) << target.status();
  return target.ok() ? std::make_unique<model::Qwen35Model>(*std::move(target)) : nullptr;
}

inline absl::StatusOr<model::DFlashDrafter> FixtureDrafter() {
  return model::DFlashDrafter::Load(FixtureDir("dflash-tiny-a"));
}

// A random drafter for `target`, written and loaded once; the mapped files outlive their names.
// The folder is the process's own: ctest runs tests that ask for the same seed side by side.
inline absl::StatusOr<model::DFlashDrafter> RandomDrafter(
    const model::Qwen35Model& target, const model::RandomDrafterOptions& options) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("specd_random_drafter_" + std::to_string(getpid()) + "_" + std::to_string(options.seed));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  absl::Status written = model::WriteRandomDFlashDrafter(dir, target.config(), options);
  if (!written.ok()) return written;
  absl::StatusOr<model::DFlashDrafter> drafter = model::DFlashDrafter::Load(dir);
  std::filesystem::remove_all(dir);
  return drafter;
}

// `drafter` (loaded or made by the caller) as the engine's Drafter for `target`; null, the test
// failed, when either step failed.
inline std::unique_ptr<DFlashBlockDrafter> BlockDrafter(
    absl::StatusOr<model::DFlashDrafter> drafter, const model::Qwen35Model& target) {
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  if (!drafter.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<DFlashBlockDrafter>> block =
      DFlashBlockDrafter::Create(*std::move(drafter), target.token_head(), target.config());
  EXPECT_TRUE(block.ok()) << block.status();
  return block.ok() ? *std::move(block) : nullptr;
}

// The first 40 of the qwen35-tiny-a reference's input ids, whose continuation has text.
inline std::vector<int64_t> ReferencePrompt() {
  absl::StatusOr<io::SafetensorsFile> reference =
      io::SafetensorsFile::Open(FixtureDir("qwen35-tiny-a") / "reference.safetensors");
  EXPECT_TRUE(reference.ok()) << reference.status();
  if (!reference.ok()) return {};
  const at::Tensor ids = model::testing::ReferenceTensor(*reference, "input_ids");
  return {ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + 40};
}

inline std::vector<int64_t> RandomPrompt(uint64_t seed, int64_t length, int64_t vocab) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  std::vector<int64_t> prompt(length);
  for (int64_t& id : prompt) id = token(random);
  return prompt;
}

inline GenerationRequest Request(std::vector<int64_t> prompt, int64_t max_new_tokens,
                                 double temperature = 0, uint64_t seed = 0) {
  return {.prompt = std::move(prompt),
          .sampling = {.temperature = temperature,
                       .top_k = 0,
                       .top_p = 1,
                       .min_p = 0,
                       .repetition_penalty = 1,
                       .presence_penalty = 0,
                       .seed = seed},
          .stop = {.max_new_tokens = max_new_tokens,
                   .eos_ids = {},
                   .stop_ids = {},
                   .stop_strings = {},
                   .ignore_eos = true}};
}

inline GenerationResult TargetOnly(const model::Qwen35Model& target,
                                   const GenerationRequest& request,
                                   const text::Tokenizer* tokenizer = nullptr) {
  absl::StatusOr<GenerationResult> result = Generator(target, tokenizer).Generate(request);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : GenerationResult{};
}

// A drafter and the options requests draft with.
struct Drafting {
  std::unique_ptr<Drafter> drafter;
  DraftOptions options;
};

inline GenerationResult Speculative(const model::Qwen35Model& target, const Drafter& drafter,
                                    const GenerationRequest& request,
                                    const text::Tokenizer* tokenizer = nullptr,
                                    const ChunkCallback& on_chunk = nullptr,
                                    const DraftOptions& options = {}) {
  absl::StatusOr<Generator> generator = Generator::Speculative(target, drafter, tokenizer, options);
  EXPECT_TRUE(generator.ok()) << generator.status();
  if (!generator.ok()) return GenerationResult{};
  absl::StatusOr<GenerationResult> result = generator->Generate(request, on_chunk);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : GenerationResult{};
}

inline GenerationResult Speculative(const model::Qwen35Model& target, const Drafting& drafting,
                                    const GenerationRequest& request,
                                    const text::Tokenizer* tokenizer = nullptr,
                                    const ChunkCallback& on_chunk = nullptr) {
  return Speculative(target, *drafting.drafter, request, tokenizer, on_chunk, drafting.options);
}

}  // namespace specd::engine::testing
