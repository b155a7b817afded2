#include "training/packed_dataset.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/io/atomic_file.h"
#include "nlohmann/json.hpp"
#include "training/sha256.h"

namespace specd::train {
namespace {

using Json = nlohmann::json;

// Shards are the host's int32 bytes, which the format fixes as little-endian.
static_assert(std::endian::native == std::endian::little, "shards are written in host order");

constexpr char kFormat[] = "specd-packed-v1";
constexpr char kManifest[] = "manifest.json";
constexpr std::string_view kAssistantHeader = "<|im_start|>assistant\n";
constexpr std::string_view kTurnEnd = "<|im_end|>";

absl::StatusOr<int32_t> RequireToken(const text::Tokenizer& tokenizer, std::string_view token) {
  const std::optional<text::TokenId> id = tokenizer.TokenToId(token);
  if (!id) {
    return absl::InvalidArgumentError(
        absl::StrCat("the tokenizer has no ", std::string(token), " token"));
  }
  return static_cast<int32_t>(*id);
}

absl::Status AppendTokens(const text::Tokenizer& tokenizer, std::string_view text, uint8_t mask,
                          TokenizedRecord& out) {
  if (text.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<text::TokenId>> ids = tokenizer.Encode(text);
  if (!ids.ok()) return ids.status();
  out.ids.insert(out.ids.end(), ids->begin(), ids->end());
  out.mask.insert(out.mask.end(), ids->size(), mask);
  return absl::OkStatus();
}

// What the template appends to start the assistant's turn, which the model is given.
absl::StatusOr<std::string> GenerationPrompt(const text::ChatTemplate& chat) {
  const std::vector<text::ChatMessage> probe = {
      {.role = text::ChatRole::kUser, .content = "x", .reasoning = std::nullopt}};
  absl::StatusOr<std::string> with = chat.Render(probe, {.add_generation_prompt = true});
  absl::StatusOr<std::string> without = chat.Render(probe, {.add_generation_prompt = false});
  if (!with.ok()) return with.status();
  if (!without.ok()) return without.status();
  return with->substr(without->size());
}

// [begin, end) byte ranges of the rendered chat that the model produces: each assistant turn
// after its generation prompt, through its <|im_end|>.
absl::StatusOr<std::vector<std::pair<size_t, size_t>>> AssistantSpans(
    std::string_view rendered, std::string_view generation_prompt, int64_t assistant_turns) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t header = rendered.find(kAssistantHeader); header != std::string_view::npos;
       header = rendered.find(kAssistantHeader, header + 1)) {
    size_t begin = header + kAssistantHeader.size();
    if (rendered.substr(header).starts_with(generation_prompt)) {
      begin = header + generation_prompt.size();
    }
    const size_t end = rendered.find(kTurnEnd, begin);
    if (end == std::string_view::npos) break;
    spans.emplace_back(begin, end + kTurnEnd.size());
  }
  if (static_cast<int64_t>(spans.size()) != assistant_turns) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rendered chat has ", spans.size(), " assistant turns, not ",
                     assistant_turns, " (does a message contain chat template markers?)"));
  }
  return spans;
}

absl::StatusOr<Json> WriteShardFile(const std::filesystem::path& dir, const std::string& name,
                                    std::span<const std::byte> bytes) {
  if (absl::Status status = io::WriteFileAtomically(dir / name, bytes); !status.ok()) return status;
  return Json{{"file", name}, {"bytes", bytes.size()}, {"sha256", Sha256Hex(bytes)}};
}

