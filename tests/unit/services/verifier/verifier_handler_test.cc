// The target verifier on the qwen35-tiny-a target, specified by verifier.proto: greedy Prefill
// and Verify emit exactly what target-only decoding emits, whatever the drafts; the context
// buffer holds the target's tapped hidden states of the committed positions; generations guard
// against replays; sessions end on Release or after their idle timeout, shared memory with them;
// and every refusal carries the code the contract names.
#include "services/verifier/verifier_handler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/common/model/tensor_matchers.h"
#include "tests/unit/services/verifier/verifier_fixture.h"

namespace specd::verifier {
namespace {

using model::testing::AllClose;
using testing::Greedy;
using testing::Ids;
using testing::OwnShmNames;
using testing::PrefillRequestFor;
using testing::ReadRows;
using testing::ShmExists;
using testing::TappedHiddenStates;
using testing::VerifyRequestFor;

constexpr int64_t kMaxBlock = 8;
constexpr int64_t kMaxLength = 128;
const std::vector<int64_t> kDefaultTaps = {0, 2};

class VerifierHandlerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { target_ = engine::testing::LoadTarget("qwen35-tiny-a"); }
  static void TearDownTestSuite() { target_.reset(); }
  void SetUp() override { ASSERT_NE(target_, nullptr); }

  static const model::Qwen35Model& Target() { return *target_; }
  static int64_t Vocab() { return Target().config().vocab_size; }
  static int64_t Width() {
    return static_cast<int64_t>(kDefaultTaps.size()) * Target().config().hidden_size;
  }

  static VerifierOptions Options() {
    VerifierOptions options;
    options.model_name = "qwen35-tiny-a";
    options.quantization = "dense";
    options.tapped_layer_ids = kDefaultTaps;
    options.max_sessions = 4;
    options.max_session_length = kMaxLength;
    options.max_block_size = kMaxBlock;
    options.session_idle_timeout = absl::Seconds(60);
    return options;
  }

  static std::unique_ptr<VerifierHandler> Handler(const VerifierOptions& options = Options()) {
    return testing::MakeVerifier(Target(), options);
  }

  static std::vector<int64_t> Prompt(int64_t length, uint64_t seed = 3) {
    return engine::testing::RandomPrompt(seed, length, Vocab());
  }

  // Target-only generation's output for `prompt`, greedy unless `temperature`.
  static std::vector<int64_t> TargetOnly(const std::vector<int64_t>& prompt, int64_t new_tokens,
                                         double temperature = 0, uint64_t seed = 0) {
    return engine::testing::TargetOnly(
               Target(), engine::testing::Request(prompt, new_tokens, temperature, seed))
        .ids;
  }

  // A draft that the target is sure to reject where it expects `token`.
  static int64_t WrongFor(int64_t token) { return (token + 1) % Vocab(); }

  static inline std::unique_ptr<model::Qwen35Model> target_;
};

// Runs a session that Prefill opened with empty drafts until it has emitted `count` tokens.
std::vector<int64_t> DecodeWithoutDrafts(VerifierHandler& handler, const std::string& session,
                                         const v1::PrefillResponse& prefill, size_t count) {
  std::vector<int64_t> emitted = {prefill.next_token_id()};
  uint64_t generation = prefill.generation();
  while (emitted.size() < count) {
    absl::StatusOr<v1::VerifyResponse> step =
        handler.Verify(VerifyRequestFor(session, generation, {}));
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) break;
    emitted.push_back(step->next_token_id());
    generation = step->generation();
  }
  return emitted;
}

