// W4A16 GEMV/GEMM against a float32 GEMM of the same shape (OpenBLAS sgemm), the dense kernel on
// a bf16 weight (what a bf16 checkpoint's unquantized matrices and head run), and the VNNI-layout
// kernel on int8 activations with 4-bit (W4A8) and 8-bit (W8A8, the int8 head) weights and on bf16
// activations with 4-bit ones (W4Bf16, AVX512-BF16), on the
// Qwen3.5-4B linear shapes, next to the host copy bandwidth measured in the same process. A decode
// step reads every weight once and ~2 GB of them never stay in cache, so each benchmark cycles
// through weights spread over a buffer larger than the last-level cache: the numbers are DRAM
// numbers, as in serving. Prints a summary with effective GB/s (weight + scale bytes / time)
// and the speed-up over sgemm after the Google Benchmark output.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/dense_gemm.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/parallel_copy.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vnni_gemm.h"
#include "kernels/cpu/w4a16_gemm.h"

extern "C" void openblas_set_num_threads(int threads);  // not in the netlib cblas.h

namespace specd::kernels::cpu {
namespace {

struct LinearShape {
  const char* name;
  int64_t in;   // K
  int64_t out;  // N
};

// Qwen3.5-4B: hidden 2560, 16 query / 4 KV heads of 256 (q_proj doubles for the output gate),
// MLP 9216, DeltaNet 16 key / 32 value heads of 128.
constexpr LinearShape kShapes[] = {
    {"q_proj", 2560, 8192},    {"k_proj", 2560, 1024},
    {"v_proj", 2560, 1024},    {"o_proj", 4096, 2560},
    {"gate_proj", 2560, 9216}, {"up_proj", 2560, 9216},
    {"down_proj", 9216, 2560}, {"in_proj_qkvz", 2560, 2 * 2048 + 2 * 4096},
    {"out_proj", 4096, 2560},
};
constexpr int64_t kRows[] = {1, 4, 16, 64};
constexpr int64_t kGroupSize = 128;

// One buffer, filled once, that every benchmark reads its weights from: 1 GiB, twice the L3 the
// OS reports (508 MB), so a benchmark that cycles through it reads from DRAM, on huge pages as
// the model's INT4 weights are. Its words are small floats, which are also valid packed INT4
// words (any nibbles) and sane scales.
std::span<const float> Arena() {
  static const HugePageVector<float> arena = [] {
    HugePageVector<float> values((size_t{1} << 30) / sizeof(float));
    uint32_t state = 1;
    for (float& v : values) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) * 0x1p-30f - 0x1p-7f;  // in [-1/128, 1/128)
    }
    return values;
  }();
  return arena;
}

// The same size of bf16 weights: each word of it two small bf16 values (the arena's floats cut
// to their top halves; the bottom halves alone would be arbitrary bits, denormals among them).
std::span<const float> Bf16Arena() {
  static const HugePageVector<float> arena = [] {
    HugePageVector<float> words(Arena().size());
    std::vector<uint32_t> bits(Arena().size());
    std::memcpy(bits.data(), Arena().data(), Arena().size_bytes());
    for (size_t i = 0; i < bits.size(); ++i) {
      const uint32_t pair = (bits[i] >> 16) | (bits[(i * 7 + 1) % bits.size()] & 0xffff0000u);
      std::memcpy(&words[i], &pair, sizeof pair);
    }
    return words;
  }();
  return arena;
}

// Cycles through consecutive slices of `floats` elements of `arena`.
class ColdSlices {
 public:
  explicit ColdSlices(size_t floats, std::span<const float> arena = Arena())
      : arena_(arena), floats_(floats), count_(arena.size() / floats) {}
  const float* Next() {
    const float* slice = arena_.data() + next_ * floats_;
    next_ = (next_ + 1) % count_;
    return slice;
  }

 private:
  std::span<const float> arena_;
  size_t floats_;
  size_t count_;
  size_t next_ = 0;
};

std::vector<float> Activations(int64_t rows, int64_t cols) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = dist(rng);
  return x;
}