// Concatenates the records, pads the stream to whole sequences and writes its shards.
absl::StatusOr<Json> PackSplit(Split split, const std::vector<TokenizedRecord>& records,
                               std::span<const int64_t> indices, const PackOptions& options,
                               int32_t pad_id, const std::filesystem::path& dir) {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  for (const int64_t index : indices) {
    const TokenizedRecord& record = records[static_cast<size_t>(index)];
    ids.insert(ids.end(), record.ids.begin(), record.ids.end());
    mask.insert(mask.end(), record.mask.begin(), record.mask.end());
  }
  const int64_t tokens = static_cast<int64_t>(ids.size());
  const int64_t length = options.sequence_length;
  const int64_t sequences = (tokens + length - 1) / length;
  ids.resize(static_cast<size_t>(sequences * length), pad_id);
  mask.resize(ids.size(), 0);

  Json shards = Json::array();
  for (int64_t first = 0, shard = 0; first < sequences;
       first += options.sequences_per_shard, ++shard) {
    const int64_t count = std::min(options.sequences_per_shard, sequences - first);
    const size_t offset = static_cast<size_t>(first * length);
    const size_t size = static_cast<size_t>(count * length);
    const std::string stem = absl::StrFormat("%s-%05d", SplitName(split), shard);
    absl::StatusOr<Json> ids_file =
        WriteShardFile(dir, stem + ".bin", std::as_bytes(std::span(ids).subspan(offset, size)));
    if (!ids_file.ok()) return ids_file.status();
    absl::StatusOr<Json> mask_file = WriteShardFile(
        dir, stem + ".mask.bin", std::as_bytes(std::span(mask).subspan(offset, size)));
    if (!mask_file.ok()) return mask_file.status();
    shards.push_back({{"sequences", count}, {"ids", *ids_file}, {"mask", *mask_file}});
  }
  return Json{{"records", indices.size()},
              {"tokens", tokens},
              {"sequences", sequences},
              {"shards", shards}};
}

absl::Status WriteManifest(const std::filesystem::path& dir, const Json& manifest) {
  const std::string text = manifest.dump(2) + "\n";
  absl::StatusOr<io::AtomicFile> file = io::AtomicFile::Create(dir / kManifest);
  if (!file.ok()) return file.status();
  if (absl::Status status = file->Append(std::as_bytes(std::span(text))); !status.ok()) {
    return status;
  }
  return file->Commit();
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path.string()));
  return bytes;
}

// Reads one shard file, checking it against its manifest entry; appends its elements to `out`.
template <typename T>
absl::Status ReadShardFile(const std::filesystem::path& dir, const Json& entry, int64_t elements,
                           std::vector<T>& out) {
  const std::string name = entry.at("file").get<std::string>();
  if (name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("manifest.json: bad shard name ", name));
  }
  absl::StatusOr<std::string> bytes = ReadFile(dir / name);
  if (!bytes.ok()) return bytes.status();
  const uint64_t expected = static_cast<uint64_t>(elements) * sizeof(T);
  if (bytes->size() != expected || entry.at("bytes").get<uint64_t>() != expected) {
    return absl::DataLossError(absl::StrCat(name, " has ", bytes->size(), " bytes; the manifest's",
                                            " shape needs ", expected));
  }
  if (Sha256Hex(std::as_bytes(std::span(*bytes))) != entry.at("sha256").get<std::string>()) {
    return absl::DataLossError(absl::StrCat(name, " does not match its SHA-256 in manifest.json"));
  }
  const size_t old_size = out.size();
  out.resize(old_size + static_cast<size_t>(elements));
  std::memcpy(out.data() + old_size, bytes->data(), bytes->size());
  return absl::OkStatus();
}

}  // namespace

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "validation"; }

