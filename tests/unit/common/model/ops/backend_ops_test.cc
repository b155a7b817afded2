// Every op of the table × shape × backend this build has, against the reference (llama.cpp's
// test-backend-ops is the model), Qwen3.5-4B's shapes included. Inputs are random; each backend
// runs them on its device and the reference on the CPU in float32, the ground truth. A backend
// whose device this machine lacks is skipped, so the same test proves a CUDA backend on a GPU
// machine; an op a backend leaves out must run the reference on its device.
#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/model/ops/op_table.h"
#include "common/model/ops/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/vnni_gemm.h"
#include "tests/unit/common/int4/random_int4_weight.h"

namespace specd::model::ops {
namespace {

// Qwen3.5-4B (research/qwen35.md §1.1): hidden 2560, MLP 9216, gated attention 16 query heads
// (q_proj doubled by the gate) over 4 KV heads of 256 with a rotary quarter, Gated DeltaNet 16
// key and 32 value heads of 128 with a width-4 convolution over 8192 channels. Its DFlash
// drafter's attention: 32 heads over 8 KV heads of 128.
constexpr int64_t kHidden = 2560, kIntermediate = 9216;
constexpr int64_t kHeads = 16, kKvHeads = 4, kHeadDim = 256, kRotaryDim = 64;
constexpr int64_t kKeyHeads = 16, kValueHeads = 32, kDeltaHeadDim = 128, kConvChannels = 8192;
constexpr int64_t kDraftHeads = 32, kDraftKvHeads = 8, kDraftHeadDim = 128;

bool Present(c10::DeviceType device) {
  return device == c10::DeviceType::CPU || (device == c10::DeviceType::CUDA && at::hasCUDA());
}

// max |actual − expected| ≤ tolerance · max |expected|, on the CPU.
::testing::AssertionResult Close(const at::Tensor& actual, const at::Tensor& expected,
                                 double tolerance) {
  const at::Tensor a = actual.cpu().to(at::kDouble), e = expected.cpu().to(at::kDouble);
  if (a.sizes() != e.sizes()) {
    return ::testing::AssertionFailure() << "shape " << a.sizes() << " vs " << e.sizes();
  }
  const double scale = std::max(e.abs().max().item<double>(), 1e-30);
  const double error = (a - e).abs().max().item<double>() / scale;
  if (error > tolerance) {
    return ::testing::AssertionFailure() << "relative error " << error << " > " << tolerance;
  }
  return ::testing::AssertionSuccess();
}

// Runs `check` for every present backend that implements `entry`; a backend without its own
// must dispatch to the reference.
template <typename Entry>
void ForEachBackend(Entry OpTable::*entry, const std::function<void(const Backend&)>& check) {
  for (const Backend& backend : Backends()) {
    SCOPED_TRACE(std::string(backend.name));
    if (!Present(backend.device)) continue;
    if (backend.ops.*entry == nullptr) {
      EXPECT_EQ(OpsFor(backend.device).*entry, ReferenceOps().*entry);
      continue;
    }
    EXPECT_EQ(OpsFor(backend.device).*entry, backend.ops.*entry);
    check(backend);
  }
}

at::Tensor On(const at::Tensor& x, const Backend& backend) { return x.to(backend.device); }

TEST(BackendOpsTest, DenseProjection) {
  struct Shape {
    int64_t rows, in, out;
  };
  // Tiles with ragged edges in rows, columns and outputs; verify blocks and batches; the 4B
  // model's MLP, q_proj and a slice of its head.
  const std::vector<Shape> shapes = {{1, 1, 1},
                                     {1, 7, 3},
                                     {1, 300, 37},
                                     {1, 1024, 256},
                                     {3, 64, 16},
                                     {5, 33, 9},
                                     {16, 512, 67},
                                     {64, 256, 64},
                                     {65, 256, 64},
                                     {1, kHidden, kIntermediate},
                                     {1, kIntermediate, kHidden},
                                     {4, kHidden, 2 * kHeads * kHeadDim},
                                     {16, kHidden, 16384}};
  ForEachBackend(&OpTable::project, [&](const Backend& backend) {
    for (const Shape& shape : shapes) {
      // A float32 weight, and a bf16 one as a bf16 checkpoint's is kept on a float32 model.
      for (const at::ScalarType stored : {at::kFloat, at::kBFloat16}) {
        SCOPED_TRACE(::testing::Message() << shape.rows << "×" << shape.in << " → " << shape.out
                                          << " " << at::toString(stored));
        at::manual_seed(shape.in * 31 + shape.out);
        const at::Tensor x = at::randn({shape.rows, shape.in});
        const at::Tensor weight = at::randn({shape.out, shape.in}).to(stored);
        const at::Tensor y = backend.ops.project(On(x, backend), On(weight, backend));
        EXPECT_EQ(y.scalar_type(), at::kFloat);
        EXPECT_TRUE(Close(y, ReferenceOps().project(x, weight), 1e-5));
      }
    }
  });
}

struct Int4Case {
  quant::testing::Int4Layout layout;
  int64_t rows;
};

// Ragged row blocks and x-row tiles, zero points, act order, and the 4B shapes at the row counts
// of decode, verify blocks and batches.
std::vector<Int4Case> Int4Cases() {
  return {
      {{.rows = 37, .cols = 256, .group_size = 128}, 1},
      {{.rows = 20, .cols = 192, .group_size = 32, .symmetric = false}, 3},
      {{.rows = 29, .cols = 256, .group_size = 64, .act_order = true}, 6},
      {{.rows = kIntermediate, .cols = kHidden, .group_size = 128}, 1},
      {{.rows = kHidden, .cols = kIntermediate, .group_size = 128, .symmetric = false}, 16},
      {{.rows = 2 * kHeads * kHeadDim, .cols = kHidden, .group_size = 128}, 64},
  };
}

std::string Described(const Int4Case& c) {
  return (::testing::Message() << c.rows << "×" << c.layout.cols << " → " << c.layout.rows
                               << ", group " << c.layout.group_size)
      .GetString();
}

// A random weight of `c`'s layout, prepared for the CPU kernel (exact activations).
absl::StatusOr<quant::Int4KernelWeight> RandomKernelWeight(const Int4Case& c, std::mt19937& rng) {
  return quant::Int4KernelWeight::Prepare(quant::testing::RandomPackedWeight(c.layout, rng));
}

TEST(BackendOpsTest, Int4Projection) {
  const std::vector<Int4Case> cases = Int4Cases();
  ForEachBackend(&OpTable::project_int4, [&](const Backend& backend) {
    std::mt19937 rng(17);
    for (const Int4Case& c : cases) {
      SCOPED_TRACE(Described(c));
      const absl::StatusOr<quant::Int4KernelWeight> weight = RandomKernelWeight(c, rng);
      ASSERT_TRUE(weight.ok()) << weight.status();
      const at::Tensor x = at::randn({c.rows, c.layout.cols});
      EXPECT_TRUE(Close(backend.ops.project_int4(On(x, backend), *weight),
                        ReferenceOps().project_int4(x, *weight), 1e-5));
    }
  });
}

// A W4A16 weight held in tensors (a GPU's layout, int4_tensors.h) holds what the host layout
// holds: on the CPU the reference multiplies by both alike, act order and zero points included.
TEST(Int4TensorsTest, HoldWhatTheHostLayoutHolds) {
  std::mt19937 rng(29);
  for (const Int4Case& c : Int4Cases()) {
    if (c.layout.rows * c.layout.cols > 1 << 20) continue;  // the small, ragged ones
    SCOPED_TRACE(Described(c));
    const absl::StatusOr<quant::Int4KernelWeight> weight = RandomKernelWeight(c, rng);
    ASSERT_TRUE(weight.ok()) << weight.status();
    const absl::StatusOr<Int4Tensors> tensors = Int4Tensors::Upload(*weight, at::kCPU);
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    EXPECT_EQ(tensors->rows(), c.layout.rows);
    EXPECT_EQ(tensors->cols(), c.layout.cols);
    EXPECT_EQ(tensors->input_order.defined(), c.layout.act_order);
    // Half a byte a weight, a bf16 scale and (with zero points) a byte per row and group.
    const int64_t groups = c.layout.cols / c.layout.group_size;
    EXPECT_EQ(tensors->ByteSize(), c.layout.rows * c.layout.cols / 2 +
                                       c.layout.rows * groups * (c.layout.symmetric ? 2 : 3));
    const at::Tensor x = at::randn({c.rows, c.layout.cols});
    EXPECT_TRUE(Close(ProjectInt4(x, *tensors), ReferenceOps().project_int4(x, *weight), 1e-5));
  }
}

// The device layout's projection on bf16 activations, a GPU model's dtype. The output is bf16
// (half an ulp is 2^-9 ≈ 0.2 % of a value) and the kernel rounds each dequantised weight to bf16
// too: 1e-2 of the largest output bounds both.
TEST(BackendOpsTest, Int4ProjectionOfTensorsOnBfloat16) {
  const std::vector<Int4Case> cases = Int4Cases();
  ForEachBackend(&OpTable::project_int4_tensors, [&](const Backend& backend) {
    std::mt19937 rng(31);
    for (const Int4Case& c : cases) {
      SCOPED_TRACE(Described(c));
      const absl::StatusOr<quant::Int4KernelWeight> weight = RandomKernelWeight(c, rng);
      ASSERT_TRUE(weight.ok()) << weight.status();
      const absl::StatusOr<Int4Tensors> tensors = Int4Tensors::Upload(*weight, backend.device);
      ASSERT_TRUE(tensors.ok()) << tensors.status();
      const at::Tensor x = at::randn({c.rows, c.layout.cols}).to(at::kBFloat16);
      const at::Tensor y = backend.ops.project_int4_tensors(On(x, backend), *tensors);
      EXPECT_EQ(y.scalar_type(), at::kBFloat16);
      EXPECT_TRUE(Close(y, ReferenceOps().project_int4(x.to(at::kFloat), *weight), 1e-2));
    }
  });
}

// The same weights on rounded activations (`mode`), against the exact projection, to `tolerance`
// of the largest output.
void ExpectRoundedProjection(quant::Int4Activations mode, double tolerance) {
  std::mt19937 rng(19);
  for (const Int4Case& c : Int4Cases()) {
    SCOPED_TRACE(Described(c));
    const quant::PackedInt4Weight packed = quant::testing::RandomPackedWeight(c.layout, rng);
    const absl::StatusOr<quant::Int4KernelWeight> exact = quant::Int4KernelWeight::Prepare(packed);
    const absl::StatusOr<quant::Int4KernelWeight> rounded =
        quant::Int4KernelWeight::Prepare(packed, mode);
    ASSERT_TRUE(exact.ok() && rounded.ok()) << rounded.status();
    EXPECT_EQ(rounded->activations(), mode);
    // The same weights, whichever layout holds them (up to the rounding of s · (8 + zero)).
    std::vector<float> held = rounded->Dequantize(), stored = exact->Dequantize();
    const auto as_tensor = [&](std::vector<float>& values) {
      return at::from_blob(values.data(), {c.layout.rows, c.layout.cols}, at::kFloat);
    };
    EXPECT_TRUE(Close(as_tensor(held), as_tensor(stored), 1e-6));
    at::manual_seed(c.layout.rows * 7 + c.rows);
    const at::Tensor x = at::randn({c.rows, c.layout.cols});
    EXPECT_TRUE(Close(OpsFor(c10::DeviceType::CPU).project_int4(x, *rounded),
                      ReferenceOps().project_int4(x, *exact), tolerance));
  }
}

// W4A8: activations rounded to int8 per block of 128 (groups of 128). The error is the rounding's:
// measured 0.6–0.8 % of the largest output on the 4B shapes, 1.4 % where a few outputs make the
// largest one small.
TEST(BackendOpsTest, Int4ProjectionOnInt8Activations) {
  if (kernels::cpu::BestVnniGemmIsa() == kernels::cpu::VnniGemmIsa::kNone) {
    GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  }
  ExpectRoundedProjection(quant::Int4Activations::kInt8, 2e-2);
}

// bf16 activations, each rounded to 8 significant bits: measured 0.16–0.27 % of the largest
// output on the same cases, a fifth to a quarter of int8's error.
TEST(BackendOpsTest, Int4ProjectionOnBf16Activations) {
  if (!kernels::cpu::CpuHasBf16Gemm()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  ExpectRoundedProjection(quant::Int4Activations::kBf16, 4e-3);
}

// The int8 LM head: rows rounded to 8 bits on their absolute maximum hold the weight to half a
// step (1/254 of the row's largest), and the kernel's only other error is the int8 activations'.
TEST(BackendOpsTest, Int8Projection) {
  struct Shape {
    int64_t rows, in, out;
  };
  // Ragged row blocks and x-row tiles; a slice of the 4B head at decode, verify block and batch.
  const std::vector<Shape> shapes = {
      {1, 64, 37}, {3, 96, 20}, {1, kHidden, 4096}, {16, kHidden, 4100}, {64, kHidden, 512}};
  ForEachBackend(&OpTable::project_int8, [&](const Backend& backend) {
    for (const Shape& shape : shapes) {
      for (const at::ScalarType stored : {at::kFloat, at::kBFloat16}) {
        SCOPED_TRACE(::testing::Message() << shape.rows << "×" << shape.in << " → " << shape.out
                                          << " " << at::toString(stored));
        at::manual_seed(shape.in * 13 + shape.out);
        const at::Tensor weight = at::randn({shape.out, shape.in}).to(stored);
        const kernels::cpu::VnniMatrix int8 =
            kernels::cpu::QuantizeRowsForVnni({.data = weight.data_ptr(),
                                               .bf16 = stored == at::kBFloat16,
                                               .rows = shape.out,
                                               .cols = shape.in});
        std::vector<float> held = kernels::cpu::Dequantize(int8);
        const at::Tensor dense = weight.to(at::kFloat);
        const at::Tensor step = dense.abs().amax(1, /*keepdim=*/true) / 127;
        EXPECT_TRUE((at::from_blob(held.data(), {shape.out, shape.in}) - dense)
                        .abs()
                        .le(step * 0.501)
                        .all()
                        .item<bool>());
        const at::Tensor x = at::randn({shape.rows, shape.in});
        EXPECT_TRUE(Close(backend.ops.project_int8(On(x, backend), int8),
                          ReferenceOps().project_int8(x, int8), 2e-2));
      }
    }
  });
}

// Whatever backend runs it, a projection refuses an input of the wrong width, naming both widths.
TEST(OpsTest, ProjectionsRefuseAnInputOfTheWrongWidth) {
  std::mt19937 rng(23);
  const absl::StatusOr<quant::Int4KernelWeight> int4 = quant::Int4KernelWeight::Prepare(
      quant::testing::RandomPackedWeight({.rows = 16, .cols = 64, .group_size = 32}, rng));
  ASSERT_TRUE(int4.ok()) << int4.status();
  const at::Tensor weight = at::randn({16, 64});
  const kernels::cpu::VnniMatrix int8 = kernels::cpu::QuantizeRowsForVnni(
      {.data = weight.data_ptr(), .bf16 = false, .rows = 16, .cols = 64});
  const absl::StatusOr<Int4Tensors> int4_tensors = Int4Tensors::Upload(*int4, at::kCPU);
  ASSERT_TRUE(int4_tensors.ok()) << int4_tensors.status();
  const at::Tensor x = at::randn({2, 96});
  EXPECT_THAT([&] { ProjectInt4(x, *int4); },
              ::testing::ThrowsMessage<c10::Error>(
                  ::testing::HasSubstr("W4A16 projection expects 64 input features, got 96")));
  EXPECT_THAT([&] { ProjectInt4(x, *int4_tensors); },
              ::testing::ThrowsMessage<c10::Error>(
                  ::testing::HasSubstr("W4A16 projection expects 64 input features, got 96")));
  EXPECT_THAT([&] { ProjectInt8(x, int8); },
              ::testing::ThrowsMessage<c10::Error>(
                  ::testing::HasSubstr("int8 projection expects 64 input features, got 96")));
}

struct DeltaRuleInputs {
  at::Tensor q, k, v, g, beta, state;
};

DeltaRuleInputs RandomDeltaRuleInputs(int64_t length, int64_t heads, int64_t dim) {
  at::manual_seed(length * 7 + heads);
  const auto unit = [](const at::Tensor& x) { return x / x.norm(2, -1, true); };
  return {.q = unit(at::randn({length, heads, dim})) / std::sqrt(static_cast<double>(dim)),
          .k = unit(at::randn({length, heads, dim})),
          .v = at::randn({length, heads, dim}),
          .g = -at::rand({length, heads}) * 0.5,
          .beta = at::rand({length, heads}),
          .state = at::randn({heads, dim, dim})};
}

TEST(BackendOpsTest, RecurrentGatedDeltaRule) {
  struct Shape {
    int64_t tokens, heads, dim;
  };
  const std::vector<Shape> shapes = {
      {1, 3, 24}, {7, 3, 24}, {1, kValueHeads, kDeltaHeadDim}, {8, kValueHeads, kDeltaHeadDim}};
  ForEachBackend(&OpTable::recurrent_gated_delta_rule, [&](const Backend& backend) {
    for (const Shape& shape : shapes) {
      for (const bool in_place : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << shape.tokens << " tokens × " << shape.heads << " heads of " << shape.dim
                     << (in_place ? ", in place" : ""));
        const DeltaRuleInputs in = RandomDeltaRuleInputs(shape.tokens, shape.heads, shape.dim);
        at::Tensor expected_state = at::empty_like(in.state);
        const at::Tensor expected = ReferenceOps().recurrent_gated_delta_rule(
            in.q, in.k, in.v, in.g, in.beta, in.state, expected_state);
        at::Tensor state = On(in_place ? in.state.clone() : at::empty_like(in.state), backend);
        const at::Tensor initial = in_place ? state : On(in.state, backend);
        const at::Tensor actual = backend.ops.recurrent_gated_delta_rule(
            On(in.q, backend), On(in.k, backend), On(in.v, backend), On(in.g, backend),
            On(in.beta, backend), initial, state);
        EXPECT_TRUE(Close(actual, expected, 1e-5));
        EXPECT_TRUE(Close(state, expected_state, 1e-5));
        if (!in_place) {
          EXPECT_TRUE(at::equal(initial.cpu(), in.state)) << "the initial state is left as it was";
        }
      }
    }
  });
}

TEST(BackendOpsTest, ChunkedGatedDeltaRule) {
  ForEachBackend(&OpTable::chunked_gated_delta_rule, [&](const Backend& backend) {
    for (const int64_t tokens : {16, 130}) {
      SCOPED_TRACE(::testing::Message() << tokens << " tokens");
      const DeltaRuleInputs in = RandomDeltaRuleInputs(tokens, kValueHeads, kDeltaHeadDim);
      at::Tensor expected_state = at::empty_like(in.state);
      const at::Tensor expected = ReferenceOps().chunked_gated_delta_rule(
          in.q, in.k, in.v, in.g, in.beta, in.state, expected_state, kDeltaRuleChunkSize);
      at::Tensor state = On(at::empty_like(in.state), backend);
      const at::Tensor actual = backend.ops.chunked_gated_delta_rule(
          On(in.q, backend), On(in.k, backend), On(in.v, backend), On(in.g, backend),
          On(in.beta, backend), On(in.state, backend), state, kDeltaRuleChunkSize);
      EXPECT_TRUE(Close(actual, expected, 1e-4));
      EXPECT_TRUE(Close(state, expected_state, 1e-4));
    }
  });
}

// Sequences of a batch back to back: decode steps (one token, in place), a verify block and a
// prefill chunk (chunked, into a second buffer), each on its own state, as one call per sequence.
TEST(BackendOpsTest, BatchedGatedDeltaRule) {
  struct Part {
    int64_t length;
    bool in_place;
  };
  const std::vector<Part> parts = {{1, true}, {16, false}, {1, true}, {70, false}, {1, false}};
  ForEachBackend(&OpTable::batched_gated_delta_rule, [&](const Backend& backend) {
    int64_t rows = 0;
    for (const Part& part : parts) rows += part.length;
    const DeltaRuleInputs in = RandomDeltaRuleInputs(rows, kValueHeads, kDeltaHeadDim);
    std::vector<at::Tensor> expected_outputs, expected_states;
    std::vector<DeltaRuleSequence> sequences;
    int64_t row = 0;
    for (const Part& part : parts) {
      const auto rows_of = [&](const at::Tensor& t) { return t.narrow(0, row, part.length); };
      const at::Tensor initial = at::randn_like(in.state);
      at::Tensor expected_state = at::empty_like(initial);
      const bool chunked = part.length > 1;
      expected_outputs.push_back(
          chunked ? ReferenceOps().chunked_gated_delta_rule(
                        rows_of(in.q), rows_of(in.k), rows_of(in.v), rows_of(in.g),
                        rows_of(in.beta), initial, expected_state, kDeltaRuleChunkSize)
                  : ReferenceOps().recurrent_gated_delta_rule(
                        rows_of(in.q), rows_of(in.k), rows_of(in.v), rows_of(in.g),
                        rows_of(in.beta), initial, expected_state));
      expected_states.push_back(expected_state);
      const at::Tensor state = On(initial.clone(), backend);
      sequences.push_back({.length = part.length,
                           .initial_state = state,
                           .final_state = part.in_place ? state : at::empty_like(state),
                           .chunked = chunked});
      row += part.length;
    }
    const at::Tensor actual = backend.ops.batched_gated_delta_rule(
        On(in.q, backend), On(in.k, backend), On(in.v, backend), On(in.g, backend),
        On(in.beta, backend), sequences);
    EXPECT_TRUE(Close(actual, at::cat(expected_outputs, 0), 1e-4));
    for (size_t s = 0; s < parts.size(); ++s) {
      SCOPED_TRACE(::testing::Message() << "sequence " << s);
      EXPECT_TRUE(Close(sequences[s].final_state, expected_states[s], 1e-4));
    }
  });
}

// On a CPU a token's arithmetic does not depend on the call it is in: a block of tokens and the
// same tokens one call each leave bit-identical outputs and states, so a replay after a rollback
// runs exactly what the shorter block would have, and greedy outputs do not depend on the batch.
TEST(BackendOpsTest, OnACpuATokensArithmeticDoesNotDependOnItsCall) {
  constexpr int64_t kTokens = 5;
  const OpTable& cpu = OpsFor(c10::DeviceType::CPU);
  const DeltaRuleInputs in = RandomDeltaRuleInputs(kTokens, kValueHeads, kDeltaHeadDim);
  const at::Tensor block_state = in.state.clone();
  const std::vector<DeltaRuleSequence> block = {{.length = kTokens,
                                                 .initial_state = block_state,
                                                 .final_state = block_state,
                                                 .chunked = true}};
  const at::Tensor block_out = cpu.batched_gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, block);
  const at::Tensor step_state = in.state.clone();
  std::vector<at::Tensor> step_outs;
  for (int64_t t = 0; t < kTokens; ++t) {
    const auto row = [&](const at::Tensor& x) { return x.narrow(0, t, 1); };
    const std::vector<DeltaRuleSequence> step = {
        {.length = 1, .initial_state = step_state, .final_state = step_state}};
    step_outs.push_back(cpu.batched_gated_delta_rule(row(in.q), row(in.k), row(in.v), row(in.g),
                                                     row(in.beta), step));
  }
  EXPECT_TRUE(at::equal(block_out, at::cat(step_outs, 0)));
  EXPECT_TRUE(at::equal(block_state, step_state));
}

// A verify block whose acceptance is not known yet, after the rows of the last block it replays
// first, in place: the state it leaves is after the replayed rows (or untouched, replaying
// none), its output that of all its rows. Beside it in the call, a decode step in place.
TEST(BackendOpsTest, AVerifyBlockStoresTheStateAfterTheRowsItReplaysFirst) {
  constexpr int64_t kBlock = 6;
  ForEachBackend(&OpTable::batched_gated_delta_rule, [&](const Backend& backend) {
    for (const int64_t replayed : {0, 3}) {
      SCOPED_TRACE(::testing::Message() << replayed << " rows replayed");
      const int64_t length = replayed + kBlock;
      const DeltaRuleInputs in = RandomDeltaRuleInputs(length + 1, kValueHeads, kDeltaHeadDim);
      const auto rows = [](const at::Tensor& t, int64_t first, int64_t count) {
        return t.narrow(0, first, count);
      };
      at::Tensor unkept = at::empty_like(in.state);
      const at::Tensor expected_block = ReferenceOps().chunked_gated_delta_rule(
          rows(in.q, 0, length), rows(in.k, 0, length), rows(in.v, 0, length),
          rows(in.g, 0, length), rows(in.beta, 0, length), in.state, unkept, kDeltaRuleChunkSize);
      at::Tensor expected_state = in.state.clone();
      if (replayed > 0) {
        ReferenceOps().chunked_gated_delta_rule(rows(in.q, 0, replayed), rows(in.k, 0, replayed),
                                                rows(in.v, 0, replayed), rows(in.g, 0, replayed),
                                                rows(in.beta, 0, replayed), in.state,
                                                expected_state, kDeltaRuleChunkSize);
      }
      const at::Tensor decode_initial = at::randn_like(in.state);
      at::Tensor expected_decode_state = at::empty_like(in.state);
      const at::Tensor expected_decode = ReferenceOps().recurrent_gated_delta_rule(
          rows(in.q, length, 1), rows(in.k, length, 1), rows(in.v, length, 1),
          rows(in.g, length, 1), rows(in.beta, length, 1), decode_initial, expected_decode_state);

      const at::Tensor block_state = On(in.state.clone(), backend);
      const at::Tensor decode_state = On(decode_initial.clone(), backend);
      const std::vector<DeltaRuleSequence> sequences = {
          {.length = length,
           .initial_state = block_state,
           .final_state = block_state,
           .chunked = true,
           .stored_length = replayed},
          {.length = 1, .initial_state = decode_state, .final_state = decode_state}};
      const at::Tensor actual = backend.ops.batched_gated_delta_rule(
          On(in.q, backend), On(in.k, backend), On(in.v, backend), On(in.g, backend),
          On(in.beta, backend), sequences);
      EXPECT_TRUE(Close(actual, at::cat({expected_block, expected_decode}, 0), 1e-4));
      if (replayed == 0) {
        EXPECT_TRUE(at::equal(block_state.cpu(), in.state)) << "nothing is written";
      } else {
        EXPECT_TRUE(Close(block_state, expected_state, 1e-4));
      }
      EXPECT_TRUE(Close(decode_state, expected_decode_state, 1e-5));
    }
  });
}

// Attention and the elementwise ops run in float32, and in bf16 (a GPU model's activations and
// weights) against the reference run on the same bf16 values: either rounds a bf16 output to
// within 2^-8 of a value.
struct ElementDtype {
  at::ScalarType dtype;
  double tolerance;
};
std::vector<ElementDtype> ElementDtypes(double float32_tolerance) {
  return {{at::kFloat, float32_tolerance}, {at::kBFloat16, 1e-2}};
}

TEST(BackendOpsTest, Attention) {
  struct Case {
    const char* what;
    int64_t queries, heads, kv_heads, head_dim, keys;
    Visibility visibility;
  };
  at::manual_seed(1);  // the training mask
  const std::vector<Case> cases = {
      {"target decode", 1, kHeads, kKvHeads, kHeadDim, 2048, Visibility::Causal(2047)},
      {"target verify block", 16, kHeads, kKvHeads, kHeadDim, 2064, Visibility::Causal(2048)},
      {"target prefill", 64, kHeads, kKvHeads, kHeadDim, 64, Visibility::Causal(0)},
      {"target prefill chunk over a cache", 37, kHeads, kKvHeads, kHeadDim, 1061,
       Visibility::Causal(1024)},
      {"the tiny fixtures' heads of 32", 4, 4, 2, 32, 104, Visibility::Causal(100)},
      {"drafter block", 16, kDraftHeads, kDraftKvHeads, kDraftHeadDim, 2064, Visibility::All()},
      {"drafter window", 16, kDraftHeads, kDraftKvHeads, kDraftHeadDim, 527,
       Visibility::Window(2048, 1537, 512)},
      {"drafter training mask", 8, 4, 2, 16, 24,
       Visibility::Mask(
           at::randint(0, 2, {8, 24}, at::kBool).index_fill_(1, at::zeros({1}, at::kLong), true))},
  };
  ForEachBackend(&OpTable::attention, [&](const Backend& backend) {
    for (const Case& c : cases) {
      for (const ElementDtype& type : ElementDtypes(1e-5)) {
        SCOPED_TRACE(::testing::Message() << c.what << ", " << at::toString(type.dtype));
        at::manual_seed(c.keys);
        const at::Tensor q = at::randn({c.queries, c.heads, c.head_dim}).to(type.dtype);
        // Keys and values as a cache holds them: the first `keys` rows of a longer buffer.
        const at::Tensor k =
            at::randn({c.kv_heads, c.keys + 5, c.head_dim}).to(type.dtype).narrow(1, 0, c.keys);
        const at::Tensor v =
            at::randn({c.kv_heads, c.keys + 5, c.head_dim}).to(type.dtype).narrow(1, 0, c.keys);
        Visibility on_device = c.visibility;
        if (on_device.mask.defined()) on_device.mask = On(on_device.mask, backend);
        EXPECT_TRUE(
            Close(backend.ops.attention(On(q, backend), On(k, backend), On(v, backend), on_device),
                  ReferenceOps().attention(q, k, v, c.visibility), type.tolerance));
      }
    }
  });
}

TEST(BackendOpsTest, RmsNorms) {
  ForEachBackend(&OpTable::rms_norm, [&](const Backend& backend) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
             {1, kHidden}, {64, kHidden}, {16, kHeads, kHeadDim}, {3, 5}}) {
      for (const NormWeight kind : {NormWeight::kZeroCentred, NormWeight::kPlain}) {
        for (const ElementDtype& type : ElementDtypes(1e-5)) {
          SCOPED_TRACE(at::toString(type.dtype));
          at::manual_seed(shape.back());
          const at::Tensor x = at::randn(shape).to(type.dtype);
          const at::Tensor weight = (at::randn({shape.back()}) * 0.1).to(type.dtype);
          EXPECT_TRUE(Close(backend.ops.rms_norm(On(x, backend), On(weight, backend), 1e-6, kind),
                            ReferenceOps().rms_norm(x, weight, 1e-6, kind), type.tolerance));
        }
      }
    }
  });
  ForEachBackend(&OpTable::gated_rms_norm, [&](const Backend& backend) {
    // A decode step and a chunk; gates past where silu saturates (e^±40) in the second.
    for (const auto& [tokens, gate_scale] :
         std::vector<std::pair<int64_t, double>>{{1, 1}, {64, 40}}) {
      for (const ElementDtype& type : ElementDtypes(1e-5)) {
        SCOPED_TRACE(at::toString(type.dtype));
        at::manual_seed(tokens);
        const at::Tensor x = at::randn({tokens, kValueHeads, kDeltaHeadDim}).to(type.dtype);
        const at::Tensor gate =
            (at::randn({tokens, kValueHeads, kDeltaHeadDim}) * gate_scale).to(type.dtype);
        const at::Tensor weight = at::randn({kDeltaHeadDim}).to(type.dtype);
        EXPECT_TRUE(Close(backend.ops.gated_rms_norm(On(x, backend), On(gate, backend),
                                                     On(weight, backend), 1e-6),
                          ReferenceOps().gated_rms_norm(x, gate, weight, 1e-6), type.tolerance));
      }
    }
  });
}

