#pragma once
// Each row's largest entry: greedy decoding's tokens, read from a forward's logits (a vocabulary of
// ~250k columns per row; a row per sequence of a decode step, a block's rows in a verify, 15 per
// draft). Bound by memory, so the pool splits the work by rows and, with fewer rows than threads,
// each row's columns as well. As at::argmax: the first of equal entries wins, and a NaN (the
// first one) beats every number.
//
// x [rows, cols] float32, row r at x + r · stride; out [rows].
#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specd::kernels::cpu {

void RowArgmax(const float* x, int64_t rows, int64_t cols, int64_t stride, int64_t* out,
               ThreadPool& pool = ThreadPool::Shared());

}  // namespace specd::kernels::cpu