absl::StatusOr<TokenizedRecord> TokenizeRecord(const Conversation& record,
                                               const text::Tokenizer& tokenizer,
                                               text::ChatFlavor flavor) {
  absl::StatusOr<int32_t> separator = RequireToken(tokenizer, "<|endoftext|>");
  if (!separator.ok()) return separator.status();
  TokenizedRecord out;
  if (record.text) {
    if (absl::Status status = AppendTokens(tokenizer, *record.text, 1, out); !status.ok()) {
      return status;
    }
    out.ids.push_back(*separator);
    out.mask.push_back(1);
    return out;
  }
  const text::ChatTemplate chat(flavor);
  absl::StatusOr<std::string> rendered =
      chat.Render(record.messages, {.add_generation_prompt = false});
  if (!rendered.ok()) return rendered.status();
  absl::StatusOr<std::string> generation_prompt = GenerationPrompt(chat);
  if (!generation_prompt.ok()) return generation_prompt.status();
  const int64_t assistant_turns = std::count_if(
      record.messages.begin(), record.messages.end(),
      [](const text::ChatMessage& m) { return m.role == text::ChatRole::kAssistant; });
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> spans =
      AssistantSpans(*rendered, *generation_prompt, assistant_turns);
  if (!spans.ok()) return spans.status();
  const std::string_view text = *rendered;
  size_t done = 0;
  for (const auto& [begin, end] : *spans) {
    if (absl::Status status = AppendTokens(tokenizer, text.substr(done, begin - done), 0, out);
        !status.ok()) {
      return status;
    }
    if (absl::Status status = AppendTokens(tokenizer, text.substr(begin, end - begin), 1, out);
        !status.ok()) {
      return status;
    }
    done = end;
  }
  if (absl::Status status = AppendTokens(tokenizer, text.substr(done), 0, out); !status.ok()) {
    return status;
  }
  out.ids.push_back(*separator);
  out.mask.push_back(0);
  return out;
}

SplitIndices SplitRecords(int64_t records, double validation_fraction, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(records));
  for (int64_t i = 0; i < records; ++i) order[static_cast<size_t>(i)] = i;
  std::mt19937_64 random(seed);
  for (int64_t i = records - 1; i > 0; --i) {  // Fisher-Yates on the raw stream: portable
    std::swap(order[static_cast<size_t>(i)], order[random() % static_cast<uint64_t>(i + 1)]);
  }
  const int64_t held_out = std::clamp<int64_t>(
      std::llround(validation_fraction * static_cast<double>(records)), 0, records);
  SplitIndices split;
  split.validation.assign(order.begin(), order.begin() + held_out);
  split.train.assign(order.begin() + held_out, order.end());
  std::sort(split.validation.begin(), split.validation.end());
  std::sort(split.train.begin(), split.train.end());
  return split;
}

absl::Status Pack(std::span<const Conversation> records, const text::Tokenizer& tokenizer,
                  const PackOptions& options, const std::filesystem::path& dir) {
  if (options.sequence_length <= 0 || options.sequences_per_shard <= 0 ||
      !(options.validation_fraction >= 0 && options.validation_fraction <= 1)) {
    return absl::InvalidArgumentError(
        "pack: sequence_length and sequences_per_shard must be positive and validation_fraction "
        "in [0, 1]");
  }
  absl::StatusOr<int32_t> pad_id = RequireToken(tokenizer, "<|endoftext|>");
  if (!pad_id.ok()) return pad_id.status();
  absl::StatusOr<int32_t> eos_id = RequireToken(tokenizer, "<|im_end|>");
  if (!eos_id.ok()) return eos_id.status();

  std::vector<TokenizedRecord> tokenized;
  tokenized.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    absl::StatusOr<TokenizedRecord> record = TokenizeRecord(records[i], tokenizer, options.flavor);
    if (!record.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pack: record ", i, ": ", record.status().message()));
    }
    tokenized.push_back(*std::move(record));
  }

  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (!error) std::filesystem::remove(dir / kManifest, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("pack: cannot prepare ", dir.string(), ": ", error.message()));
  }
  const SplitIndices split =
      SplitRecords(static_cast<int64_t>(records.size()), options.validation_fraction, options.seed);
  Json splits = Json::object();
  for (const auto& [name, indices] :
       {std::pair{Split::kTrain, &split.train}, std::pair{Split::kValidation, &split.validation}}) {
    absl::StatusOr<Json> packed = PackSplit(name, tokenized, *indices, options, *pad_id, dir);
    if (!packed.ok()) return packed.status();
    splits[SplitName(name)] = *std::move(packed);
  }
  const Json manifest = {
      {"format", kFormat},
      {"sequence_length", options.sequence_length},
      {"ids_dtype", "int32-le"},
      {"mask_dtype", "uint8"},
      {"checksum", "sha256"},
      {"tokenizer", {{"name", options.tokenizer_name}, {"vocab_size", tokenizer.vocab_size()}}},
      {"pad_id", *pad_id},
      {"eos_id", *eos_id},
      {"separator_id", *pad_id},
      {"chat_flavor", options.flavor == text::ChatFlavor::kQwen3 ? "qwen3" : "qwen3_5"},
      {"split",
       {{"validation_fraction", options.validation_fraction},
        {"seed", options.seed},
        {"validation_records", split.validation}}},
      {"splits", splits}};
  return WriteManifest(dir, manifest);
}