TEST_F(VerifierHandlerTest, GreedyStepsEmitTheTargetDecodersTokensWhateverTheDrafts) {
  const std::vector<int64_t> prompt = Prompt(12);
  const std::vector<int64_t> expected = TargetOnly(prompt, 40);
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  absl::StatusOr<v1::PrefillResponse> prefill = handler->Prefill(PrefillRequestFor("s", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_EQ(prefill->next_token_id(), expected[0]);

  std::vector<int64_t> emitted = {prefill->next_token_id()};
  uint64_t generation = prefill->generation();
  // Each step drafts `right` tokens of the target's own continuation, then maybe a wrong one.
  struct Step {
    int64_t right;
    bool then_wrong;
  };
  for (const Step step : {Step{3, false}, Step{0, true}, Step{kMaxBlock - 1, false}, Step{2, true},
                          Step{0, false}, Step{5, true}, Step{6, true}}) {
    const auto at = static_cast<int64_t>(emitted.size());  // expected[at] follows the anchor
    std::vector<int64_t> drafts(expected.begin() + at, expected.begin() + at + step.right);
    if (step.then_wrong) drafts.push_back(WrongFor(expected[at + step.right]));
    absl::StatusOr<v1::VerifyResponse> verify =
        handler->Verify(VerifyRequestFor("s", generation, drafts));
    ASSERT_TRUE(verify.ok()) << verify.status();
    EXPECT_EQ(Ids(verify->accepted_token_ids()),
              std::vector<int64_t>(expected.begin() + at, expected.begin() + at + step.right))
        << "after " << at << " tokens";
    EXPECT_EQ(verify->next_token_id(), expected[at + step.right]) << "after " << at << " tokens";
    for (const uint32_t id : verify->accepted_token_ids()) emitted.push_back(id);
    emitted.push_back(verify->next_token_id());
    generation = verify->generation();
  }
  EXPECT_EQ(emitted, std::vector<int64_t>(expected.begin(), expected.begin() + emitted.size()));
}

TEST_F(VerifierHandlerTest, EachCallAdvancesTheGenerationAndHandlesNameTheRowsItWrote) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> prompt = Prompt(9);
  const std::vector<int64_t> expected = TargetOnly(prompt, 8);
  v1::SamplingParams sampling = Greedy();
  sampling.set_seed(42);
  absl::StatusOr<v1::PrefillResponse> prefill =
      handler->Prefill(PrefillRequestFor("s", prompt, sampling));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_EQ(prefill->seed(), 42u);
  EXPECT_EQ(prefill->generation(), 1u);
  const v1::TensorHandle& context = prefill->context();
  ASSERT_TRUE(context.has_posix_shm());
  EXPECT_EQ(context.owner_instance_id(), handler->Info()->instance_id());
  EXPECT_EQ(context.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(std::vector<int64_t>(context.shape().begin(), context.shape().end()),
            (std::vector<int64_t>{kMaxLength, Width()}));
  EXPECT_EQ(context.generation(), 1u);
  EXPECT_EQ(context.token_range().begin(), 0u);
  EXPECT_EQ(context.token_range().end(), prompt.size());

  // Two drafts accepted, the third rejected: the anchor and two drafts are committed.
  const auto n = static_cast<uint32_t>(prompt.size());
  absl::StatusOr<v1::VerifyResponse> verify =
      handler->Verify(VerifyRequestFor("s", 1, {expected[1], expected[2], WrongFor(expected[3])}));
  ASSERT_TRUE(verify.ok()) << verify.status();
  EXPECT_EQ(verify->accepted_token_ids_size(), 2);
  EXPECT_EQ(verify->generation(), 2u);
  EXPECT_EQ(verify->context().generation(), 2u);
  EXPECT_EQ(verify->context().buffer_id(), context.buffer_id());
  EXPECT_EQ(verify->context().posix_shm().name(), context.posix_shm().name());
  EXPECT_EQ(verify->context().token_range().begin(), n);
  EXPECT_EQ(verify->context().token_range().end(), n + 3);

  absl::StatusOr<v1::VerifyResponse> plain = handler->Verify(VerifyRequestFor("s", 2, {}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->accepted_token_ids().empty());
  EXPECT_EQ(plain->next_token_id(), expected[4]);
  EXPECT_EQ(plain->generation(), 3u);
  EXPECT_EQ(plain->context().token_range().begin(), n + 3);
  EXPECT_EQ(plain->context().token_range().end(), n + 4);
}

TEST_F(VerifierHandlerTest, PromptRowsAreTheTappedLayersOutputsInTheRequestedOrder) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> prompt = Prompt(17);
  const auto n = static_cast<int64_t>(prompt.size());

  absl::StatusOr<v1::PrefillResponse> by_default =
      handler->Prefill(PrefillRequestFor("default", prompt));
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  EXPECT_TRUE(AllClose(ReadRows(by_default->context(), 0, n),
                       TappedHiddenStates(Target(), prompt, kDefaultTaps), 1e-6));

  absl::StatusOr<v1::PrefillResponse> reversed =
      handler->Prefill(PrefillRequestFor("reversed", prompt, Greedy(), {3, 1, 0}));
  ASSERT_TRUE(reversed.ok()) << reversed.status();
  EXPECT_EQ(reversed->context().shape(1), 3 * Target().config().hidden_size);
  EXPECT_TRUE(AllClose(ReadRows(reversed->context(), 0, n),
                       TappedHiddenStates(Target(), prompt, {3, 1, 0}), 1e-6));
}

TEST_F(VerifierHandlerTest, VerifyWritesRowsOfTheCommittedPositionsOnly) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> prompt = Prompt(10);
  const std::vector<int64_t> expected = TargetOnly(prompt, 8);
  const auto n = static_cast<int64_t>(prompt.size());
  absl::StatusOr<v1::PrefillResponse> prefill = handler->Prefill(PrefillRequestFor("s", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const at::Tensor prompt_rows = ReadRows(prefill->context(), 0, n);

  // The anchor and three drafts are committed; the rejected fourth draft is not.
  absl::StatusOr<v1::VerifyResponse> verify = handler->Verify(VerifyRequestFor(
      "s", 1, {expected[1], expected[2], expected[3], WrongFor(expected[4]), expected[5]}));
  ASSERT_TRUE(verify.ok()) << verify.status();
  ASSERT_EQ(verify->accepted_token_ids_size(), 3);
  std::vector<int64_t> sequence = prompt;
  sequence.insert(sequence.end(), expected.begin(), expected.begin() + 4);
  const at::Tensor target_rows = TappedHiddenStates(Target(), sequence, kDefaultTaps);
  // A block forward after a prefill and one prefill of the whole sequence round differently.
  EXPECT_TRUE(AllClose(ReadRows(verify->context(), n, n + 4), target_rows.narrow(0, n, 4), 1e-3));
  EXPECT_TRUE(at::equal(ReadRows(verify->context(), 0, n), prompt_rows)) << "prompt rows stay";
  EXPECT_EQ(ReadRows(verify->context(), n + 4, n + 6).abs().max().item<float>(), 0)
      << "rows of rejected drafts are never written";

  // The next step's anchor is the correction, expected[4], at position n + 4.
  absl::StatusOr<v1::VerifyResponse> next = handler->Verify(VerifyRequestFor("s", 2, {}));
  ASSERT_TRUE(next.ok()) << next.status();
  sequence.push_back(expected[4]);
  EXPECT_TRUE(AllClose(ReadRows(next->context(), n + 4, n + 5),
                       TappedHiddenStates(Target(), sequence, kDefaultTaps).narrow(0, n + 4, 1),
                       1e-3));
}

TEST_F(VerifierHandlerTest, WithoutTappedLayersThereIsNoHandleButGenerationsStillAdvance) {
  VerifierOptions options = Options();
  options.tapped_layer_ids = {};
  std::unique_ptr<VerifierHandler> handler = Handler(options);
  ASSERT_NE(handler, nullptr);
  const std::set<std::string> shm_before = OwnShmNames();
  absl::StatusOr<v1::PrefillResponse> prefill = handler->Prefill(PrefillRequestFor("s", Prompt(5)));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_FALSE(prefill->has_context());
  EXPECT_EQ(prefill->generation(), 1u);
  EXPECT_EQ(OwnShmNames(), shm_before) << "a session without taps needs no buffer";
  absl::StatusOr<v1::VerifyResponse> verify = handler->Verify(VerifyRequestFor("s", 1, {}));
  ASSERT_TRUE(verify.ok()) << verify.status();
  EXPECT_FALSE(verify->has_context());
  EXPECT_EQ(verify->generation(), 2u);
}

TEST_F(VerifierHandlerTest, AStaleGenerationIsAbortedAndChangesNothing) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> prompt = Prompt(8);
  const std::vector<int64_t> expected = TargetOnly(prompt, 12);
  const auto n = static_cast<int64_t>(prompt.size());
  ASSERT_TRUE(handler->Prefill(PrefillRequestFor("s", prompt)).ok());
  absl::StatusOr<v1::VerifyResponse> first =
      handler->Verify(VerifyRequestFor("s", 1, {expected[1], expected[2]}));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->generation(), 2u);
  const at::Tensor rows_before = ReadRows(first->context(), 0, kMaxLength);

  // A replay of the first Verify, and one from the future.
  EXPECT_EQ(handler->Verify(VerifyRequestFor("s", 1, {expected[1], expected[2]})).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(handler->Verify(VerifyRequestFor("s", 3, {})).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_TRUE(at::equal(ReadRows(first->context(), 0, kMaxLength), rows_before));

  absl::StatusOr<v1::VerifyResponse> retry =
      handler->Verify(VerifyRequestFor("s", 2, {expected[4], expected[5], expected[6]}));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(Ids(retry->accepted_token_ids()),
            (std::vector<int64_t>{expected[4], expected[5], expected[6]}));
  EXPECT_EQ(retry->next_token_id(), expected[7]);
  EXPECT_EQ(retry->generation(), 3u);
  EXPECT_EQ(retry->context().token_range().begin(), n + 3);
}

TEST_F(VerifierHandlerTest, AnUnknownSessionIsNotFound) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const absl::Status status = handler->Verify(VerifyRequestFor("never-opened", 1, {})).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("never-opened"), std::string::npos) << status;
}

TEST_F(VerifierHandlerTest, PrefillOfAnOpenSessionIdIsAlreadyExistsAndLeavesThatSessionAlone) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> prompt = Prompt(6);
  const std::vector<int64_t> expected = TargetOnly(prompt, 3);
  ASSERT_TRUE(handler->Prefill(PrefillRequestFor("s", prompt)).ok());
  EXPECT_EQ(handler->Prefill(PrefillRequestFor("s", Prompt(6, /*seed=*/99))).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(handler->open_sessions(), 1u);
  absl::StatusOr<v1::VerifyResponse> verify =
      handler->Verify(VerifyRequestFor("s", 1, {expected[1]}));
  ASSERT_TRUE(verify.ok()) << verify.status();
  EXPECT_EQ(verify->accepted_token_ids_size(), 1);
  EXPECT_EQ(verify->next_token_id(), expected[2]);
}

TEST_F(VerifierHandlerTest, BeyondMaxSessionsPrefillIsResourceExhaustedUntilOneIsReleased) {
  VerifierOptions options = Options();
  options.max_sessions = 2;
  std::unique_ptr<VerifierHandler> handler = Handler(options);
  ASSERT_NE(handler, nullptr);
  ASSERT_TRUE(handler->Prefill(PrefillRequestFor("a", Prompt(4))).ok());
  ASSERT_TRUE(handler->Prefill(PrefillRequestFor("b", Prompt(4))).ok());
  EXPECT_EQ(handler->Prefill(PrefillRequestFor("c", Prompt(4))).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::TargetVerifierServiceReleaseRequest release;
  release.set_session_id("a");
  ASSERT_TRUE(handler->Release(release).ok());
  EXPECT_TRUE(handler->Prefill(PrefillRequestFor("c", Prompt(4))).ok());
}

TEST_F(VerifierHandlerTest, PrefillRefusesBadArgumentsAndOpensNothing) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::set<std::string> shm_before = OwnShmNames();
  const auto refused = [&](const v1::PrefillRequest& request) {
    return handler->Prefill(request).status().code();
  };
  const auto with_sampling = [&](auto set) {
    v1::SamplingParams sampling = Greedy();
    set(sampling);
    return PrefillRequestFor("s", Prompt(4), sampling);
  };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(refused(PrefillRequestFor("s", {})), kInvalid) << "empty prompt";
  EXPECT_EQ(refused(PrefillRequestFor("s", {5, Vocab(), 7})), kInvalid) << "id ≥ vocab";
  EXPECT_EQ(refused(PrefillRequestFor("", Prompt(4))), kInvalid) << "empty session id";
  EXPECT_EQ(refused(PrefillRequestFor(std::string(129, 'x'), Prompt(4))), kInvalid)
      << "session id over 128 bytes";
  EXPECT_EQ(refused(PrefillRequestFor("s", Prompt(4), Greedy(), {0, 4})), kInvalid)
      << "tapped layer beyond the 4 layers";
  EXPECT_EQ(refused(with_sampling([](auto& s) { s.set_temperature(-0.5); })), kInvalid);
  EXPECT_EQ(refused(with_sampling([](auto& s) { s.set_temperature(101); })), kInvalid);
  EXPECT_EQ(refused(with_sampling([](auto& s) { s.set_top_p(0); })), kInvalid);
  EXPECT_EQ(refused(with_sampling([&](auto& s) { s.add_stop_token_ids(Vocab()); })), kInvalid);
  EXPECT_EQ(refused(with_sampling([](auto& s) { s.set_frequency_penalty(2.5); })), kInvalid)
      << "frequency_penalty outside [-2, 2]";
  EXPECT_EQ(refused(with_sampling([](auto& s) {
              s.set_max_new_tokens(4);
              s.set_min_new_tokens(5);
            })),
            kInvalid)
      << "min_new_tokens above max_new_tokens";
  EXPECT_EQ(refused(with_sampling([](auto& s) {
              s.set_logprobs(true);
              s.set_top_logprobs(21);
            })),
            kInvalid);
  EXPECT_EQ(handler->open_sessions(), 0u);
  EXPECT_EQ(OwnShmNames(), shm_before);
}

TEST_F(VerifierHandlerTest, VerifyRefusesBadArgumentsAndChangesNothing) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> prompt = Prompt(7);
  const std::vector<int64_t> expected = TargetOnly(prompt, 12);
  ASSERT_TRUE(handler->Prefill(PrefillRequestFor("s", prompt)).ok());

  const std::vector<int64_t> too_many(expected.begin() + 1, expected.begin() + 1 + kMaxBlock);
  EXPECT_EQ(handler->Verify(VerifyRequestFor("s", 1, too_many)).status().code(),
            absl::StatusCode::kInvalidArgument)
      << kMaxBlock << " drafts and the anchor exceed the block of " << kMaxBlock;
  EXPECT_EQ(handler->Verify(VerifyRequestFor("s", 1, {expected[1], Vocab()})).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A draft distribution that gives its draft no probability (engine::CheckDraftDistributions
  // has the other refusals).
  v1::VerifyRequest unlikely = VerifyRequestFor("s", 1, {expected[1]});
  v1::DraftDistribution& distribution = *unlikely.add_draft_distributions();
  distribution.add_token_ids(static_cast<uint32_t>(expected[1] + 1) % Vocab());
  distribution.add_probabilities(1);
  const absl::Status refused = handler->Verify(unlikely).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("draft_distributions"));

  const std::vector<int64_t> most(expected.begin() + 1, expected.begin() + kMaxBlock);
  absl::StatusOr<v1::VerifyResponse> verify = handler->Verify(VerifyRequestFor("s", 1, most));
  ASSERT_TRUE(verify.ok()) << verify.status();
  EXPECT_EQ(Ids(verify->accepted_token_ids()), most);
  EXPECT_EQ(verify->next_token_id(), expected[kMaxBlock]);
  EXPECT_EQ(verify->generation(), 2u);
}

TEST_F(VerifierHandlerTest, APromptThatLeavesNoRoomForATokenIsOutOfRange) {
  VerifierOptions options = Options();
  options.max_session_length = 16;
  std::unique_ptr<VerifierHandler> handler = Handler(options);
  ASSERT_NE(handler, nullptr);
  v1::PrefillRequest request = PrefillRequestFor("s", Prompt(10));
  request.set_max_session_length(10);
  EXPECT_EQ(handler->Prefill(request).status().code(), absl::StatusCode::kOutOfRange);
  request.set_max_session_length(11);
  EXPECT_TRUE(handler->Prefill(request).ok());
  // A request cannot raise the server's limit.
  v1::PrefillRequest longer = PrefillRequestFor("t", Prompt(16));
  longer.set_max_session_length(1000);
  EXPECT_EQ(handler->Prefill(longer).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(handler->open_sessions(), 1u);
}

TEST_F(VerifierHandlerTest, ABlockThatDoesNotFitIsOutOfRangeAndChangesNothing) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> prompt = Prompt(9);
  const std::vector<int64_t> expected = TargetOnly(prompt, 6);
  v1::PrefillRequest request = PrefillRequestFor("s", prompt);
  request.set_max_session_length(12);
  ASSERT_TRUE(handler->Prefill(request).ok());
  // Nine prompt tokens and the first generated one: an anchor and two drafts could emit three
  // more, 13 in all.
  EXPECT_EQ(handler->Verify(VerifyRequestFor("s", 1, {expected[1], expected[2]})).status().code(),
            absl::StatusCode::kOutOfRange);
  absl::StatusOr<v1::VerifyResponse> fits =
      handler->Verify(VerifyRequestFor("s", 1, {expected[1]}));
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->next_token_id(), expected[2]);
}

