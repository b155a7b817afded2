#pragma once
// Real verifier and drafter handlers over the qwen35-tiny-a target and the dflash-tiny-a drafter:
// the pairs the orchestrator's tests run requests on.
#include <memory>

#include "absl/time/time.h"
#include "common/model/qwen35_model.h"
#include "gtest/gtest.h"
#include "services/drafter/drafter_handler.h"
#include "services/verifier/verifier_handler.h"
#include "tests/unit/common/spec/spec_fixture.h"

namespace specd::orchestrator::testing {

inline std::shared_ptr<verifier::VerifierHandler> MakeVerifier(model::Qwen35Model& target,
                                                               int64_t max_session_length = 256) {
  absl::StatusOr<std::unique_ptr<verifier::VerifierHandler>> verifier =
      verifier::VerifierHandler::Create(target, {.model_name = "qwen35-tiny-a",
                                                 .quantization = "dense",
                                                 .tapped_layer_ids = {},
                                                 .max_sessions = 8,
                                                 .max_session_length = max_session_length,
                                                 .max_block_size = 16,
                                                 .session_idle_timeout = absl::Seconds(30),
                                                 .open_sessions = nullptr});
  EXPECT_TRUE(verifier.ok()) << verifier.status();
  return verifier.ok() ? *std::move(verifier) : nullptr;
}

inline std::shared_ptr<drafter::DrafterHandler> MakeDrafter(model::Qwen35Model& target) {
  absl::StatusOr<model::DFlashDrafter> drafter = spec::testing::FixtureDrafter();
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  if (!drafter.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<drafter::DrafterHandler>> handler =
      drafter::DrafterHandler::Create(*std::move(drafter), target.token_head(), target.config(),
                                      {.model_name = "dflash-tiny-a",
                                       .quantization = "dense",
                                       .default_window = 0,
                                       .max_sessions = 8,
                                       .session_idle_timeout = absl::Seconds(30),
                                       .open_sessions = nullptr});
  EXPECT_TRUE(handler.ok()) << handler.status();
  return handler.ok() ? *std::move(handler) : nullptr;
}

}  // namespace specd::orchestrator::testing
