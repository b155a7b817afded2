#include "training/gptq_drafter.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/checkpoint.h"
#include "common/model/dflash_drafter.h"
#include "common/model/linear_input_tap.h"
#include "common/model/qwen35_model.h"
#include "common/quantize/gptq_checkpoint.h"
#include "training/drafter_training.h"
#include "training/packed_dataset.h"

namespace specd::train {
namespace {

absl::Status Annotate(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", std::string(status.message())));
}

// Every two-dimensional weight of a DFlash drafter is a Linear's; GPTQ needs its group size to
// divide each one's input width.
absl::Status CheckGroupSize(const std::filesystem::path& drafter, int64_t group_size) {
  if (group_size <= 0) return absl::OkStatus();
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(drafter);
  if (!checkpoint.ok()) return checkpoint.status();
  for (const io::TensorView& tensor : checkpoint->tensors()) {
    if (tensor.shape.size() == 2 && tensor.name.ends_with(".weight") &&
        tensor.shape[1] % group_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat("GPTQ group size ", group_size,
                                                     " does not divide the input width ",
                                                     tensor.shape[1], " of ", tensor.name,
                                                     "; choose one that divides every "
                                                     "Linear's"));
    }
  }
  return absl::OkStatus();
}

// min(count, candidates) anchors spread evenly over AnchorCandidates, the first and last
// included (Nota's linspace over the assistant region).
std::vector<int64_t> EvenAnchors(const at::Tensor& mask, int64_t block_size, int64_t count) {
  const std::vector<int64_t> candidates = AnchorCandidates(mask, block_size);
  const auto available = static_cast<int64_t>(candidates.size());
  const int64_t n = std::min(count, available);
  std::vector<int64_t> anchors;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t index =
        n == 1 ? (available - 1) / 2 : (i * (available - 1) + (n - 1) / 2) / (n - 1);
    anchors.push_back(candidates[index]);
  }
  return anchors;
}

}  // namespace

absl::Status RunGptqDrafter(const GptqDrafterOptions& options) {
  if (options.sequences <= 0 || options.anchors_per_sequence <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPTQ calibration needs sequences and anchors per sequence > 0, got ",
                     options.sequences, " and ", options.anchors_per_sequence));
  }
  if (absl::Status fits = CheckGroupSize(options.drafter, options.gptq.group_size); !fits.ok()) {
    return Annotate(fits, absl::StrCat("drafter ", options.drafter.string()));
  }
  absl::StatusOr<DrafterWorkspace> workspace =
      LoadDrafterWorkspace(options.target, options.drafter, options.data, /*trainable=*/false);
  if (!workspace.ok()) return workspace.status();
  const model::Qwen35Model& target = workspace->target;
  const model::DFlashDrafter& drafter = workspace->drafter;
  const PackedDataset& data = workspace->data;

  at::NoGradGuard no_grad;
  absl::StatusOr<model::DFlashCache> cache = drafter.NewCache(data.sequence_length());
  if (!cache.ok()) return cache.status();
  std::map<std::string, quant::HessianAccumulator> accumulators;
  absl::Status observed;
  const auto observe = [&](const std::string& module, const at::Tensor& input) {
    if (!observed.ok()) return;
    const auto found = accumulators.try_emplace(module, input.size(-1)).first;
    observed = found->second.Add(input);
    if (!observed.ok()) observed = Annotate(observed, module);
  };

  const int64_t block_size = drafter.config().block_size;
  const int64_t available = data.size(Split::kTrain);
  const int64_t sequences = std::min(options.sequences, available);
  int64_t calibrated = 0;
  for (int64_t i = 0; i < sequences; ++i) {
    const int64_t index = i * available / sequences;
    const Sequence sequence = data.Get(Split::kTrain, index);
    const std::vector<int64_t> anchors =
        EvenAnchors(sequence.mask, block_size, options.anchors_per_sequence);
    if (anchors.empty()) continue;
    absl::StatusOr<at::Tensor> context = TargetContextFeatures(target, drafter, sequence.ids);
    if (!context.ok()) return Annotate(context.status(), absl::StrCat("sequence ", index));
    const absl::Status drafted = [&]() -> absl::Status {
      try {
        const at::Tensor ids = sequence.ids.to(at::kLong);
        at::Tensor block = at::full({block_size}, drafter.config().mask_token_id, at::kLong);
        cache->Reset();
        model::LinearInputTap tap(observe);
        for (const int64_t anchor : anchors) {
          const at::Tensor rows = context->narrow(0, cache->length(), anchor - cache->length());
          if (absl::Status status = drafter.AppendContext(rows, *cache); !status.ok()) {
            return status;
          }
          block.narrow(0, 0, 1).copy_(ids.narrow(0, anchor, 1));
          const at::Tensor embeddings = target.Embed(block.to(target.options().device));
          if (absl::StatusOr<at::Tensor> draft = drafter.DraftBlock(embeddings, *cache);
              !draft.ok()) {
            return draft.status();
          }
        }
        return observed;
      } catch (const c10::Error& e) {
        return absl::InternalError(e.what_without_backtrace());
      }
    }();
    if (!drafted.ok()) return Annotate(drafted, absl::StrCat("calibrating on sequence ", index));
    ++calibrated;
    std::fprintf(stderr, "\rgptq drafter: calibrated %ld/%ld sequences   ",
                 static_cast<long>(i + 1), static_cast<long>(sequences));
  }
  if (calibrated > 0) std::fputc('\n', stderr);
  if (calibrated == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("data ", options.data.string(), ": no training sequence of the ", sequences,
                     " read has an assistant token with room for a block of ", block_size));
  }
  quant::LinearHessians hessians;
  for (const auto& [module, accumulator] : accumulators) hessians[module] = accumulator.hessian();
  if (absl::Status written =
          WriteGptqCheckpoint(options.drafter, hessians, options.gptq, options.out);
      !written.ok()) {
    return Annotate(written, absl::StrCat("writing the W4A16 drafter ", options.out.string()));
  }
  return absl::OkStatus();
}

}  // namespace specd::train
