// specd bench decode: prefill and decode speed of the target, what a verify block (and, asked for,
// batched decode and verify steps) costs against a decode step, the decode step's effective weight
// bandwidth against a host copy measured in the same run, and the resident memory of its weights.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cli/specd/commands.h"
#include "cli/specd/model_options_flags.h"
#include "cli/specd/percentile.h"
#include "cli/specd/weight_footprint.h"
#include "common/model/ops/cpu_backend.h"
#include "common/model/ops/op_table.h"
#include "common/model/qwen35_model.h"
#include "common/model/synthetic/qwen35_presets.h"
#include "kernels/cpu/parallel_copy.h"
#include "kernels/cpu/thread_pool.h"

namespace specd::cli {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A GPU runs a forward after the call returns: reading one value of its result waits for the work
// that made it (on the CPU it is there already), so a timed section ends with this.
void WaitFor(const at::Tensor& result) { (void)result.flatten()[0].item<float>(); }

struct DecodeBenchFlags {
  std::string model;
  int64_t prompt_length = 128;
  int64_t tokens = 64;
  int threads = 0;  // 0: a kernel thread per core
  std::string kernels = "backend";
  int64_t copy_mib = 256;
  uint64_t seed = 0;
  int64_t block = 16;                 // rows of the verify block timed against a decode step
  int64_t batch = 0;                  // sequences of the batched steps timed, if any
  model::ModelOptions model_options;  // AddModelOptions' flags
};

// Bytes/s of the best of a few ParallelCopy runs over buffers far larger than the last-level
// cache: the rate at which DRAM can stream weights to these threads. Counts bytes read, as
// the weight bandwidth does.
double HostCopyBandwidth(int64_t mebibytes, int threads) {
  const auto bytes = static_cast<size_t>(mebibytes) << 20;
  std::vector<std::byte> source(bytes, std::byte{1});
  std::vector<std::byte> destination(bytes, std::byte{0});
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    const Clock::time_point start = Clock::now();
    kernels::cpu::ParallelCopy(destination.data(), source.data(), bytes, threads);
    best = std::max(best, static_cast<double>(bytes) / SecondsSince(start));
  }
  return best;
}

// Resident memory of this process (/proc/self/status), in bytes: all of it, what is allocated,
// and the pages of mapped files (the checkpoint) touched so far.
struct ResidentMemory {
  int64_t total = 0;
  int64_t anonymous = 0;
  int64_t file = 0;
};

ResidentMemory ReadResidentMemory() {
  ResidentMemory memory;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "VmRSS:") memory.total = kib << 10;
    if (key == "RssAnon:") memory.anonymous = kib << 10;
    if (key == "RssFile:") memory.file = kib << 10;
  }
  return memory;
}

// Prints what loading the target added to the resident memory next to what its weights should
// take (mapped tensors already of the model's dtype are resident only once touched).
void PrintResidentMemory(const ResidentMemory& before, const WeightFootprint& footprint,
                         c10::ScalarType dtype) {
  const ResidentMemory after = ReadResidentMemory();
  constexpr double kMiB = 1 << 20;
  std::printf(
      "resident         %.1f MiB added by loading: %.1f MiB allocated + %.1f MiB of "
      "mapped checkpoint pages touched\n",
      static_cast<double>(after.total - before.total) / kMiB,
      static_cast<double>(after.anonymous - before.anonymous) / kMiB,
      static_cast<double>(after.file - before.file) / kMiB);
  std::printf(
      "expected         %.1f MiB of weights: %.1f MiB INT4 (codes, scales, zero points as the "
      "kernels hold them) + "
      "%.1f MiB dense (%s, bf16 matrices as stored; mapped ones resident once touched) + %.1f MiB "
      "embedding + %.1f MiB LM head (%s)\n",
      footprint.total_bytes() / kMiB, footprint.int4_bytes / kMiB, footprint.dense_bytes / kMiB,
      c10::toString(dtype), footprint.embedding_bytes / kMiB, footprint.head_bytes / kMiB,
      footprint.head_is_embedding ? "the embedding itself" : "its own");
}

// Batched steps of continuous batching (medians of 8): `sequences` sequences with their own
// caches, each holding `context` first, in one forward. Against a single sequence's block of as
// many rows each shows what the per-sequence work (attention, the DeltaNet recurrence and conv,
// their states' traffic, a rollback's replay) adds to the shared GEMMs.
struct BatchedSeconds {
  double decode = 0;    // one token each
  double verify = 0;    // a block of `block` tokens each, kept for rollback
  double rollback = 0;  // keeping half of each block, as a partly accepted step does
};