absl::StatusOr<PackedDataset> PackedDataset::Open(const std::filesystem::path& dir) {
  absl::StatusOr<std::string> text = ReadFile(dir / kManifest);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat(dir.string(), " has no readable ", kManifest,
                                            " (not a packed dataset, or an interrupted pack)"));
  }
  const Json manifest = Json::parse(*text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object() || manifest.value("format", "") != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat((dir / kManifest).string(), " is not a ", kFormat, " manifest"));
  }
  PackedDataset dataset;
  try {
    dataset.sequence_length_ = manifest.at("sequence_length").get<int64_t>();
    dataset.vocab_size_ = manifest.at("tokenizer").at("vocab_size").get<int64_t>();
    dataset.pad_id_ = manifest.at("pad_id").get<int32_t>();
    dataset.eos_id_ = manifest.at("eos_id").get<int32_t>();
    for (const Split split : {Split::kTrain, Split::kValidation}) {
      const Json& entry = manifest.at("splits").at(SplitName(split));
      SplitData& data = split == Split::kTrain ? dataset.train_ : dataset.validation_;
      int64_t sequences = 0;
      for (const Json& shard : entry.at("shards")) {
        const int64_t elements = shard.at("sequences").get<int64_t>() * dataset.sequence_length_;
        sequences += shard.at("sequences").get<int64_t>();
        if (absl::Status status = ReadShardFile(dir, shard.at("ids"), elements, data.ids);
            !status.ok()) {
          return status;
        }
        if (absl::Status status = ReadShardFile(dir, shard.at("mask"), elements, data.mask);
            !status.ok()) {
          return status;
        }
      }
      if (sequences != entry.at("sequences").get<int64_t>()) {
        return absl::DataLossError(absl::StrCat("manifest.json: the ", SplitName(split),
                                                " shards hold ", sequences, " sequences, not ",
                                                entry.at("sequences").dump()));
      }
    }
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat((dir / kManifest).string(), " is malformed: ", e.what()));
  }
  for (const SplitData* data : {&dataset.train_, &dataset.validation_}) {
    if (std::any_of(data->ids.begin(), data->ids.end(),
                    [&](int32_t id) { return id < 0 || id >= dataset.vocab_size_; }) ||
        std::any_of(data->mask.begin(), data->mask.end(), [](uint8_t m) { return m > 1; })) {
      return absl::DataLossError(absl::StrCat(
          dir.string(), ": the ", data == &dataset.train_ ? "train" : "validation",
          " shards hold an id outside the vocabulary or a mask value other than 0 and 1"));
    }
  }
  return dataset;
}

int64_t PackedDataset::size(Split split) const {
  return sequence_length_ == 0 ? 0
                               : static_cast<int64_t>(data(split).ids.size()) / sequence_length_;
}

Sequence PackedDataset::Get(Split split, int64_t index) const {
  TORCH_CHECK(index >= 0 && index < size(split), "sequence ", index, " of ", SplitName(split),
              " is outside [0, ", size(split), ")");
  const SplitData& split_data = data(split);
  const size_t offset = static_cast<size_t>(index * sequence_length_);
  std::vector<int32_t> ids(split_data.ids.begin() + offset,
                           split_data.ids.begin() + offset + sequence_length_);
  std::vector<uint8_t> mask(split_data.mask.begin() + offset,
                            split_data.mask.begin() + offset + sequence_length_);
  return {.ids = at::tensor(ids, at::kInt).to(at::kLong),
          .mask = at::tensor(mask, at::kByte).to(at::kBool)};
}

}  // namespace specd::train