TEST(BackendOpsTest, SiluMul) {
  ForEachBackend(&OpTable::silu_mul, [&](const Backend& backend) {
    // A decode step's and a chunk's MLP, a ragged length, gates past where silu saturates.
    for (const auto& [shape, gate_scale] : std::vector<std::pair<std::vector<int64_t>, double>>{
             {{1, kIntermediate}, 1}, {{64, kIntermediate}, 40}, {{3, 17}, 4}}) {
      for (const ElementDtype& type : ElementDtypes(1e-5)) {
        SCOPED_TRACE(::testing::Message()
                     << shape[0] << " × " << shape[1] << " " << at::toString(type.dtype));
        at::manual_seed(shape[1]);
        const at::Tensor gate = (at::randn(shape) * gate_scale).to(type.dtype);
        const at::Tensor up = at::randn(shape).to(type.dtype);
        EXPECT_TRUE(Close(backend.ops.silu_mul(On(gate, backend), On(up, backend)),
                          ReferenceOps().silu_mul(gate, up), type.tolerance));
      }
    }
  });
}

TEST(BackendOpsTest, GatedDeltaNetGates) {
  ForEachBackend(&OpTable::gated_delta_net_gates, [&](const Backend& backend) {
    // A decode step's and a chunk's heads, a ragged count; a past softplus's threshold (20).
    for (const auto& [rows, heads] :
         std::vector<std::pair<int64_t, int64_t>>{{1, kValueHeads}, {64, kValueHeads}, {3, 5}}) {
      SCOPED_TRACE(::testing::Message() << rows << " × " << heads);
      at::manual_seed(rows * heads);
      const at::Tensor a = at::randn({rows, heads}) * 12, b = at::randn({rows, heads}) * 6;
      const at::Tensor a_log = at::randn({heads}), dt_bias = at::randn({heads});
      const DeltaRuleGates expected = ReferenceOps().gated_delta_net_gates(a, b, a_log, dt_bias);
      const DeltaRuleGates actual = backend.ops.gated_delta_net_gates(
          On(a, backend), On(b, backend), On(a_log, backend), On(dt_bias, backend));
      EXPECT_TRUE(Close(actual.g, expected.g, 1e-6));
      EXPECT_TRUE(Close(actual.beta, expected.beta, 1e-6));
    }
  });
}