TEST_F(VerifierHandlerTest, AStopTokenEndsAcceptanceAndComesBackAsTheNextToken) {
  const std::vector<int64_t> prompt = Prompt(11);
  const std::vector<int64_t> expected = TargetOnly(prompt, kMaxBlock);
  // The first continuation token that has not occurred before it, past the first draft.
  int64_t stop_at = 2;
  while (stop_at < kMaxBlock - 1 && std::find(expected.begin(), expected.begin() + stop_at,
                                              expected[stop_at]) != expected.begin() + stop_at) {
    ++stop_at;
  }
  ASSERT_LT(stop_at, kMaxBlock - 1) << "pick another prompt: the continuation repeats";
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  v1::SamplingParams sampling = Greedy();
  sampling.add_stop_token_ids(static_cast<uint32_t>(expected[stop_at]));
  ASSERT_TRUE(handler->Prefill(PrefillRequestFor("s", prompt, sampling)).ok());

  const std::vector<int64_t> drafts(expected.begin() + 1, expected.begin() + kMaxBlock);
  absl::StatusOr<v1::VerifyResponse> verify = handler->Verify(VerifyRequestFor("s", 1, drafts));
  ASSERT_TRUE(verify.ok()) << verify.status();
  EXPECT_EQ(Ids(verify->accepted_token_ids()),
            std::vector<int64_t>(expected.begin() + 1, expected.begin() + stop_at));
  EXPECT_EQ(verify->next_token_id(), expected[stop_at]);
  EXPECT_EQ(verify->context().token_range().end() - verify->context().token_range().begin(),
            static_cast<uint32_t>(stop_at));
}

