#include "kernels/cpu/causal_conv1d.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/vector_exp.h"

namespace specd::kernels::cpu {
namespace {

// Channels per piece of work: a few cache lines of each row, so that even one sequence's decode
// step splits into many pieces.
constexpr int64_t kChannelRun = 256;

// Input row i of a sequence whose rows start at `rows_at` (i < 0: its state's row K − 1 + i).
inline const float* InputRow(const float* x, const ConvSequence& sequence, int64_t rows_at,
                             int64_t channels, int64_t kernel, int64_t i) {
  return i < 0 ? sequence.state + (kernel - 1 + i) * channels : x + (rows_at + i) * channels;
}

// Channels [begin, end) of every sequence.
__attribute__((target_clones("avx512f", "fma", "default"))) void RunChannels(
    const float* x, int64_t channels, const float* weight, int64_t kernel,
    std::span<const ConvSequence> sequences, int64_t begin, int64_t end, bool silu, float* out) {
  const int64_t width = end - begin;
  // Taps transposed to [kernel, width], so that the channel loop is unit-stride.
  thread_local std::vector<float> taps;
  taps.resize(kernel * width);
  for (int64_t c = 0; c < width; ++c) {
    for (int64_t j = 0; j < kernel; ++j) taps[j * width + c] = weight[(begin + c) * kernel + j];
  }
  int64_t first_row = 0;
  for (const ConvSequence& sequence : sequences) {
    for (int64_t t = 0; t < sequence.rows; ++t) {
      float* o = out + (first_row + t) * channels + begin;
      const float* in = InputRow(x, sequence, first_row, channels, kernel, t - kernel + 1);
      for (int64_t c = 0; c < width; ++c) o[c] = taps[c] * in[begin + c];
      for (int64_t j = 1; j < kernel; ++j) {
        in = InputRow(x, sequence, first_row, channels, kernel, t - kernel + 1 + j);
        const float* tap = taps.data() + j * width;
        for (int64_t c = 0; c < width; ++c) o[c] += tap[c] * in[begin + c];
      }
      if (silu) {
        for (int64_t c = 0; c < width; ++c) o[c] = VectorSilu(o[c]);
      }
    }
    if (sequence.next_state != nullptr) {
      // Row j of the next state is input row rows − K + 1 + j; in place, each row read is at or
      // after the one written, so it is read before it is overwritten.
      for (int64_t j = 0; j < kernel - 1; ++j) {
        const float* in =
            InputRow(x, sequence, first_row, channels, kernel, sequence.rows - kernel + 1 + j);
        std::copy_n(in + begin, width, sequence.next_state + j * channels + begin);
      }
    }
    first_row += sequence.rows;
  }
}

}  // namespace

void CausalConv1d(const float* x, int64_t channels, const float* weight, int64_t kernel,
                  std::span<const ConvSequence> sequences, bool silu, float* out,
                  ThreadPool& pool) {
  const int64_t runs = (channels + kChannelRun - 1) / kChannelRun;
  pool.ParallelFor(runs, 1, [&](int64_t first, int64_t last) {
    for (int64_t run = first; run < last; ++run) {
      RunChannels(x, channels, weight, kernel, sequences, run * kChannelRun,
                  std::min(channels, (run + 1) * kChannelRun), silu, out);
    }
  });
}

}  // namespace specd::kernels::cpu