// On a CPU a row's result does not depend on the rows beside it, bit for bit, in every op whose
// rows are independent: a verify block's rows are then its decode steps', and a batch's rows each
// sequence's alone (the delta rule's tokens: OnACpuATokensArithmeticDoesNotDependOnItsCall; the
// INT4 kernels': their own tests).
TEST(BackendOpsTest, OnACpuARowsResultDoesNotDependOnTheRowsBesideIt) {
  constexpr int64_t kRows = 16, kIn = 256, kOut = 40;
  const OpTable& cpu = OpsFor(c10::DeviceType::CPU);
  at::manual_seed(3);
  const at::Tensor x = at::randn({kRows, kIn}), b = at::randn({kRows, kValueHeads});
  const at::Tensor a = at::randn({kRows, kValueHeads}) * 12;
  const at::Tensor a_log = at::randn({kValueHeads}), dt_bias = at::randn({kValueHeads});
  const std::vector<std::pair<std::string, std::function<at::Tensor(int64_t, int64_t)>>> ops = {
      {"project, float32 weight",
       [&, w = at::randn({kOut, kIn})](int64_t r, int64_t n) {
         return cpu.project(x.narrow(0, r, n), w);
       }},
      {"project, bf16 weight",
       [&, w = at::randn({kOut, kIn}).to(at::kBFloat16)](int64_t r, int64_t n) {
         return cpu.project(x.narrow(0, r, n), w);
       }},
      {"gates' g",
       [&](int64_t r, int64_t n) {
         return cpu.gated_delta_net_gates(a.narrow(0, r, n), b.narrow(0, r, n), a_log, dt_bias).g;
       }},
      {"gates' beta",
       [&](int64_t r, int64_t n) {
         return cpu.gated_delta_net_gates(a.narrow(0, r, n), b.narrow(0, r, n), a_log, dt_bias)
             .beta;
       }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    const at::Tensor together = op(0, kRows);
    for (int64_t r = 0; r < kRows; ++r) EXPECT_TRUE(at::equal(op(r, 1), together.narrow(0, r, 1)));
  }
}

TEST(BackendOpsTest, RowArgmax) {
  ForEachBackend(&OpTable::row_argmax, [&](const Backend& backend) {
    // A decode step's and a batch's logits over Qwen3.5's vocabulary, a ragged width, and a
    // block's rows as a view into a larger forward's.
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{1, 248320}, {16, 248320}, {7, 4099}, {1, 3}}) {
      SCOPED_TRACE(::testing::Message() << shape[0] << " × " << shape[1]);
      at::manual_seed(shape[1]);
      const at::Tensor logits = at::randn(shape) * 8;
      // Few distinct values: many rows tie, and the first of equals must win.
      const at::Tensor tied = at::randint(0, 3, shape).to(at::kFloat);
      for (const at::Tensor& x : {logits, tied}) {
        EXPECT_TRUE(
            at::equal(backend.ops.row_argmax(On(x, backend)).cpu(), ReferenceOps().row_argmax(x)));
      }
    }
    at::Tensor forward = at::randn({12, 1000});
    forward.index_put_({3, 10}, std::numeric_limits<float>::quiet_NaN());
    forward.index_put_({3, 20}, std::numeric_limits<float>::infinity());
    const at::Tensor block = forward.narrow(0, 2, 6);
    EXPECT_TRUE(at::equal(backend.ops.row_argmax(On(block, backend)).cpu(),
                          ReferenceOps().row_argmax(block)));
  });
}

