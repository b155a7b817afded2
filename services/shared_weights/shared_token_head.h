#pragma once
// The target's embedding and LM head shared between a verifier and a drafter on the same GPU: the
// verifier exports its own device memory of the two tensors (CUDA IPC handles in its Info,
// TargetVerifierServiceInfoResponse.shared_weights), and a drafter process maps them instead of
// loading a second copy (1.27 GB in bf16 for Qwen3.5-4B). On the CPU nothing is shared: each
// process holds the stored head it reads in memory of its own on huge pages (TokenHead), which
// streams faster than the page cache's 4 KiB pages of the checkpoint both could map.
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/io/qwen35_config.h"
#include "common/model/model_options.h"
#include "common/model/token_head.h"
#include "google/protobuf/map.h"
#include "specd/v1/types.pb.h"

namespace specd::shared_weights {

// The names the tensors are shared under (a tied head shares the embedding's memory).
inline constexpr char kEmbedTokens[] = "model.embed_tokens.weight";
inline constexpr char kLmHead[] = "lm_head.weight";

// Handles to `head`'s two tensors in this process's device memory (memory that never changes:
// generation 0, no event), owned by `owner_instance_id` as buffers `first_buffer_id` and the id
// after it; empty for a head on the CPU or in a build without CUDA. The memory stays the
// verifier's model's, for as long as it lives.
absl::StatusOr<std::map<std::string, v1::TensorHandle>> ShareTokenHead(
    const model::TokenHead& head, const std::string& owner_instance_id, uint64_t first_buffer_id);

// A TokenHead over another process's shared tensors (ShareTokenHead's handles), mapped on the GPU
// that holds them, no copy; the mappings live as long as the tensors. `config` gives the shape
// every handle must have. FAILED_PRECONDITION when `options` are not a GPU's, the build has no
// CUDA, or a tensor is missing (a verifier on the CPU shares none); INVALID_ARGUMENT for a handle
// that does not describe a [vocab, hidden] float32 or bf16 tensor inside its region.
absl::StatusOr<model::TokenHead> MapTokenHead(
    const google::protobuf::Map<std::string, v1::TensorHandle>& shared,
    const io::Qwen35TextConfig& config, const model::ModelOptions& options);

}  // namespace specd::shared_weights
