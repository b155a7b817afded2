// Tokenizer throughput on a corpus of mixed prose and code (bytes/s of input text).
//   tokenizer_bench                        run the benchmarks
//   tokenizer_bench --write_corpus=FILE    write the corpus, for the node peer to encode
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/text/tokenizer.h"
#include "tests/support/paths.h"

namespace specd::text {
namespace {

constexpr size_t kCorpusTargetBytes = 2 << 20;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::vector<std::filesystem::path> SortedFiles(const std::filesystem::path& dir,
                                               std::string_view extension) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file() && (extension.empty() || entry.path().extension() == extension)) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Files every Debian machine has: the license texts (prose), then the Python standard library
// modules (code), in name order, until the corpus reaches kCorpusTargetBytes.
std::string AssembleCorpus() {
  std::vector<std::filesystem::path> files = SortedFiles("/usr/share/common-licenses", "");
  std::vector<std::filesystem::path> python_dirs;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib")) {
    if (entry.path().filename().string().starts_with("python3.")) python_dirs.push_back(entry);
  }
  std::sort(python_dirs.begin(), python_dirs.end());
  for (const auto& dir : python_dirs) {
    for (auto& file : SortedFiles(dir, ".py")) files.push_back(std::move(file));
  }
  std::string corpus;
  for (const auto& file : files) {
    if (corpus.size() >= kCorpusTargetBytes) break;
    corpus += ReadFile(file);
  }
  return corpus;
}

const std::string& Corpus() {
  static const std::string* const corpus = new std::string(AssembleCorpus());
  return *corpus;
}

const Tokenizer& Qwen3() {
  static const Tokenizer* const tokenizer = [] {
    absl::StatusOr<Tokenizer> loaded =
        Tokenizer::FromFile(specd::testing::CacheDir() / "tokenizer/qwen3/tokenizer.json");
    if (!loaded.ok()) {
      std::cerr << loaded.status() << "\n";
      std::exit(1);
    }
    return new Tokenizer(*std::move(loaded));
  }();
  return *tokenizer;
}

void BM_EncodeCorpus(benchmark::State& state) {
  const Tokenizer& tokenizer = Qwen3();
  const std::string& corpus = Corpus();
  size_t tokens = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<TokenId>> ids = tokenizer.Encode(corpus);
    if (!ids.ok()) {
      state.SkipWithError(std::string(ids.status().message()).c_str());
      return;
    }
    tokens = ids->size();
    benchmark::DoNotOptimize(ids->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus.size()));
  state.counters["corpus_bytes"] = static_cast<double>(corpus.size());
  state.counters["tokens"] = static_cast<double>(tokens);
}
// Wall-clock time, like the node peer measures.
BENCHMARK(BM_EncodeCorpus)->Unit(benchmark::kMillisecond)->UseRealTime();

// A chat-sized prompt: the per-call cost a server pays on every request.
void BM_EncodeShortPrompt(benchmark::State& state) {
  const std::string prompt =
      "<|im_start|>user\nWrite a Python function that returns the n-th Fibonacci number, "
      "and explain its complexity.<|im_end|>\n<|im_start|>assistant\n";
  const Tokenizer& tokenizer = Qwen3();
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer.Encode(prompt));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * prompt.size()));
}
BENCHMARK(BM_EncodeShortPrompt);

void BM_DecodeCorpus(benchmark::State& state) {
  const Tokenizer& tokenizer = Qwen3();
  const std::vector<TokenId> ids = *tokenizer.Encode(Corpus());
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer.Decode(ids));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Corpus().size()));
}
BENCHMARK(BM_DecodeCorpus)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace specd::text

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  constexpr std::string_view kWriteCorpus = "--write_corpus=";
  if (argc == 2 && std::string_view(argv[1]).starts_with(kWriteCorpus)) {
    std::ofstream(std::string(argv[1]).substr(kWriteCorpus.size()), std::ios::binary)
        << specd::text::Corpus();
    return 0;
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