absl::StatusOr<BatchedSeconds> TimeBatchedSteps(const model::Qwen35Model& target,
                                                std::span<const int64_t> context, int64_t token,
                                                int64_t sequences, int64_t block) {
  constexpr int kSteps = 8;
  std::vector<model::Qwen35Cache> caches;
  caches.reserve(sequences);
  for (int64_t i = 0; i < sequences; ++i) {
    absl::StatusOr<model::Qwen35Cache> cache =
        target.NewCache(context.size() + kSteps * (1 + block));
    if (!cache.ok()) return cache.status();
    caches.push_back(*std::move(cache));
    if (absl::StatusOr<model::ForwardOutput> filled = target.Prefill(context, caches.back());
        !filled.ok()) {
      return filled.status();
    }
  }
  const std::vector<int64_t> tokens(block, token);
  const auto timed_batch = [&](int64_t rows, bool keep_for_rollback) -> absl::StatusOr<double> {
    std::vector<model::SequenceInput> batch;
    batch.reserve(sequences);
    for (model::Qwen35Cache& cache : caches) {
      batch.push_back({.ids = std::span<const int64_t>(tokens.data(), rows),
                       .cache = &cache,
                       .options = {.logit_rows = model::LogitRows::kAll, .hidden_states = {}},
                       .keep_for_rollback = keep_for_rollback});
    }
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::vector<model::ForwardOutput>> stepped = target.ForwardBatch(batch);
    if (!stepped.ok()) return stepped.status();
    WaitFor(stepped->back().logits);
    return SecondsSince(start);
  };
  std::vector<double> decode, verify, rollback;
  for (int step = 0; step < kSteps; ++step) {
    absl::StatusOr<double> decoded = timed_batch(1, /*keep_for_rollback=*/false);
    if (!decoded.ok()) return decoded.status();
    decode.push_back(*decoded);
    absl::StatusOr<double> verified = timed_batch(block, /*keep_for_rollback=*/true);
    if (!verified.ok()) return verified.status();
    verify.push_back(*verified);
    const Clock::time_point start = Clock::now();
    for (model::Qwen35Cache& cache : caches) {
      if (absl::Status rolled = cache.Rollback(block / 2); !rolled.ok()) return rolled;
    }
    rollback.push_back(SecondsSince(start));
  }
  return BatchedSeconds{.decode = Percentile(decode, 0.5),
                        .verify = Percentile(verify, 0.5),
                        .rollback = Percentile(rollback, 0.5)};
}

