#pragma once
// What the verifier's, the drafter's and the orchestrator's tests share: verifier handlers,
// requests to a target verifier, the context rows a handle names (mapped the way a drafter maps
// them), the target's own tapped hidden states to compare them with, and the /dev/shm entries
// this process owns.
#include <ATen/ATen.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/qwen35_model.h"
#include "common/rpc/context_buffer.h"
#include "gtest/gtest.h"
#include "services/verifier/verifier_handler.h"
#include "specd/v1/verifier.pb.h"

namespace specd::verifier::testing {

// A verifier handler over `target` (which must outlive it); null, failing the test, if refused.
inline std::unique_ptr<VerifierHandler> MakeVerifier(const model::Qwen35Model& target,
                                                     const VerifierOptions& options) {
  absl::StatusOr<std::unique_ptr<VerifierHandler>> handler =
      VerifierHandler::Create(target, options);
  EXPECT_TRUE(handler.ok()) << handler.status();
  return handler.ok() ? *std::move(handler) : nullptr;
}

// Greedy decoding that runs through end-of-sequence ids, like engine::testing::Request.
inline v1::SamplingParams Greedy() {
  v1::SamplingParams sampling;
  sampling.set_temperature(0);
  sampling.set_ignore_eos(true);
  return sampling;
}

inline v1::PrefillRequest PrefillRequestFor(const std::string& session_id,
                                            const std::vector<int64_t>& prompt,
                                            const v1::SamplingParams& sampling = Greedy(),
                                            const std::vector<uint32_t>& tapped_layer_ids = {}) {
  v1::PrefillRequest request;
  request.set_session_id(session_id);
  request.mutable_token_ids()->Assign(prompt.begin(), prompt.end());
  *request.mutable_sampling() = sampling;
  request.mutable_tapped_layer_ids()->Assign(tapped_layer_ids.begin(), tapped_layer_ids.end());
  return request;
}

inline v1::VerifyRequest VerifyRequestFor(const std::string& session_id,
                                          uint64_t expected_generation,
                                          const std::vector<int64_t>& drafts) {
  v1::VerifyRequest request;
  request.set_session_id(session_id);
  request.set_expected_generation(expected_generation);
  request.mutable_draft_token_ids()->Assign(drafts.begin(), drafts.end());
  return request;
}

inline std::vector<int64_t> Ids(const google::protobuf::RepeatedField<uint32_t>& ids) {
  return {ids.begin(), ids.end()};
}

// Rows [begin, end) of the buffer `handle` names, read through a mapping of its own:
// [end − begin, width] float32.
inline at::Tensor ReadRows(const v1::TensorHandle& handle, int64_t begin, int64_t end) {
  rpc::ContextBufferReader reader(handle.shape_size() == 2 ? handle.shape(1) : 0);
  const absl::Status accepted = reader.Accept(handle);
  EXPECT_TRUE(accepted.ok()) << accepted;
  if (!accepted.ok() || reader.Row(begin) == nullptr || end > reader.rows()) return at::Tensor();
  return at::from_blob(const_cast<float*>(reader.Row(begin)), {end - begin, reader.width()},
                       at::kFloat)
      .clone();
}

// The outputs of the target's decoder `layers` at every position of `ids`, side by side in that
// order, from one prefill: the context rows a verifier tapping those layers writes for `ids`.
inline at::Tensor TappedHiddenStates(const model::Qwen35Model& target,
                                     const std::vector<int64_t>& ids,
                                     const std::vector<int64_t>& layers) {
  absl::StatusOr<model::Qwen35Cache> cache = target.NewCache(static_cast<int64_t>(ids.size()));
  EXPECT_TRUE(cache.ok()) << cache.status();
  if (!cache.ok()) return at::Tensor();
  std::vector<int64_t> indices;
  for (const int64_t layer : layers) indices.push_back(layer + 1);  // 0 is the embedding
  absl::StatusOr<model::ForwardOutput> prefill = target.Prefill(
      ids, *cache, {.logit_rows = model::LogitRows::kLast, .hidden_states = indices});
  EXPECT_TRUE(prefill.ok()) << prefill.status();
  return prefill.ok() ? at::cat(prefill->hidden_states, /*dim=*/1).to(at::kFloat) : at::Tensor();
}

// Whether the shared-memory object `name` ("/specd.<pid>.<n>") is still linked.
inline bool ShmExists(const std::string& name) {
  return std::filesystem::exists(std::filesystem::path("/dev/shm") / name.substr(1));
}

// The shared-memory objects this process owns (SharedMemoryRegion names them after its pid).
inline std::set<std::string> OwnShmNames() {
  const std::string prefix = "specd." + std::to_string(getpid()) + ".";
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix)) names.insert(name);
  }
  return names;
}

}  // namespace specd::verifier::testing