TEST(BackendOpsTest, TruncatedSoftmax) {
  ForEachBackend(&OpTable::truncated_softmax, [&](const Backend& backend) {
    // Qwen3.5's vocabulary with the settings its model card recommends and a few more; a row of
    // few distinct values, whose top-p cut falls among equal probabilities.
    at::manual_seed(5);
    at::Tensor logits = at::randn({248320}) * 4;
    logits.narrow(0, 0, 100).fill_(-std::numeric_limits<float>::infinity());
    const at::Tensor tied = at::randint(0, 3, {4099}).to(at::kFloat);
    for (const at::Tensor& scores : {logits, tied}) {
      for (const Truncation& truncation :
           std::vector<Truncation>{{.temperature = 1},
                                   {.temperature = 0.7, .top_k = 20, .top_p = 0.8},
                                   {.temperature = 0.6, .top_k = 20, .top_p = 0.95},
                                   {.temperature = 1, .top_p = 0.9},
                                   {.temperature = 1.5, .top_k = 1000},
                                   {.temperature = 1, .top_p = 0.5, .min_p = 0.1}}) {
        SCOPED_TRACE(::testing::Message() << scores.size(0) << ": T " << truncation.temperature
                                          << ", top-k " << truncation.top_k << ", top-p "
                                          << truncation.top_p << ", min-p " << truncation.min_p);
        const at::Tensor actual = backend.ops.truncated_softmax(On(scores, backend), truncation);
        const at::Tensor expected = ReferenceOps().truncated_softmax(scores, truncation);
        EXPECT_TRUE(Close(actual, expected, 1e-5));
        EXPECT_TRUE(at::equal(actual.cpu() > 0, expected > 0));  // the same tokens kept
      }
    }
  });
}

