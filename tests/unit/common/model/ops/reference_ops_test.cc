// What the reference ops compute, which every backend is then held to: the chunked gated delta
// rule is the recurrence whatever the chunking, the convolution streams, and attention sees
// exactly the keys its visibility rule allows.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/model/ops/op_table.h"
#include "common/model/ops/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/model/tensor_matchers.h"

namespace specd::model::ops {
namespace {

using testing::AllClose;

const OpTable& Reference() { return ReferenceOps(); }

struct DeltaRuleInputs {
  at::Tensor q, k, v, g, beta, state;
};

DeltaRuleInputs RandomDeltaRuleInputs(int64_t length, int64_t heads, int64_t key_dim,
                                      int64_t value_dim) {
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
  const DeltaRuleInputs in = RandomDeltaRuleInputs(length, 3, 8, 5);
  at::Tensor recurrent_state = at::empty_like(in.state);
  const at::Tensor expected = Reference().recurrent_gated_delta_rule(
      in.q, in.k, in.v, in.g, in.beta, in.state, recurrent_state);
  at::Tensor chunked_state = at::empty_like(in.state);
  const at::Tensor actual = Reference().chunked_gated_delta_rule(
      in.q, in.k, in.v, in.g, in.beta, in.state, chunked_state, chunk_size);
  EXPECT_TRUE(AllClose(actual, expected, 1e-4));
  EXPECT_TRUE(AllClose(chunked_state, recurrent_state, 1e-4));
}

// One token, a partial chunk, exact chunks and several chunks with a remainder.
INSTANTIATE_TEST_SUITE_P(LengthsAndChunks, ChunkedGatedDeltaRuleTest,
                         ::testing::Values(std::tuple{1, 64}, std::tuple{16, 64},
                                           std::tuple{64, 64}, std::tuple{150, 64},
                                           std::tuple{150, 16}));

TEST(GatedDeltaRuleTest, StateMayBeUpdatedInPlace) {
  const DeltaRuleInputs in = RandomDeltaRuleInputs(10, 2, 4, 4);
  at::Tensor separate = at::empty_like(in.state);
  const at::Tensor expected = Reference().chunked_gated_delta_rule(
      in.q, in.k, in.v, in.g, in.beta, in.state, separate, kDeltaRuleChunkSize);
  at::Tensor in_place = in.state.clone();
  const at::Tensor actual = Reference().chunked_gated_delta_rule(
      in.q, in.k, in.v, in.g, in.beta, in_place, in_place, kDeltaRuleChunkSize);
  EXPECT_TRUE(at::equal(actual, expected));
  EXPECT_TRUE(at::equal(in_place, separate));
}

TEST(GatedDeltaRuleTest, AStoredLengthPastTheSequencesRowsIsAnError) {
  const DeltaRuleInputs in = RandomDeltaRuleInputs(4, 2, 4, 4);
  at::Tensor state = in.state.clone();
  const std::vector<DeltaRuleSequence> sequences = {
      {.length = 4, .initial_state = state, .final_state = state, .stored_length = 5}};
  EXPECT_THAT([&] { GatedDeltaRule(in.q, in.k, in.v, in.g, in.beta, sequences); },
              ::testing::ThrowsMessage<c10::Error>(
                  ::testing::HasSubstr("a sequence of 4 rows cannot store the state after 5")));
  EXPECT_TRUE(at::equal(state, in.state)) << "nothing is written";
}

TEST(CausalConv1dTest, FeedingTokensInPiecesEqualsFeedingThemAtOnce) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({9, 6});
  const at::Tensor weight = at::randn({6, 4});
  const at::Tensor empty_history = at::zeros({3, 6});
  const at::Tensor whole = Reference().causal_conv1d(x, weight, empty_history);

