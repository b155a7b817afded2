#include "training/draft_vocabulary.h"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/io/checkpoint.h"
#include "common/io/checkpoint_writer.h"
#include "common/io/json_file.h"
#include "common/quantize/quantize_checkpoint.h"
#include "nlohmann/json.hpp"

namespace specd::train {

absl::StatusOr<DraftVocabulary> MostFrequentTokens(std::span<const PackedDataset> data,
                                                   int64_t keep) {
  if (data.empty()) return absl::InvalidArgumentError("no dataset to count tokens in");
  const int64_t vocab = data.front().vocab_size();
  if (keep < 1 || keep > vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep = ", keep, " is outside [1, ", vocab, "] (the vocabulary)"));
  }
  std::vector<int64_t> counts(vocab, 0);
  for (const PackedDataset& dataset : data) {
    if (dataset.vocab_size() != vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("datasets of vocabularies ", vocab, " and ", dataset.vocab_size()));
    }
    for (int64_t i = 0; i < dataset.size(Split::kTrain); ++i) {
      const Sequence sequence = dataset.Get(Split::kTrain, i);
      const at::Tensor trained = sequence.ids.masked_select(sequence.mask);
      const int64_t* ids = trained.data_ptr<int64_t>();
      for (int64_t k = 0; k < trained.numel(); ++k) ++counts[ids[k]];
    }
  }
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return counts[a] > counts[b]; });
  order.resize(keep);
  std::sort(order.begin(), order.end());
  int64_t kept = 0;
  for (const int64_t id : order) kept += counts[id];
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  return DraftVocabulary{.ids = std::move(order),
                         .coverage = total > 0 ? static_cast<double>(kept) / total : 0};
}

absl::Status WritePrunedDrafter(const std::filesystem::path& drafter,
                                std::span<const int64_t> vocab, const std::filesystem::path& out) {
  absl::StatusOr<nlohmann::json> config = io::ReadJsonFile(drafter / "config.json");
  if (!config.ok()) return config.status();
  absl::StatusOr<io::Checkpoint> checkpoint = io::Checkpoint::Open(drafter);
  if (!checkpoint.ok()) return checkpoint.status();
  if (absl::Status prepared = quant::PrepareOutputDir(out); !prepared.ok()) return prepared;
  std::vector<int64_t> offsets(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) offsets[i] = vocab[i] - static_cast<int64_t>(i);
  std::vector<io::TensorView> tensors;
  for (const io::TensorView& tensor : checkpoint->tensors()) {
    if (tensor.name != "d2t") tensors.push_back(tensor);  // a drafter pruned before
  }
  tensors.push_back({.name = "d2t",
                     .dtype = io::DType::kI64,
                     .shape = {static_cast<int64_t>(offsets.size())},
                     .bytes = std::as_bytes(std::span(offsets)),
                     .owner = nullptr});
  if (absl::Status written =
          io::WriteCheckpointTensors(out, tensors, io::kMaxShardBytes, {{"format", "pt"}});
      !written.ok()) {
    return written;
  }
  if (absl::Status copied = quant::CopySideFiles(drafter, out); !copied.ok()) return copied;
  (*config)["draft_vocab_size"] = vocab.size();
  return quant::WriteConfigJson(out, *config);
}

}  // namespace specd::train