TEST(BackendOpsTest, InverseCdf) {
  ForEachBackend(&OpTable::inverse_cdf, [&](const Backend& backend) {
    at::manual_seed(6);
    const at::Tensor p = at::softmax(at::randn({248320}) * 4, 0);
    for (const double u : {0.0, 1e-9, 0.25, 0.5, 0.75, 0.999}) {
      EXPECT_EQ(backend.ops.inverse_cdf(On(p, backend), u), ReferenceOps().inverse_cdf(p, u)) << u;
    }
    // u past the mass, as rounding may leave it: the last index with some.
    const at::Tensor short_of_one = at::tensor({0.5f, 0.0f, 0.4f, 0.0f});
    EXPECT_EQ(backend.ops.inverse_cdf(On(short_of_one, backend), 0.95), 2);
    EXPECT_EQ(ReferenceOps().inverse_cdf(short_of_one, 0.95), 2);
  });
}

TEST(BackendOpsTest, Rotary) {
  struct Shape {
    int64_t tokens, heads, head_dim, rotary_dim;
  };
  ForEachBackend(&OpTable::rotary, [&](const Backend& backend) {
    for (const Shape& shape : std::vector<Shape>{{1, kHeads, kHeadDim, kRotaryDim},
                                                 {64, kKvHeads, kHeadDim, kRotaryDim},
                                                 {16, kDraftHeads, kDraftHeadDim, kDraftHeadDim}}) {
      for (const ElementDtype& type : ElementDtypes(1e-6)) {
        SCOPED_TRACE(at::toString(type.dtype));
        at::manual_seed(shape.tokens);
        const at::Tensor x = at::randn({shape.tokens, shape.heads, shape.head_dim}).to(type.dtype);
        const at::Tensor angles = at::rand({shape.tokens, shape.rotary_dim}) * 6;
        const at::Tensor cos = angles.cos().to(type.dtype), sin = angles.sin().to(type.dtype);
        EXPECT_TRUE(Close(backend.ops.rotary(On(x, backend), On(cos, backend), On(sin, backend)),
                          ReferenceOps().rotary(x, cos, sin), type.tolerance));
      }
    }
  });
}