void BM_W4A16(benchmark::State& state, LinearShape shape) {
  const int64_t rows = state.range(0);
  const int64_t packed_words = shape.out * shape.in / 8;
  const int64_t scales = shape.out * (shape.in / kGroupSize);
  ColdSlices slices(packed_words + scales);  // words, then the scales, in one slice
  const std::vector<float> x = Activations(rows, shape.in);
  std::vector<float> y(rows * shape.out);
  for (auto _ : state) {
    const float* slice = slices.Next();
    const Int4Matrix w{.packed = reinterpret_cast<const int32_t*>(slice),
                       .scales = slice + packed_words,
                       .rows = shape.out,
                       .cols = shape.in,
                       .group_size = kGroupSize};
    W4A16Gemm(x.data(), rows, w, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * (packed_words + scales) * 4);
}

void BM_Sgemm(benchmark::State& state, LinearShape shape) {
  const int64_t rows = state.range(0);
  openblas_set_num_threads(ThreadPool::Shared().size());
  ColdSlices slices(shape.out * shape.in);
  const std::vector<float> x = Activations(rows, shape.in);
  std::vector<float> y(rows * shape.out);
  for (auto _ : state) {
    const float* weight = slices.Next();
    // y[M, N] = x[M, K] · W[N, K]ᵀ; one row goes to gemv, which OpenBLAS's gemm does not do.
    if (rows == 1) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, shape.out, shape.in, 1.0f, weight, shape.in,
                  x.data(), 1, 0.0f, y.data(), 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, shape.out, shape.in, 1.0f,
                  x.data(), shape.in, weight, shape.in, 0.0f, y.data(), shape.out);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * shape.out * shape.in * 4);
}

// Copies of `shape`'s weights in the VNNI layout, made once per shape and width from arena slices
// (INT4 words and scales repacked, or bf16 rows rounded to 8 bits): as many as fill the arena's
// size (so that cycling through them reads DRAM too), at most 96.
const std::vector<VnniMatrix>& VnniWeights(const LinearShape& shape, int bits) {
  static std::map<std::string, std::vector<VnniMatrix>> made;
  std::vector<VnniMatrix>& weights = made[shape.name + std::to_string(bits)];
  if (!weights.empty()) return weights;
  const int64_t packed_words = shape.out * shape.in / 8;
  const int64_t scales = shape.out * (shape.in / kGroupSize);
  ColdSlices int4_slices(packed_words + scales);
  ColdSlices bf16_slices(shape.out * shape.in / 2, Bf16Arena());
  const int64_t bytes = bits == 4 ? packed_words * 4 : shape.out * shape.in;
  const auto copies =
      std::clamp<int64_t>(static_cast<int64_t>(Arena().size_bytes()) / bytes, 8, 96);
  for (int64_t i = 0; i < copies; ++i) {
    if (bits == 8) {
      weights.push_back(QuantizeRowsForVnni(
          {.data = bf16_slices.Next(), .bf16 = true, .rows = shape.out, .cols = shape.in}));
      continue;
    }
    const float* slice = int4_slices.Next();
    weights.push_back(RepackInt4ForVnni({.packed = reinterpret_cast<const int32_t*>(slice),
                                         .scales = slice + packed_words,
                                         .rows = shape.out,
                                         .cols = shape.in,
                                         .group_size = kGroupSize}));
  }
  return weights;
}