TEST_F(VerifierHandlerTest, ReleaseFreesTheSessionAndUnlinksItsBuffer) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  absl::StatusOr<v1::PrefillResponse> prefill = handler->Prefill(PrefillRequestFor("s", Prompt(5)));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const std::string shm = prefill->context().posix_shm().name();
  EXPECT_TRUE(ShmExists(shm)) << shm;

  v1::TargetVerifierServiceReleaseRequest release;
  release.set_session_id("s");
  absl::StatusOr<v1::TargetVerifierServiceReleaseResponse> released = handler->Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->released());
  EXPECT_FALSE(ShmExists(shm)) << shm;
  EXPECT_EQ(handler->open_sessions(), 0u);
  EXPECT_EQ(handler->Verify(VerifyRequestFor("s", 1, {})).status().code(),
            absl::StatusCode::kNotFound);
  released = handler->Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->released()) << "idempotent: a second Release finds nothing";
}

TEST_F(VerifierHandlerTest, APrefillWaitsForMemoryASessionHoldsUntilItIsReleased) {
  // Room for one session of the longest length, with its context buffer, not two.
  const model::CacheFootprint session =
      Target().SequenceFootprint() +
      model::CacheFootprint{.fixed_bytes = 0,
                            .bytes_per_token = Width() * static_cast<int64_t>(sizeof(float))};
  std::unique_ptr<engine::CachePool> pool = *engine::CachePool::Create(
      {.budget_bytes = session.Bytes(kMaxLength) * 3 / 2, .block_tokens = 16, .max_waiting = 4});
  VerifierOptions options = Options();
  options.cache_pool = pool.get();
  std::unique_ptr<VerifierHandler> handler = Handler(options);
  ASSERT_NE(handler, nullptr);
  ASSERT_TRUE(handler->Prefill(PrefillRequestFor("a", Prompt(5))).ok());
  EXPECT_EQ(pool->use().used_bytes, session.Bytes(kMaxLength));

  // A second session waits; its caller leaving ends the wait, leaving nothing behind.
  std::atomic<bool> gone = false;
  std::thread leaving([&] {
    EXPECT_EQ(
        handler->PrefillCancellable(PrefillRequestFor("b", Prompt(5)), [&] { return gone.load(); })
            .status()
            .code(),
        absl::StatusCode::kCancelled);
  });
  while (pool->use().waiting != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  gone = true;
  leaving.join();
  EXPECT_EQ(handler->open_sessions(), 1u);

  // Another one goes on once the first is released.
  std::thread waiting([&] {
    absl::StatusOr<v1::PrefillResponse> prefill =
        handler->Prefill(PrefillRequestFor("c", Prompt(5)));
    EXPECT_TRUE(prefill.ok()) << prefill.status();
  });
  while (pool->use().waiting != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  v1::TargetVerifierServiceReleaseRequest release;
  release.set_session_id("a");
  ASSERT_TRUE(handler->Release(release).ok());
  waiting.join();
  EXPECT_EQ(handler->open_sessions(), 1u);
  EXPECT_EQ(pool->use().sequences, 1);
}

TEST_F(VerifierHandlerTest, AnIdleSessionExpiresAndUnlinksItsBuffer) {
  VerifierOptions options = Options();
  options.session_idle_timeout = absl::Milliseconds(200);
  std::unique_ptr<VerifierHandler> handler = Handler(options);
  ASSERT_NE(handler, nullptr);
  absl::StatusOr<v1::PrefillResponse> prefill = handler->Prefill(PrefillRequestFor("s", Prompt(5)));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  const std::string shm = prefill->context().posix_shm().name();
  // The lease ends at most a quarter of the timeout late.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(handler->open_sessions(), 0u);
  EXPECT_FALSE(ShmExists(shm)) << shm;
  EXPECT_EQ(handler->Verify(VerifyRequestFor("s", 1, {})).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(VerifierHandlerTest, EveryVerifyRenewsTheLease) {
  VerifierOptions options = Options();
  options.session_idle_timeout = absl::Milliseconds(400);
  std::unique_ptr<VerifierHandler> handler = Handler(options);
  ASSERT_NE(handler, nullptr);
  absl::StatusOr<v1::PrefillResponse> prefill = handler->Prefill(PrefillRequestFor("s", Prompt(5)));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  uint64_t generation = prefill->generation();
  // Six calls 100 ms apart outlive the 400 ms timeout several times over.
  for (int call = 0; call < 6; ++call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    absl::StatusOr<v1::VerifyResponse> verify =
        handler->Verify(VerifyRequestFor("s", generation, {}));
    ASSERT_TRUE(verify.ok()) << "call " << call << ": " << verify.status();
    generation = verify->generation();
  }
  EXPECT_TRUE(ShmExists(prefill->context().posix_shm().name()));
}

TEST_F(VerifierHandlerTest, SampledOutputIsTheTargetDecodersForTheSeedWhateverTheDrafts) {
  const std::vector<int64_t> prompt = Prompt(14);
  constexpr size_t kTokens = 20;
  const std::vector<int64_t> expected = TargetOnly(prompt, kTokens, /*temperature=*/1, /*seed=*/7);
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  v1::SamplingParams sampling;
  sampling.set_temperature(1);
  sampling.set_seed(7);
  sampling.set_ignore_eos(true);

  absl::StatusOr<v1::PrefillResponse> plain =
      handler->Prefill(PrefillRequestFor("plain", prompt, sampling));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(DecodeWithoutDrafts(*handler, "plain", *plain, kTokens), expected);

  // The same seed with blocks of the sampled continuation, then with wrong drafts.
  for (const bool right : {true, false}) {
    const std::string session = right ? "right-drafts" : "wrong-drafts";
    absl::StatusOr<v1::PrefillResponse> prefill =
        handler->Prefill(PrefillRequestFor(session, prompt, sampling));
    ASSERT_TRUE(prefill.ok()) << prefill.status();
    std::vector<int64_t> emitted = {prefill->next_token_id()};
    uint64_t generation = prefill->generation();
    while (emitted.size() + 4 <= kTokens) {
      std::vector<int64_t> drafts(expected.begin() + emitted.size(),
                                  expected.begin() + emitted.size() + 3);
      if (!right) drafts[0] = WrongFor(drafts[0]);
      absl::StatusOr<v1::VerifyResponse> verify =
          handler->Verify(VerifyRequestFor(session, generation, drafts));
      ASSERT_TRUE(verify.ok()) << verify.status();
      EXPECT_EQ(verify->accepted_token_ids_size(), right ? 3 : 0);
      for (const uint32_t id : verify->accepted_token_ids()) emitted.push_back(id);
      emitted.push_back(verify->next_token_id());
      generation = verify->generation();
    }
    EXPECT_EQ(emitted, std::vector<int64_t>(expected.begin(), expected.begin() + emitted.size()))
        << session;
  }

  sampling.set_seed(8);
  absl::StatusOr<v1::PrefillResponse> other =
      handler->Prefill(PrefillRequestFor("other-seed", prompt, sampling));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(DecodeWithoutDrafts(*handler, "other-seed", *other, kTokens), expected);
}

TEST_F(VerifierHandlerTest, WithoutASeedTheVerifierDrawsOneThatReproducesTheSession) {
  std::unique_ptr<VerifierHandler> handler = Handler();
  ASSERT_NE(handler, nullptr);
  const std::vector<int64_t> prompt = Prompt(6);
  v1::SamplingParams sampling;  // temperature 1 by default
  sampling.set_ignore_eos(true);
  absl::StatusOr<v1::PrefillResponse> drawn =
      handler->Prefill(PrefillRequestFor("drawn", prompt, sampling));
  ASSERT_TRUE(drawn.ok()) << drawn.status();
  sampling.set_seed(drawn->seed());
  absl::StatusOr<v1::PrefillResponse> replay =
      handler->Prefill(PrefillRequestFor("replay", prompt, sampling));
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->seed(), drawn->seed());
  EXPECT_EQ(DecodeWithoutDrafts(*handler, "replay", *replay, 16),
            DecodeWithoutDrafts(*handler, "drawn", *drawn, 16));
}

TEST_F(VerifierHandlerTest, InfoDescribesTheTargetAndTheServersLimits) {
  VerifierOptions options = Options();
  options.max_session_length = 100000;  // beyond the target's 4096 positions
  options.session_idle_timeout = absl::Milliseconds(1500);
  std::unique_ptr<VerifierHandler> handler = Handler(options);
  ASSERT_NE(handler, nullptr);
  absl::StatusOr<v1::TargetVerifierServiceInfoResponse> info = handler->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->instance_id().empty());
  EXPECT_EQ(info->model_name(), "qwen35-tiny-a");
  EXPECT_EQ(info->quantization(), "dense");
  EXPECT_EQ(info->vocab_size(), 320u);
  EXPECT_EQ(info->hidden_size(), 64u);
  EXPECT_EQ(info->num_layers(), 4u);
  EXPECT_EQ(std::vector<int64_t>(info->tapped_layer_ids().begin(), info->tapped_layer_ids().end()),
            kDefaultTaps);
  EXPECT_EQ(info->context_dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(info->memory_kind(), v1::MEMORY_KIND_POSIX_SHM);
  EXPECT_EQ(info->device(), "cpu");
  EXPECT_TRUE(info->shared_weights().empty());  // a drafter maps the checkpoint file instead
  EXPECT_EQ(Ids(info->eos_token_ids()), std::vector<int64_t>{1});
  EXPECT_EQ(info->max_sessions(), 4u);
  EXPECT_EQ(info->max_session_length(), 4096u);
  EXPECT_EQ(info->max_block_size(), static_cast<uint32_t>(kMaxBlock));
  EXPECT_EQ(info->session_idle_timeout().seconds(), 1);
  EXPECT_EQ(info->session_idle_timeout().nanos(), 500'000'000);

  std::unique_ptr<VerifierHandler> restarted = Handler(options);
  ASSERT_NE(restarted, nullptr);
  EXPECT_NE(restarted->Info()->instance_id(), info->instance_id());
}

TEST_F(VerifierHandlerTest, CreateRefusesOptionsTheTargetCannotMeet) {
  const auto refused = [](auto change) {
    VerifierOptions options = Options();
    change(options);
    return VerifierHandler::Create(Target(), options).status().code();
  };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(refused([](VerifierOptions& o) { o.tapped_layer_ids = {0, 4}; }), kInvalid);
  EXPECT_EQ(refused([](VerifierOptions& o) { o.tapped_layer_ids = {-1}; }), kInvalid);
  EXPECT_EQ(refused([](VerifierOptions& o) { o.max_sessions = 0; }), kInvalid);
  EXPECT_EQ(refused([](VerifierOptions& o) { o.max_block_size = 0; }), kInvalid);
  EXPECT_EQ(refused([](VerifierOptions& o) { o.max_session_length = 1; }), kInvalid);
}

}  // namespace
}  // namespace specd::verifier