TEST(BackendOpsTest, CausalConv1d) {
  ForEachBackend(&OpTable::causal_conv1d, [&](const Backend& backend) {
    for (const int64_t tokens : {1, 16, 130}) {
      for (const ElementDtype& type : ElementDtypes(1e-6)) {
        SCOPED_TRACE(at::toString(type.dtype));
        at::manual_seed(tokens);
        const at::Tensor x = at::randn({tokens, kConvChannels}).to(type.dtype);
        const at::Tensor weight = at::randn({kConvChannels, 4}).to(type.dtype);
        const at::Tensor state = at::randn({3, kConvChannels}).to(type.dtype);
        EXPECT_TRUE(Close(
            backend.ops.causal_conv1d(On(x, backend), On(weight, backend), On(state, backend)),
            ReferenceOps().causal_conv1d(x, weight, state), type.tolerance));
      }
    }
  });
}

// Sequences of a batch back to back, shorter and longer than the state (K − 1 = 3 rows), each
// from its own state, which then holds the last three inputs it saw; silu of the convolution.
TEST(BackendOpsTest, CausalConv1dAdvance) {
  const std::vector<int64_t> lengths = {1, 2, 1, 130, 5};
  ForEachBackend(&OpTable::causal_conv1d_advance, [&](const Backend& backend) {
    for (const ElementDtype& type : ElementDtypes(1e-6)) {
      SCOPED_TRACE(at::toString(type.dtype));
      at::manual_seed(3);
      const at::Tensor x = at::randn({139, kConvChannels}).to(type.dtype);
      const at::Tensor weight = at::randn({kConvChannels, 4}).to(type.dtype);
      std::vector<at::Tensor> expected_outputs, expected_states;
      std::vector<ConvSequence> sequences;
      int64_t row = 0;
      for (const int64_t length : lengths) {
        const at::Tensor state = at::randn({3, kConvChannels}).to(type.dtype);
        const at::Tensor rows = x.narrow(0, row, length);
        expected_outputs.push_back(ReferenceOps().causal_conv1d(rows, weight, state));
        expected_states.push_back(at::cat({state, rows}, 0).narrow(0, length, 3));
        sequences.push_back({.length = length, .state = On(state, backend)});
        row += length;
      }
      EXPECT_TRUE(
          Close(backend.ops.causal_conv1d_advance(On(x, backend), On(weight, backend), sequences),
                at::silu(at::cat(expected_outputs, 0)), type.tolerance));
      for (size_t s = 0; s < lengths.size(); ++s) {
        SCOPED_TRACE(::testing::Message() << "sequence " << s);
        EXPECT_TRUE(at::equal(sequences[s].state.cpu(), expected_states[s]));
      }
    }
  });
}