// The same weights in the VNNI layout on int8 activations: 4-bit codes (W4A8; the bytes counted
// are the packed ones) or bf16 weights rounded to 8 bits per row (W8A8, the int8 LM head); or
// 4-bit codes on bf16 activations (`bf16_activations`).
void BM_Vnni(benchmark::State& state, LinearShape shape, int bits, bool bf16_activations) {
  if (bf16_activations ? !CpuHasBf16Gemm() : BestVnniGemmIsa() == VnniGemmIsa::kNone) {
    state.SkipWithError(bf16_activations ? "no AVX512-BF16" : "neither AVX2 nor AVX-512 VNNI");
    return;
  }
  const int64_t rows = state.range(0);
  const std::vector<VnniMatrix>& weights = VnniWeights(shape, bits);
  const std::vector<float> x = Activations(rows, shape.in);
  std::vector<float> y(rows * shape.out);
  size_t next = 0;
  for (auto _ : state) {
    const VnniMatrix& w = weights[next++ % weights.size()];
    if (bf16_activations) {
      Bf16Gemm(x.data(), rows, w, y.data());
    } else {
      VnniGemm(x.data(), rows, w, y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  const int64_t bytes = bits == 4
                            ? (shape.out * shape.in / 8 + shape.out * (shape.in / kGroupSize)) * 4
                            : weights.front().ByteSize();
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_DenseBf16(benchmark::State& state, LinearShape shape) {
  const int64_t rows = state.range(0);
  ColdSlices slices(shape.out * shape.in / 2, Bf16Arena());  // two bf16 weights per word
  const std::vector<float> x = Activations(rows, shape.in);
  std::vector<float> y(rows * shape.out);
  for (auto _ : state) {
    DenseGemm(x.data(), rows,
              {.data = slices.Next(), .bf16 = true, .rows = shape.out, .cols = shape.in}, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * shape.out * shape.in * 2);
}

// Copies the arena's first half onto a buffer of the same size: the read bandwidth a GEMV
// streaming its weights can hope for.
void BM_HostCopy(benchmark::State& state) {
  const size_t bytes = Arena().size_bytes() / 2;
  const auto* src = reinterpret_cast<const std::byte*>(Arena().data());
  HugePageVector<std::byte> dst(bytes);
  for (auto _ : state) {
    ParallelCopy(dst.data(), src, bytes, ThreadPool::Shared().size());
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);  // bytes read, as for the GEMMs
}

// Collects time and bytes/s per benchmark while the console shows the usual output: the
// median when --benchmark_repetitions asks for several runs, else the one run.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (!median && (run.run_type != Run::RT_Iteration || run.repetitions > 1)) continue;
      const std::string name =
          run.run_name.function_name + (run.run_name.args.empty() ? "" : "/" + run.run_name.args);
      seconds_[name] = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      const auto bytes = run.counters.find("bytes_per_second");
      if (bytes != run.counters.end()) bytes_per_second_[name] = bytes->second;
    }
  }

  void PrintSummary() const {
    const double copy = bytes_per_second_.count("HostCopy") ? bytes_per_second_.at("HostCopy") : 0;
    std::printf("\nhost copy (read side): %.1f GB/s\n", copy / 1e9);
    std::printf("%-14s %3s %11s %11s %9s %11s %11s %9s %11s %11s %11s %11s %11s %11s %11s %11s\n",
                "shape", "M", "w4a16 us", "sgemm us", "speed-up", "w4a16 GB/s", "sgemm GB/s",
                "of copy", "bf16 us", "bf16 GB/s", "w4a8 us", "w4a8 GB/s", "w8a8 us", "w8a8 GB/s",
                "w4bf16 us", "w4bf16 GB/s");
    for (const LinearShape& shape : kShapes) {
      for (int64_t rows : kRows) {
        const std::string suffix = std::string(shape.name) + "/" + std::to_string(rows);
        const std::string ours = "W4A16/" + suffix;
        const std::string theirs = "Sgemm/" + suffix;
        if (!seconds_.count(ours) || !seconds_.count(theirs)) continue;
        const double gbps = bytes_per_second_.at(ours);
        // 0 where a kernel did not run (filtered out, or no VNNI).
        const auto time_us = [&](const std::string& name) {
          return seconds_.count(name) ? seconds_.at(name) * 1e6 : 0.0;
        };
        const auto rate = [&](const std::string& name) {
          return bytes_per_second_.count(name) ? bytes_per_second_.at(name) / 1e9 : 0.0;
        };
        const std::string bf16 = "DenseBf16/" + suffix, w4a8 = "W4A8/" + suffix;
        const std::string w8a8 = "W8A8/" + suffix, w4bf16 = "W4Bf16/" + suffix;
        std::printf(
            "%-14s %3lld %11.1f %11.1f %8.2fx %11.1f %11.1f %8.0f%% %11.1f %11.1f %11.1f %11.1f "
            "%11.1f %11.1f %11.1f %11.1f\n",
            shape.name, static_cast<long long>(rows), time_us(ours), time_us(theirs),
            seconds_.at(theirs) / seconds_.at(ours), gbps / 1e9, rate(theirs),
            copy > 0 ? 100.0 * gbps / copy : 0.0, time_us(bf16), rate(bf16), time_us(w4a8),
            rate(w4a8), time_us(w8a8), rate(w8a8), time_us(w4bf16), rate(w4bf16));
      }
    }
  }

 private:
  std::map<std::string, double> seconds_;  // per iteration, real time
  std::map<std::string, double> bytes_per_second_;
};

void RegisterAll() {
  benchmark::RegisterBenchmark("HostCopy", BM_HostCopy)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (const LinearShape& shape : kShapes) {
    for (int64_t rows : kRows) {
      benchmark::RegisterBenchmark(("W4A16/" + std::string(shape.name)).c_str(), BM_W4A16, shape)
          ->Arg(rows)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("Sgemm/" + std::string(shape.name)).c_str(), BM_Sgemm, shape)
          ->Arg(rows)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("W4A8/" + std::string(shape.name)).c_str(), BM_Vnni, shape, 4,
                                   false)
          ->Arg(rows)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("W8A8/" + std::string(shape.name)).c_str(), BM_Vnni, shape, 8,
                                   false)
          ->Arg(rows)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("W4Bf16/" + std::string(shape.name)).c_str(), BM_Vnni, shape, 4,
                                   true)
          ->Arg(rows)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("DenseBf16/" + std::string(shape.name)).c_str(), BM_DenseBf16,
                                   shape)
          ->Arg(rows)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace specd::kernels::cpu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  specd::kernels::cpu::RegisterAll();
  specd::kernels::cpu::SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintSummary();
  benchmark::Shutdown();
  return 0;
}
