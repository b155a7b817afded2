// The chunked gated delta rule computes the same function as the token-by-token recurrence,
// whatever the chunk size, sequence length and starting state.
#include "common/model/gated_delta_rule.h"

#include <ATen/ATen.h>

#include "common/model/causal_conv1d.h"
#include "common/model/kernel_registry.h"
#include "gtest/gtest.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::model {
namespace {

using testing::AllClose;

struct Inputs {
  at::Tensor q, k, v, g, beta, state;
};

Inputs RandomInputs(int64_t length, int64_t heads, int64_t key_dim, int64_t value_dim) {
  at::manual_seed(7);
  const auto unit = [](const at::Tensor& x) { return x / x.norm(2, -1, true); };
  return {
      .q = unit(at::randn({length, heads, key_dim})) / std::sqrt(static_cast<double>(key_dim)),
      .k = unit(at::randn({length, heads, key_dim})),
      .v = at::randn({length, heads, value_dim}),
      .g = -at::rand({length, heads}) * 0.5,
      .beta = at::rand({length, heads}),
      .state = at::randn({heads, key_dim, value_dim}),
  };
}

class ChunkedGatedDeltaRuleTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(ChunkedGatedDeltaRuleTest, EqualsTheRecurrentForm) {
  const auto [length, chunk_size] = GetParam();
  const Inputs in = RandomInputs(length, 3, 8, 5);
  at::Tensor recurrent_state = at::empty_like(in.state);
  const at::Tensor expected =
      RecurrentGatedDeltaRule(in.q, in.k, in.v, in.g, in.beta, in.state, recurrent_state);
  at::Tensor chunked_state = at::empty_like(in.state);
  const at::Tensor actual =
      ChunkedGatedDeltaRule(in.q, in.k, in.v, in.g, in.beta, in.state, chunked_state, chunk_size);
  EXPECT_TRUE(AllClose(actual, expected, 1e-4));
  EXPECT_TRUE(AllClose(chunked_state, recurrent_state, 1e-4));
}

// One token, a partial chunk, exact chunks and several chunks with a remainder.
INSTANTIATE_TEST_SUITE_P(LengthsAndChunks, ChunkedGatedDeltaRuleTest,
                         ::testing::Values(std::tuple{1, 64}, std::tuple{16, 64},
                                           std::tuple{64, 64}, std::tuple{150, 64},
                                           std::tuple{150, 16}));

TEST(GatedDeltaRuleTest, StateMayBeUpdatedInPlace) {
  const Inputs in = RandomInputs(10, 2, 4, 4);
  at::Tensor separate = at::empty_like(in.state);
  const at::Tensor expected =
      ChunkedGatedDeltaRule(in.q, in.k, in.v, in.g, in.beta, in.state, separate);
  at::Tensor in_place = in.state.clone();
  const at::Tensor actual =
      ChunkedGatedDeltaRule(in.q, in.k, in.v, in.g, in.beta, in_place, in_place);
  EXPECT_TRUE(at::equal(actual, expected));
  EXPECT_TRUE(at::equal(in_place, separate));
}

// The registered CPU kernel against the composition it replaces, for a decode step and for a
// replay of several tokens, into a separate state and in place.
class CpuDeltaRuleKernelTest : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(CpuDeltaRuleKernelTest, EqualsTheComposition) {
  const auto [length, in_place] = GetParam();
  const Inputs in = RandomInputs(length, 3, 24, 20);
  const auto& choice = KernelRegistry::Get().recurrent_gated_delta_rule;
  ASSERT_NE(choice.For(c10::DeviceType::CPU), choice.composition());
  at::Tensor expected_state = at::empty_like(in.state);
  const at::Tensor expected =
      choice.composition()(in.q, in.k, in.v, in.g, in.beta, in.state, expected_state);
  at::Tensor state = in_place ? in.state.clone() : at::empty_like(in.state);
  const at::Tensor actual = choice.For(c10::DeviceType::CPU)(in.q, in.k, in.v, in.g, in.beta,
                                                             in_place ? state : in.state, state);
  EXPECT_TRUE(AllClose(actual, expected, 1e-5));
  EXPECT_TRUE(AllClose(state, expected_state, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(TokensAndStates, CpuDeltaRuleKernelTest,
                         ::testing::Combine(::testing::Values(1, 7), ::testing::Bool()));

TEST(CausalConv1dTest, FeedingTokensInPiecesEqualsFeedingThemAtOnce) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({9, 6});
  const at::Tensor weight = at::randn({6, 4});
  const at::Tensor empty_history = at::zeros({3, 6});
  const at::Tensor whole = CausalConv1d(x, weight, empty_history);

  at::Tensor history = empty_history;
  std::vector<at::Tensor> pieces;
  for (const auto& [begin, count] : {std::pair{0, 5}, std::pair{5, 1}, std::pair{6, 3}}) {
    const at::Tensor piece = x.narrow(0, begin, count);
    pieces.push_back(CausalConv1d(piece, weight, history));
    history = ConvStateAfter(history, piece);
  }
  EXPECT_TRUE(AllClose(at::cat(pieces, 0), whole, 1e-6));
  EXPECT_TRUE(at::equal(history, x.narrow(0, 6, 3)));
}

TEST(CausalConv1dTest, TheLastTapWeighsTheCurrentToken) {
  const at::Tensor x = at::arange(1, 4, at::kFloat).unsqueeze(1);  // tokens 1, 2, 3; one channel
  const at::Tensor weight = at::tensor({0.0F, 0.0F, 10.0F, 1.0F}).unsqueeze(0);
  const at::Tensor out = CausalConv1d(x, weight, at::zeros({3, 1}));
  EXPECT_TRUE(at::equal(out.squeeze(1), at::tensor({1.0F, 12.0F, 23.0F})));
}

}  // namespace
}  // namespace specd::model