absl::Status BenchDecode(const DecodeBenchFlags& flags) {
  if (!model::ops::ConfigureCpuThreads(flags.threads)) {
    return absl::InternalError("the kernel thread pool started before --threads was applied");
  }
  const int threads = kernels::cpu::ThreadPool::Shared().size();
  if (flags.kernels == "reference") model::ops::UseReferenceOnly(true);
  const ResidentMemory before_load = ReadResidentMemory();
  absl::StatusOr<model::Qwen35Model> target =
      model::Qwen35Model::Load(flags.model, flags.model_options);
  if (!target.ok()) return target.status();
  absl::StatusOr<WeightFootprint> footprint = MeasureWeightFootprint(flags.model, *target);
  if (!footprint.ok()) return footprint.status();
  PrintResidentMemory(before_load, *footprint, target->options().dtype);
  const io::Qwen35TextConfig& config = target->config();
  // Forwards as the served steps run them (engine::TargetBatcher): no autograd bookkeeping.
  const c10::InferenceMode inference;

  std::mt19937_64 random(flags.seed);
  std::uniform_int_distribution<int64_t> token(0, config.vocab_size - 1);
  std::vector<int64_t> prompt(flags.prompt_length);
  for (int64_t& id : prompt) id = token(random);
  absl::StatusOr<model::Qwen35Cache> cache =
      target->NewCache(flags.prompt_length + flags.tokens + flags.block);
  if (!cache.ok()) return cache.status();

  // The first prefill pages the memory-mapped weights in, and with --cuda-graphs two decode steps
  // after it capture the cache's decode step (the prefill that follows resets the cache in place,
  // so the graph still applies); the second prefill is the one measured.
  if (absl::StatusOr<model::ForwardOutput> warm = target->Prefill(prompt, *cache); !warm.ok()) {
    return warm.status();
  }
  for (int step = 0; flags.model_options.cuda_graphs && step < 2; ++step) {
    if (absl::StatusOr<at::Tensor> warm = target->Decode(prompt.back(), *cache); !warm.ok()) {
      return warm.status();
    }
  }
  Clock::time_point start = Clock::now();
  absl::StatusOr<model::ForwardOutput> prefill = target->Prefill(prompt, *cache);
  if (!prefill.ok()) return prefill.status();
  WaitFor(prefill->logits);
  const double prefill_s = SecondsSince(start);

  int64_t next = prefill->logits.select(0, 0).argmax().item<int64_t>();
  // The mean, as llama-bench's tg reports, so that the two compare.
  start = Clock::now();
  for (int64_t step = 0; step < flags.tokens; ++step) {
    absl::StatusOr<at::Tensor> logits = target->Decode(next, *cache);
    if (!logits.ok()) return logits.status();
    next = logits->argmax().item<int64_t>();
  }
  const double decode_s = SecondsSince(start) / static_cast<double>(flags.tokens);

  // Verify blocks as a speculative step runs them (every row's logits, kept for rollback), each
  // rolled back so that all start from the same context; the median, as one slow run on a noisy
  // machine moved the mean of the three this used to take by up to 1.5×.
  const std::vector<int64_t> block(flags.block, next);
  constexpr int kBlocks = 7;
  std::vector<double> block_seconds;
  for (int run = 0; run < kBlocks; ++run) {
    start = Clock::now();
    absl::StatusOr<model::ForwardOutput> verified = target->ForwardBlock(
        block, *cache, {.logit_rows = model::LogitRows::kAll, .hidden_states = {}});
    if (!verified.ok()) return verified.status();
    if (absl::Status rolled = cache->Rollback(0); !rolled.ok()) return rolled;
    WaitFor(verified->logits);
    block_seconds.push_back(SecondsSince(start));
  }
  const double block_s = Percentile(block_seconds, 0.5);

  BatchedSeconds batched;
  if (flags.batch > 0) {
    absl::StatusOr<BatchedSeconds> timed =
        TimeBatchedSteps(*target, prompt, next, flags.batch, flags.block);
    if (!timed.ok()) return timed.status();
    batched = *timed;
  }

  const double step_bytes = footprint->DecodeStepBytes();
  const double weight_bandwidth = step_bytes / decode_s;
  const double copy_bandwidth = HostCopyBandwidth(flags.copy_mib, threads);

  const double parameters = static_cast<double>(model::Qwen35ParameterCount(config));
  std::printf("model            %s (%.3g B parameters, %.0f MiB read per decode step)\n",
              flags.model.c_str(), parameters / 1e9, step_bytes / (1 << 20));
  std::printf(
      "threads          %d kernel, %d LibTorch; %s kernels, %s INT4 activations, %s LM head\n",
      threads, at::get_num_threads(), flags.kernels.c_str(),
      quant::Int4ActivationsName(flags.model_options.int4_activations),
      flags.model_options.head == model::HeadWeights::kInt8 ? "int8" : "stored");
  std::printf("prefill          %lld tokens in %.1f ms: %.1f tokens/s\n",
              static_cast<long long>(flags.prompt_length), prefill_s * 1e3,
              static_cast<double>(flags.prompt_length) / prefill_s);
  std::printf("decode           %.2f ms/token over %lld tokens: %.1f tokens/s\n", decode_s * 1e3,
              static_cast<long long>(flags.tokens), 1 / decode_s);
  std::printf("verify block     %lld rows in %.2f ms (median of 7): %.2f decode steps\n",
              static_cast<long long>(flags.block), block_s * 1e3, block_s / decode_s);
  if (flags.batch > 0) {
    const auto sequences = static_cast<long long>(flags.batch);
    std::printf(
        "batched decode   %lld sequences in %.2f ms (median of 8): %.2f decode steps, %.2f verify "
        "blocks\n",
        sequences, batched.decode * 1e3, batched.decode / decode_s, batched.decode / block_s);
    std::printf(
        "batched verify   %lld sequences x %lld rows in %.2f ms (median of 8): %.2f verify blocks; "
        "keeping half of each: %.2f ms\n",
        sequences, static_cast<long long>(flags.block), batched.verify * 1e3,
        batched.verify / block_s, batched.rollback * 1e3);
  }
  std::printf("weight bandwidth %.2f GB/s\n", weight_bandwidth / 1e9);
  std::printf("copy bandwidth   %.2f GB/s (ParallelCopy, %lld MiB, %d threads)\n",
              copy_bandwidth / 1e9, static_cast<long long>(flags.copy_mib), threads);
  std::printf("ratio            %.0f %% of copy bandwidth\n",
              100 * weight_bandwidth / copy_bandwidth);
  return absl::OkStatus();
}

}  // namespace

void AddDecodeBench(CLI::App& bench) {
  auto flags = std::make_shared<DecodeBenchFlags>();
  CLI::App* command = bench.add_subcommand(
      "decode", "Prefill and decode speed, and weight bandwidth against a host copy");
  command->add_option("--model", flags->model, "Checkpoint directory")->required();
  command->add_option("--prompt-len", flags->prompt_length, "Random prompt tokens to prefill")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--tokens", flags->tokens, "Decode steps to time")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--threads", flags->threads,
                   "Threads of the CPU kernels and of LibTorch (default: one per core)")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--kernels", flags->kernels,
                   "backend: the op table's backend for the device; reference: LibTorch ops only")
      ->capture_default_str()
      ->check(CLI::IsMember({"backend", "reference"}));
  command->add_option("--copy-mib", flags->copy_mib, "Size of the copy bandwidth's buffers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", flags->seed, "Seed of the random prompt")->capture_default_str();
  command->add_option("--block", flags->block, "Rows of the verify block timed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--batch", flags->batch,
                   "Also time a decode step and a verify step (--block rows each) of this many "
                   "sequences in one forward, each with its own cache of the prompt (as many "
                   "prefills first)")
      ->check(CLI::PositiveNumber);
  AddModelOptions(*command, flags->model_options);
  command->callback([command, flags] { RunOrExit(*command, [&] { return BenchDecode(*flags); }); });
}

}  // namespace specd::cli