// What a backend's kernels do not take — another dtype, a gradient to record — runs the
// reference, so training and bf16 models work on every backend.
TEST(BackendOpsTest, KernelsLeaveOtherDtypesAndGradientsToTheReference) {
  for (const Backend& backend : Backends()) {
    SCOPED_TRACE(std::string(backend.name));
    if (!Present(backend.device)) continue;
    const OpTable& ops = OpsFor(backend.device);
    const at::Tensor weight = On(at::randn({5, 16}), backend);
    const at::Tensor row = On(at::randn({1, 16}), backend);
    const at::Tensor bf16_weight = weight.to(at::kBFloat16), bf16_row = row.to(at::kBFloat16);
    EXPECT_TRUE(at::equal(ops.project(bf16_row, bf16_weight),
                          ReferenceOps().project(bf16_row, bf16_weight)));
    const at::Tensor trained = weight.clone().requires_grad_();
    ops.project(row, trained).sum().backward();
    EXPECT_TRUE(at::equal(trained.grad(), row.expand({5, 16})));
  }
}

TEST(BackendOpsTest, TheReferenceOnlySwitchPutsEveryDeviceOnTheReference) {
  UseReferenceOnly(true);
  EXPECT_EQ(OpsFor(c10::DeviceType::CPU).project, ReferenceOps().project);
  UseReferenceOnly(false);
  for (const Backend& backend : Backends()) {
    if (backend.ops.project != nullptr) {
      EXPECT_EQ(OpsFor(backend.device).project, backend.ops.project);
    }
  }
}

}  // namespace
}  // namespace specd::model::ops
