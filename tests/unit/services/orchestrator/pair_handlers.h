#pragma once
// Real verifier and drafter handlers over the qwen35-tiny-a target and the dflash-tiny-a drafter
// (or another drafter served_drafter.h opens), with the limits the orchestrator's tests run
// requests under.
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/engine/cache_pool.h"
#include "common/model/qwen35_model.h"
#include "tests/unit/services/drafter/drafter_fixture.h"
#include "tests/unit/services/verifier/verifier_fixture.h"

namespace specd::orchestrator::testing {

inline std::shared_ptr<verifier::VerifierHandler> PairVerifier(
    const model::Qwen35Model& target, int64_t max_session_length = 256, int64_t max_sessions = 8,
    engine::CachePool* cache_pool = nullptr) {
  return verifier::testing::MakeVerifier(target, {.model_name = "qwen35-tiny-a",
                                                  .quantization = "dense",
                                                  .tapped_layer_ids = {},
                                                  .max_sessions = max_sessions,
                                                  .max_session_length = max_session_length,
                                                  .max_block_size = 16,
                                                  .session_idle_timeout = absl::Seconds(30),
                                                  .open_sessions = nullptr,
                                                  .batching = {},
                                                  .cache_pool = cache_pool});
}

inline std::shared_ptr<drafter::DrafterHandler> PairDrafter(
    const model::Qwen35Model& target, int64_t max_sessions = 8,
    engine::CachePool* cache_pool = nullptr,
    const std::string& source = drafter::testing::FixtureDFlashDir()) {
  return drafter::testing::MakeDrafter(target,
                                       {.model_name = source,
                                        .quantization = "dense",
                                        .default_window = 0,
                                        .max_sessions = max_sessions,
                                        .session_idle_timeout = absl::Seconds(30),
                                        .open_sessions = nullptr,
                                        .batching = {},
                                        .cache_pool = cache_pool},
                                       source);
}

}  // namespace specd::orchestrator::testing