  std::vector<at::Tensor> pieces;
  for (const auto& [begin, count] : {std::pair{0, 5}, std::pair{5, 1}, std::pair{6, 3}}) {
    // The history is the three inputs before the piece (zeros before the first).
    const at::Tensor seen = at::cat({empty_history, x.narrow(0, 0, begin)}, 0);
    const at::Tensor history = seen.narrow(0, seen.size(0) - 3, 3);
    pieces.push_back(Reference().causal_conv1d(x.narrow(0, begin, count), weight, history));
  }
  EXPECT_TRUE(AllClose(at::cat(pieces, 0), whole, 1e-6));
}

TEST(CausalConv1dTest, TheLastTapWeighsTheCurrentToken) {
  const at::Tensor x = at::arange(1, 4, at::kFloat).unsqueeze(1);  // tokens 1, 2, 3; one channel
  const at::Tensor weight = at::tensor({0.0F, 0.0F, 10.0F, 1.0F}).unsqueeze(0);
  const at::Tensor out = Reference().causal_conv1d(x, weight, at::zeros({3, 1}));
  EXPECT_TRUE(at::equal(out.squeeze(1), at::tensor({1.0F, 12.0F, 23.0F})));
}

// Attention written out for one query head and one query: softmax over the visible keys.
at::Tensor OneQuery(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& visible) {
  at::Tensor scores = at::matmul(k, q) / std::sqrt(static_cast<double>(q.size(0)));
  scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
  return at::matmul(at::softmax(scores, 0), v);
}

TEST(AttentionTest, EachQuerySeesWhatItsRuleAllows) {
  at::manual_seed(11);
  const int64_t queries = 5, keys = 9, heads = 4, kv_heads = 2, head_dim = 8;
  const at::Tensor q = at::randn({queries, heads, head_dim});
  const at::Tensor k = at::randn({kv_heads, keys, head_dim});
  const at::Tensor v = at::randn({kv_heads, keys, head_dim});
  // Queries at positions 10…14, keys at 6…14.
  const int64_t query_start = 10, key_start = 6;
  const at::Tensor query_positions = at::arange(query_start, query_start + queries);
  const at::Tensor key_positions = at::arange(key_start, key_start + keys);
  const at::Tensor distance = key_positions.unsqueeze(0) - query_positions.unsqueeze(1);
  const at::Tensor mask = at::rand({queries, keys}) > 0.4;
  mask.select(1, 0).fill_(true);  // every query sees at least one key
  struct Case {
    const char* rule;
    Visibility visibility;
    at::Tensor visible;  // [queries, keys]
  };
  const std::vector<Case> cases = {
      {"all", Visibility::All(), at::ones({queries, keys}, at::kBool)},
      {"window 3", Visibility::Window(query_start, key_start, 3), distance.abs() < 3},
      {"mask", Visibility::Mask(mask), mask},
  };
  for (const Case& c : cases) {
    const at::Tensor out = Reference().attention(q, k, v, c.visibility);
    ASSERT_EQ(out.sizes(), at::IntArrayRef({queries, heads, head_dim})) << c.rule;
    for (int64_t t = 0; t < queries; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kv = h / (heads / kv_heads);
        EXPECT_TRUE(AllClose(out[t][h], OneQuery(q[t][h], k[kv], v[kv], c.visible[t]), 1e-5))
            << c.rule << ", query " << t << ", head " << h;
      }
    }
  }
}

TEST(AttentionTest, CausalQueriesSeeTheKeysUpToTheirOwnPosition) {
  at::manual_seed(12);
  // A target block: queries at 6…9 over a cache of positions 0…9.
  const at::Tensor q = at::randn({4, 2, 8});
  const at::Tensor k = at::randn({1, 10, 8});
  const at::Tensor v = at::randn({1, 10, 8});
  const at::Tensor out = Reference().attention(q, k, v, Visibility::Causal(6));
  for (int64_t t = 0; t < 4; ++t) {
    const at::Tensor visible = at::arange(10) <= 6 + t;
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_TRUE(AllClose(out[t][h], OneQuery(q[t][h], k[0], v[0], visible), 1e-5)) << t;
    }
  }
  // A decode step sees every key.
  EXPECT_TRUE(at::equal(Reference().attention(q.narrow(0, 3, 1), k, v, Visibility::Causal(9)),
                        Reference().attention(q.narrow(0, 3, 1), k, v, Visibility::All())));
}

TEST(RmsNormTest, TheTwoWeightsScaleTheNormalisedRow) {
  const at::Tensor x = at::tensor({3.0F, -4.0F}).unsqueeze(0);  // rms = √12.5
  const at::Tensor weight = at::tensor({0.5F, 2.0F});
  const at::Tensor normalised = x / std::sqrt(12.5);
  EXPECT_TRUE(
      AllClose(Reference().rms_norm(x, weight, 0, NormWeight::kPlain), normalised * weight, 1e-6));
  EXPECT_TRUE(AllClose(Reference().rms_norm(x, weight, 0, NormWeight::kZeroCentred),
                       normalised * (weight + 1), 1e-6));
  const at::Tensor gate = at::tensor({0.0F, 1.0F}).unsqueeze(0);
  EXPECT_TRUE(AllClose(Reference().gated_rms_norm(x, gate, weight, 0),
                       normalised * weight * at::silu(gate), 1e-6));
}

TEST(RotaryTest, RotatesPairsOfTheRotaryDimsAndPassesTheRestThrough) {
  // One position, one head of 6 dims, rotary on the first 4: pairs (0, 2) and (1, 3).
  const at::Tensor x = at::arange(1, 7, at::kFloat).view({1, 1, 6});
  const double angle = 0.3;
  const at::Tensor cos = at::full({1, 4}, std::cos(angle));
  const at::Tensor sin = at::full({1, 4}, std::sin(angle));
  const at::Tensor out = Reference().rotary(x, cos, sin).view({6});
  const double c = std::cos(angle), s = std::sin(angle);
  const at::Tensor expected = at::tensor(
      {static_cast<float>(1 * c - 3 * s), static_cast<float>(2 * c - 4 * s),
       static_cast<float>(3 * c + 1 * s), static_cast<float>(4 * c + 2 * s), 5.0F, 6.0F});
  EXPECT_TRUE(AllClose(out, expected, 1e-6));
}

}  // namespace
}  // namespace specd::model::ops
