#include "kernels/cpu/causal_conv1d.h"

#include <algorithm>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// Channels per piece of work: a few cache lines of each row, so that a decode step's batch still
// splits into many pieces.
constexpr int64_t kChannelRun = 256;

struct Piece {
  int64_t sequence, first_row, begin, end;  // channels [begin, end)
};

// Input row i of a sequence whose rows start at `rows_at` (i < 0: its state's row K − 1 + i).
inline const float* InputRow(const float* x, const ConvSequence& sequence, int64_t rows_at,
                             int64_t channels, int64_t kernel, int64_t i) {
  return i < 0 ? sequence.state + (kernel - 1 + i) * channels : x + (rows_at + i) * channels;
}

__attribute__((target_clones("avx512f", "fma", "default"))) void RunPiece(
    const float* x, int64_t channels, const float* weight, int64_t kernel,
    const ConvSequence& sequence, const Piece& piece, float* out) {
  const int64_t width = piece.end - piece.begin;
  // Taps transposed to [kernel, width], so that the channel loop is unit-stride.
  thread_local std::vector<float> taps;
  taps.resize(kernel * width);
  for (int64_t c = 0; c < width; ++c) {
    for (int64_t j = 0; j < kernel; ++j)
      taps[j * width + c] = weight[(piece.begin + c) * kernel + j];
  }
  for (int64_t t = 0; t < sequence.rows; ++t) {
    float* o = out + (piece.first_row + t) * channels + piece.begin;
    const float* in = InputRow(x, sequence, piece.first_row, channels, kernel, t - kernel + 1);
    for (int64_t c = 0; c < width; ++c) o[c] = taps[c] * in[piece.begin + c];
    for (int64_t j = 1; j < kernel; ++j) {
      in = InputRow(x, sequence, piece.first_row, channels, kernel, t - kernel + 1 + j);
      const float* tap = taps.data() + j * width;
      for (int64_t c = 0; c < width; ++c) o[c] += tap[c] * in[piece.begin + c];
    }
  }
  if (sequence.next_state == nullptr) return;
  // Row j of the next state is input row rows − K + 1 + j; in place, each row read is at or after
  // the one written, so it is read before it is overwritten.
  for (int64_t j = 0; j < kernel - 1; ++j) {
    const float* in =
        InputRow(x, sequence, piece.first_row, channels, kernel, sequence.rows - kernel + 1 + j);
    std::copy_n(in + piece.begin, width, sequence.next_state + j * channels + piece.begin);
  }
}

}  // namespace

void CausalConv1d(const float* x, int64_t channels, const float* weight, int64_t kernel,
                  std::span<const ConvSequence> sequences, float* out, ThreadPool& pool) {
  std::vector<Piece> pieces;
  int64_t first_row = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    for (int64_t begin = 0; begin < channels; begin += kChannelRun) {
      pieces.push_back({.sequence = static_cast<int64_t>(s),
                        .first_row = first_row,
                        .begin = begin,
                        .end = std::min(channels, begin + kChannelRun)});
    }
    first_row += sequences[s].rows;
  }
  pool.ParallelFor(static_cast<int64_t>(pieces.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      RunPiece(x, channels, weight, kernel, sequences[pieces[p].sequence], pieces[p], out);
    }
  });
}

}  // namespace specd::kernels::cpu
