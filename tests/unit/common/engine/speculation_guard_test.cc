// The speculation guard on simulated pairs, whose drafts are accepted with known odds and whose
// calls take known times: it speculates where that pays, with the block that pays most, stops
// where it does not, prices each batch size apart and comes back when drafts become good again.
// And StepCosts, which prices a forward by its rows.
#include "common/engine/speculation_guard.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "common/engine/step_costs.h"
#include "gtest/gtest.h"

namespace specd::engine {
namespace {

constexpr int64_t kBlock = 16;
constexpr int64_t kPrompt = 16;

// A pair on which each draft is accepted with `accept` given the ones before it were, a draft
// call takes `draft_ms`, `draft_ms_per_row` more for each row committed since the request last
// drafted (`pending_rows`: the prompt's at first) and `draft_ms_per_draft` more for each draft
// asked of it, and a verify of a block of k tokens `verify_ms(k)`. `elapsed_ms` and `emitted` add
// up the steps' time and tokens.
struct SimulatedPair {
  double accept = 0.9;
  double draft_ms = 2;
  std::function<double(int64_t)> verify_ms = [](int64_t block) { return 10 + 0.2 * block; };
  double draft_ms_per_row = 0;
  double draft_ms_per_draft = 0;
  int64_t pending_rows = kPrompt;
  double elapsed_ms = 0;
  int64_t emitted = 0;
  std::mt19937 random{7};

  // Runs `steps` steps of `request` with room for `room` tokens each; the block sizes chosen.
  std::vector<int64_t> Run(SpeculationGuard::Request& request, int64_t steps, int64_t room = 1000) {
    std::vector<int64_t> chosen;
    std::bernoulli_distribution accepted(accept);
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t block = request.Choose(room);
      const int64_t drafts = block - 1;
      int64_t kept = 0;
      while (kept < drafts && accepted(random)) ++kept;
      std::optional<double> draft;
      if (drafts > 0) {
        draft = draft_ms + draft_ms_per_row * static_cast<double>(pending_rows) +
                draft_ms_per_draft * static_cast<double>(drafts);
        pending_rows = 0;
      }
      // Forwards of this request alone: their rows and drafts left unknown (0), as its own.
      Drafts proposed;
      proposed.tokens.resize(drafts);
      EmittedTokens verified;
      verified.ids.resize(kept + 1);
      request.Record(proposed, verified, draft, verify_ms(block));
      elapsed_ms += draft.value_or(0) + verify_ms(block);
      pending_rows += kept + 1;
      emitted += kept + 1;
      chosen.push_back(block);
    }
    return chosen;
  }
};

// `requests` open on one guard whose steps share forwards, one per round: every request that
// drafts is in one draft forward, `draft_ms(rows, drafts)` for all of their rows (block and
// pending context) and drafts; every request is in one verify forward, `verify_ms(blocks)` for
// their blocks, plus `replay_ms_per_row` for each row of a block verified the round before that
// the forward's DeltaNet layers replay first. Each draft is accepted with `accept`. As in a
// served batch, each request records its step and chooses its next one before the next request
// does.
struct SimulatedCrowd {
  double accept = 0.8;
  std::function<double(int64_t, int64_t)> draft_ms;
  std::function<double(const std::vector<int64_t>&)> verify_ms;
  double replay_ms_per_row = 0;
  double elapsed_ms = 0;
  int64_t emitted = 0;
  std::mt19937 random{11};

  // Runs `rounds` rounds; the block sizes chosen in the last one.
  std::vector<int64_t> Run(std::vector<SpeculationGuard::Request>& requests, int64_t rounds) {
    struct Step {
      Drafts drafts;
      EmittedTokens verified;
      std::optional<double> draft_ms;
      double verify_ms = 0;
    };
    std::vector<std::optional<Step>> last(requests.size());
    std::vector<int64_t> pending(requests.size(), kPrompt);
    std::vector<int64_t> replayed(requests.size(), 0);
    std::vector<int64_t> blocks(requests.size());
    std::bernoulli_distribution accepted(accept);
    for (int64_t round = 0; round < rounds; ++round) {
      int64_t draft_rows = 0, drafts = 0, verify_rows = 0;
      for (size_t r = 0; r < requests.size(); ++r) {
        if (last[r].has_value()) {
          requests[r].Record(last[r]->drafts, last[r]->verified, last[r]->draft_ms,
                             last[r]->verify_ms);
        }
        blocks[r] = requests[r].Choose(1000);
        if (blocks[r] > 1) draft_rows += kBlock + pending[r], drafts += blocks[r] - 1;
        verify_rows += blocks[r];
      }
      const std::optional<double> draft =
          drafts > 0 ? std::optional(draft_ms(draft_rows, drafts)) : std::nullopt;
      int64_t replay_rows = 0;
      for (const int64_t rows : replayed) replay_rows += rows;
      const double verify =
          verify_ms(blocks) + replay_ms_per_row * static_cast<double>(replay_rows);
      for (size_t r = 0; r < requests.size(); ++r) {
        int64_t kept = 0;
        while (kept < blocks[r] - 1 && accepted(random)) ++kept;
        Step& step = last[r].emplace();
        step.drafts.tokens.resize(blocks[r] - 1);
        step.drafts.forward = {.rows = draft_rows, .drafts = drafts};
        step.verified.ids.resize(kept + 1);
        step.verified.forward = {.rows = verify_rows,
                                 .sequences = static_cast<int64_t>(requests.size()),
                                 .replayed_rows = replay_rows};
        step.draft_ms = blocks[r] > 1 ? draft : std::nullopt;
        step.verify_ms = verify;
        if (blocks[r] > 1) pending[r] = 0;
        pending[r] += kept + 1;
        replayed[r] = blocks[r] > 1 ? kept + 1 : 0;
        emitted += kept + 1;
      }
      elapsed_ms += draft.value_or(0) + verify;
    }
    return blocks;
  }
};

// `size` short requests open on `guard`.
std::vector<SpeculationGuard::Request> Crowd(SpeculationGuard& guard, int size) {
  std::vector<SpeculationGuard::Request> crowd;
  for (int i = 0; i < size; ++i) crowd.push_back(guard.Open(Regime::kShort, kBlock, kPrompt));
  return crowd;
}

// After 300 rounds to settle, 300 more of `crowd` end with every request target-only and run at
// `share` of target-only decoding's tokens per ms or more.
void ExpectItSettlesOnTargetOnly(SimulatedCrowd& pair,
                                 std::vector<SpeculationGuard::Request>& crowd, double share) {
  pair.Run(crowd, 300);
  const double elapsed_ms = pair.elapsed_ms;
  const int64_t emitted = pair.emitted;
  const std::vector<int64_t> last = pair.Run(crowd, 300);
  EXPECT_EQ(std::count(last.begin(), last.end(), 1), static_cast<int64_t>(crowd.size()));
  const double target_only =
      static_cast<double>(crowd.size()) / pair.verify_ms(std::vector<int64_t>(crowd.size(), 1));
  EXPECT_GE(static_cast<double>(pair.emitted - emitted) / (pair.elapsed_ms - elapsed_ms),
            share * target_only);
}

// How often `size` was chosen among the last `tail` choices.
int64_t CountIn(const std::vector<int64_t>& chosen, int64_t size, size_t tail) {
  return std::count(chosen.end() - static_cast<int64_t>(std::min(tail, chosen.size())),
                    chosen.end(), size);
}

TEST(StepCostsTest, PricesAForwardOfAnyRowsFromTheLineThroughThoseMeasured) {
  StepCosts costs;
  EXPECT_FALSE(costs.VerifyMs(1, 4).has_value());
  costs.RecordVerify(1, 1, {.rows = 1, .sequences = 1}, 10);
  // One row count measured: flat.
  EXPECT_DOUBLE_EQ(*costs.VerifyMs(1, 16), 10);
  for (int i = 0; i < 8; ++i) {
    costs.RecordVerify(1, 16, {.rows = 16, .sequences = 1}, 25);
    costs.RecordVerify(1, 1, {.rows = 1, .sequences = 1}, 10);
  }
  // Within the plane's ridge (its rows and logit rows varied together).
  EXPECT_NEAR(*costs.VerifyMs(1, 8), 17, 1e-3);
  EXPECT_NEAR(*costs.VerifyMs(1, 31), 40, 1e-3);
  EXPECT_FALSE(costs.VerifyMs(16, 8).has_value()) << "each batch size apart";
}

TEST(StepCostsTest, PricesADraftForwardByItsRowsAndItsDrafts) {
  // 10 ms, 0.5 ms per row and 4 ms per draft.
  const auto ms = [](int rows, int drafts) { return 10 + 0.5 * rows + 4 * drafts; };
  StepCosts costs;
  EXPECT_FALSE(costs.OnlyDraftCount(1).has_value());
  costs.RecordDraft(1, /*own_drafts=*/15, /*forward_rows=*/80, /*forward_drafts=*/15, ms(80, 15));
  // One forward measured: flat, and the count the call was asked for is the only one known.
  EXPECT_DOUBLE_EQ(*costs.DraftMs(1, 20, 5), ms(80, 15));
  EXPECT_EQ(costs.OnlyDraftCount(1), 15);
  for (const auto& [rows, drafts] : {std::pair{22, 5}, {23, 15}, {56, 5}, {22, 10}}) {
    costs.RecordDraft(1, drafts, rows, drafts, ms(rows, drafts));
  }
  EXPECT_FALSE(costs.OnlyDraftCount(1).has_value());
  EXPECT_NEAR(*costs.DraftMs(1, 22, 3), ms(22, 3), 1e-2);
  EXPECT_NEAR(*costs.DraftMs(1, 116, 15), ms(116, 15), 1e-2);
}

TEST(StepCostsTest, ADraftForwardsInputsThatVariedOnlyTogetherShareTheSlope) {
  StepCosts costs;
  // Every forward had more drafts exactly when it had more rows: either explains the time, as
  // when half a batch's requests drafted together and then all of them did.
  costs.RecordDraft(16, 5, 8 * 22, 8 * 5, 250);
  costs.RecordDraft(16, 5, 16 * 22, 16 * 5, 500);
  EXPECT_NEAR(*costs.DraftMs(16, 16 * 22, 16 * 5), 500, 1);
  EXPECT_NEAR(*costs.DraftMs(16, 12 * 22, 12 * 5), 375, 1);
  EXPECT_GT(*costs.DraftMs(16, 8 * 22, 16 * 5), 250);
}

TEST(StepCostsTest, AForwardThatAlsoTookPrefillRowsIsPricedByThemNotByTheBlock) {
  StepCosts costs;
  for (int i = 0; i < 8; ++i) {
    costs.RecordVerify(2, 1, {.rows = 2, .sequences = 2}, 10);  // two requests' single tokens
    // Beside a 400-row prefill chunk, whose rows but its last skip the head.
    costs.RecordVerify(2, 1, {.rows = 402, .sequences = 2, .logit_rows = 3}, 210);
  }
  EXPECT_NEAR(*costs.VerifyMs(2, 32), 25, 1e-6);
  EXPECT_EQ(costs.TargetOnlyAge(2), 0);
  EXPECT_FALSE(costs.DraftAge(2).has_value());
}

// A prefill chunk's rows skip the LM head, so they cost less than a block's (as the 0.8B shape runs
// at 16 requests on a CPU: 2.2 ms a row against 3.1). A block is priced by rows that all go
// through the head, not by a line through forwards that mixed in such chunks.
TEST(StepCostsTest, PricesABlocksRowsApartFromPrefillRows) {
  StepCosts costs;
  for (int i = 0; i < 8; ++i) {
    costs.RecordVerify(16, 1, {.rows = 16, .sequences = 16, .logit_rows = 16}, 64);
    costs.RecordVerify(16, 6, {.rows = 96, .sequences = 16, .logit_rows = 96}, 310);
    // Fifteen single tokens and a 65-row prefill chunk: 16 rows through the head.
    costs.RecordVerify(16, 1, {.rows = 80, .sequences = 16, .logit_rows = 16}, 204.8);
  }
  EXPECT_NEAR(*costs.VerifyMs(16, 96), 310, 1);
  EXPECT_NEAR(*costs.VerifyMs(16, 48), 162.4, 1);
}

// As a CPU runs them at 16 requests: a target-only forward takes what reading the weights does,
// while forwards of blocks are compute-bound and pay per sequence.
TEST(StepCostsTest, PricesATargetOnlyForwardByItsOwnTimesNotByTheLineThroughBlocks) {
  StepCosts costs;
  EXPECT_FALSE(costs.TargetOnlyMs(16).has_value());
  costs.RecordVerify(16, 16, {.rows = 256, .sequences = 16}, 985);
  EXPECT_DOUBLE_EQ(*costs.TargetOnlyMs(16), 985) << "the line, until a target-only forward ran";
  costs.RecordVerify(16, 1, {.rows = 16, .sequences = 16}, 70);
  for (int i = 0; i < 64; ++i) costs.RecordVerify(16, 6, {.rows = 96, .sequences = 16}, 410);
  EXPECT_GT(*costs.VerifyMs(16, 16), 100) << "the line through the blocks, this test's premise";
  EXPECT_DOUBLE_EQ(*costs.TargetOnlyMs(16), 70);
  EXPECT_EQ(costs.TargetOnlyAge(16), 4);  // 64 samples of 16 requests' steps since
  // Forwards of blocks with as few rows as requests open are not target-only ones.
  costs.RecordVerify(16, 6, {.rows = 12, .sequences = 2}, 40);
  EXPECT_DOUBLE_EQ(*costs.TargetOnlyMs(16), 70);
}

// The step after a verify block replays the block's accepted rows in the DeltaNet layers: a
// target-only forward that did costs what target-only decoding, which replays none, does not.
TEST(StepCostsTest, ATargetOnlyForwardThatReplayedABlockIsNotTargetOnlyDecodingsPrice) {
  StepCosts costs;
  costs.RecordVerify(16, /*own=*/1, {.rows = 16, .sequences = 16}, /*ms=*/64);
  for (int i = 0; i < 32; ++i) costs.RecordVerify(16, 6, {.rows = 96, .sequences = 16}, 310);
  costs.RecordVerify(16, 1, {.rows = 16, .sequences = 16, .replayed_rows = 96}, 86);
  EXPECT_DOUBLE_EQ(*costs.TargetOnlyMs(16), 64);
  EXPECT_EQ(costs.TargetOnlyAge(16), 2) << "its age counts from the forward that replayed none";
}

TEST(SpeculationGuardTest, AFreshGuardSpeculatesAFullBlockThenASingleTokenThenAnotherBlock) {
  SpeculationGuard guard;
  SpeculationGuard::Request request = guard.Open(Regime::kShort, kBlock, kPrompt);
  SimulatedPair pair;
  const std::vector<int64_t> chosen = pair.Run(request, 3);
  EXPECT_EQ(chosen[0], kBlock);
  EXPECT_EQ(chosen[1], 1);
  // A draft call's time at another count is unknown: the best-priced block below the full one.
  EXPECT_GT(chosen[2], 1);
  EXPECT_LT(chosen[2], kBlock);
  EXPECT_TRUE(request.last().exploring);
}

TEST(SpeculationGuardTest, SpeculatesFullBlocksWhenDraftsAreGoodAndVerifyIsCheap) {
  SpeculationGuard guard;
  SpeculationGuard::Request request = guard.Open(Regime::kShort, kBlock, kPrompt);
  SimulatedPair pair{.accept = 0.95};
  const std::vector<int64_t> chosen = pair.Run(request, 300);
  EXPECT_GE(CountIn(chosen, kBlock, 100), 95);
  EXPECT_FALSE(request.last().exploring);
  EXPECT_GT(request.last().expected_speedup, 3);
  EXPECT_GT(request.last().expected_tokens, 8);
}

// Blocks of 3 would be 6 % faster than single tokens, less than the guard's estimates can tell
// apart and not worth tokens that come in bursts.
TEST(SpeculationGuardTest, DoesNotSpeculateForAGainWithinItsEstimatesError) {
  SpeculationGuard guard;
  SpeculationGuard::Request request = guard.Open(Regime::kShort, kBlock, kPrompt);
  SimulatedPair pair{.accept = 0.25};
  const std::vector<int64_t> chosen = pair.Run(request, 400);
  EXPECT_GE(CountIn(chosen, 1, 100), 95);
  EXPECT_LT(request.last().expected_speedup, 1.1);
}

TEST(SpeculationGuardTest, StopsSpeculatingWhenNothingIsAccepted) {
  SpeculationGuard guard;
  SpeculationGuard::Request request = guard.Open(Regime::kShort, kBlock, kPrompt);
  SimulatedPair pair{.accept = 0};
  const std::vector<int64_t> chosen = pair.Run(request, 400);
  // After the first steps, speculation comes back only for the probes (after 32, 64, 128 idle
  // steps) and the periodic measurement of the draft's cost.
  const int64_t drafted =
      std::count_if(chosen.begin() + 10, chosen.end(), [](int64_t block) { return block > 1; });
  EXPECT_LE(drafted, 8);
  EXPECT_EQ(request.last().block_size, 1);
}

// A model drafter projects every committed row it takes in, so looking at it again after a long
// prompt, or many steps without it, costs many steps' time: a request that never gains from it
// pays for such looks at most 2 % of its time.
TEST(SpeculationGuardTest, LooksAtADrafterThatNeverPaysCostLittleWhateverItsCatchUp) {
  SpeculationGuard guard;
  {
    SpeculationGuard::Request first = guard.Open(Regime::kLong, kBlock, kPrompt);
    SimulatedPair{.accept = 0, .draft_ms_per_row = 0.1}.Run(first, 300);
  }
  constexpr int64_t kLongPrompt = 4096;  // 410 ms to take in, 41 steps' worth
  for (const int64_t steps : {200, 1000, 4000}) {
    SpeculationGuard::Request request = guard.Open(Regime::kLong, kBlock, kLongPrompt);
    SimulatedPair pair{.accept = 0, .draft_ms_per_row = 0.1, .pending_rows = kLongPrompt};
    pair.Run(request, steps);
    const double target_only_ms = static_cast<double>(steps) * pair.verify_ms(1);
    EXPECT_LE(pair.elapsed_ms, 1.03 * target_only_ms) << steps << " steps";
  }
}

TEST(SpeculationGuardTest, PicksAShortBlockWhenEachVerifiedTokenIsExpensive) {
  SpeculationGuard guard;
  SpeculationGuard::Request request = guard.Open(Regime::kShort, kBlock, kPrompt);
  // Verify time grows with every token (compute-bound): the best block is short (3: 1.18× as
  // fast as single tokens; 2 and 4: 1.15×).
  SimulatedPair pair{.accept = 0.8, .draft_ms = 0.5, .verify_ms = [](int64_t block) {
                       return 4.0 + 4.0 * static_cast<double>(block);
                     }};
  // Spread the measurements over several sizes, as the first requests would.
  for (int64_t block = 1; block <= kBlock; ++block) {
    SpeculationGuard::Request warm = guard.Open(Regime::kShort, block, kPrompt);
    pair.Run(warm, 3);
  }
  const std::vector<int64_t> chosen = pair.Run(request, 200);
  const int64_t last = chosen.back();
  EXPECT_GE(last, 2);
  EXPECT_LE(last, 4);
}

// A drafter whose call grows with each draft asked of it (on a CPU, its head over every drafted
// position) beside a verify that grows with each token: a full block costs more than it gains,
// and the guard finds the short block that pays most.
TEST(SpeculationGuardTest, PricesADraftCallByTheDraftsAskedOfIt) {
  const auto verify_ms = [](int64_t block) { return 31 + 5 * static_cast<double>(block - 1); };
  SimulatedPair pair{
      .accept = 0.9, .draft_ms = 10, .verify_ms = verify_ms, .draft_ms_per_draft = 8};
  double best_rate = 0;  // tokens per ms of the best fixed block
  for (int64_t block = 2; block <= kBlock; ++block) {
    const double tokens =
        (1 - std::pow(pair.accept, static_cast<double>(block))) / (1 - pair.accept);
    const double ms =
        pair.draft_ms + pair.draft_ms_per_draft * static_cast<double>(block - 1) + verify_ms(block);
    best_rate = std::max(best_rate, tokens / ms);
  }
  SpeculationGuard guard;
  SpeculationGuard::Request request = guard.Open(Regime::kShort, kBlock, kPrompt);
  const std::vector<int64_t> chosen = pair.Run(request, 400);
  EXPECT_GE(static_cast<double>(pair.emitted) / pair.elapsed_ms, 0.9 * best_rate);
  EXPECT_GE(chosen.back(), 4);
  EXPECT_LE(chosen.back(), 8);
}

TEST(SpeculationGuardTest, RoomForOneTokenIsATargetOnlyStep) {
  SpeculationGuard guard;
  SpeculationGuard::Request request = guard.Open(Regime::kShort, kBlock, kPrompt);
  EXPECT_EQ(request.Choose(1), 1);
  EXPECT_EQ(request.Choose(5), 5);  // exploring, cut to the room
}

TEST(SpeculationGuardTest, PricesEachBatchSizeApart) {
  SpeculationGuard guard;
  // Alone, verifying 16 tokens costs little more than one; with 16 requests open the forward is
  // compute-bound, so extra tokens cost in proportion.
  auto verify_ms = [](int64_t open) {
    return [open](int64_t block) {
      return open == 1 ? 10 + 0.1 * block : 4.0 * static_cast<double>(block);
    };
  };
  {
    SpeculationGuard::Request alone = guard.Open(Regime::kShort, kBlock, kPrompt);
    SimulatedPair pair{.accept = 0.5, .draft_ms = 1, .verify_ms = verify_ms(1)};
    pair.Run(alone, 100);
    EXPECT_GT(alone.last().block_size, 1);
  }
  std::vector<SpeculationGuard::Request> crowd;
  for (int i = 0; i < 16; ++i) crowd.push_back(guard.Open(Regime::kShort, kBlock, kPrompt));
  SimulatedPair pair{.accept = 0.5, .draft_ms = 1, .verify_ms = verify_ms(16)};
  std::vector<int64_t> chosen;
  for (int round = 0; round < 20; ++round) {
    for (SpeculationGuard::Request& request : crowd) chosen.push_back(pair.Run(request, 1).front());
  }
  EXPECT_GE(CountIn(chosen, 1, 80), 76);
}

// Sixteen requests share each forward, in which (as on a CPU) every sequence verifying a block
// costs more than its rows, and a wide one more than that: good drafts do not pay, and the crowd
// decodes target-only at its speed (a look at a price is taken by the whole batch, as the price
// assumes).
TEST(SpeculationGuardTest, ACrowdWhoseBlocksCostMoreThanTheyGainDecodesTargetOnly) {
  SpeculationGuard guard;
  std::vector<SpeculationGuard::Request> crowd = Crowd(guard, 16);
  SimulatedCrowd pair{
      .draft_ms = [](int64_t rows, int64_t drafts) { return 20 + 0.3 * rows + 2.0 * drafts; },
      .verify_ms =
          [](const std::vector<int64_t>& blocks) {
            double ms = 60;
            int64_t rows = 0;
            for (const int64_t block : blocks) {
              ms += 2.5 * static_cast<double>(block) + (block > 1 ? 25 : 0);
              rows += block;
            }
            // A wide forward spills its caches.
            return ms + 10.0 * static_cast<double>(std::max<int64_t>(0, rows - 128));
          }};
  ExpectItSettlesOnTargetOnly(pair, crowd, 0.9);
}

// Sixteen requests whose every draft is accepted, as the 0.8B-shaped W4A8 pair runs them on a
// 2-core CPU (bench serve --force-tau 6): a block's rows cost less each than target-only's single
// tokens, but with the draft forward and the replay of the block's rows in the next forward no
// block pays. A look at target-only taken right after speculating carries that replay; priced by
// it, target-only looked slower than blocks of 6, and the crowd speculated at 0.9× its speed.
TEST(SpeculationGuardTest, ACrowdPricesTargetOnlyByForwardsThatReplayNoBlock) {
  SpeculationGuard guard;
  std::vector<SpeculationGuard::Request> crowd = Crowd(guard, 16);
  SimulatedCrowd pair{
      .accept = 1,
      .draft_ms = [](int64_t rows, int64_t drafts) { return 10 + 0.1 * rows + 0.55 * drafts; },
      .verify_ms =
          [](const std::vector<int64_t>& blocks) {
            int64_t rows = 0;
            for (const int64_t block : blocks) rows += block;
            return 14 + 3.125 * static_cast<double>(rows);  // 16 rows: 64 ms, 96: 314 ms
          },
      .replay_ms_per_row = 0.25};
  ExpectItSettlesOnTargetOnly(pair, crowd, 0.95);
}

// One device runs every request's forwards: a look at the drafter holds the whole batch up, not
// only the request that takes it. Sixteen requests whose drafts are never accepted, as a CPU runs
// them (a forward of blocks costs per sequence; the drafter takes in each row committed since a
// request last drafted), pay for their looks at most a few percent of their time.
TEST(SpeculationGuardTest, LooksOfACrowdThatNeverGainsCostLittle) {
  SpeculationGuard guard;
  std::vector<SpeculationGuard::Request> crowd = Crowd(guard, 16);
  SimulatedCrowd pair{
      .accept = 0,
      .draft_ms = [](int64_t rows, int64_t drafts) { return 10 + 0.1 * rows + 2.0 * drafts; },
      .verify_ms =
          [](const std::vector<int64_t>& blocks) {
            double ms = 80;
            for (const int64_t block : blocks)
              ms += block > 1 ? 5.0 * static_cast<double>(block) : 0;
            return ms;
          }};
  pair.Run(crowd, 100);  // its first looks: every batch size's must be taken
  const double elapsed_ms = pair.elapsed_ms;
  pair.Run(crowd, 2000);
  const double target_only_ms = 2000 * pair.verify_ms(std::vector<int64_t>(16, 1));
  EXPECT_LE(pair.elapsed_ms - elapsed_ms, 1.02 * target_only_ms);
}

// …while four requests whose forward is bound by reading the weights speculate together.
TEST(SpeculationGuardTest, ACrowdWhoseForwardIsBoundByItsWeightsSpeculates) {
  SpeculationGuard guard;
  std::vector<SpeculationGuard::Request> crowd = Crowd(guard, 4);
  SimulatedCrowd pair{
      .draft_ms = [](int64_t rows, int64_t drafts) { return 10 + 0.05 * rows + 0.1 * drafts; },
      .verify_ms =
          [](const std::vector<int64_t>& blocks) {
            double ms = 30;
            for (const int64_t block : blocks) ms += 0.2 * block;
            return ms;
          }};
  const std::vector<int64_t> last = pair.Run(crowd, 300);
  EXPECT_EQ(std::count(last.begin(), last.end(), 1), 0);
  const double target_only = 4 / pair.verify_ms(std::vector<int64_t>(4, 1));
  EXPECT_GE(static_cast<double>(pair.emitted) / pair.elapsed_ms, 2 * target_only);
}

// A batch size's first look is the block priced best at the size below, not a whole block for
// each of its requests (here a forward of 256 rows).
TEST(SpeculationGuardTest, ABatchSizesFirstLookIsTheBlockBestPricedBelowIt) {
  SpeculationGuard guard;
  {
    // Alone, each verified token costs as much as the step: the best block is short.
    SpeculationGuard::Request alone = guard.Open(Regime::kShort, kBlock, kPrompt);
    SimulatedPair pair{.accept = 0.7, .draft_ms = 1, .verify_ms = [](int64_t block) {
                         return 4.0 + 4.0 * static_cast<double>(block);
                       }};
    const std::vector<int64_t> chosen = pair.Run(alone, 100);
    ASSERT_LE(chosen.back(), 4);
  }
  std::vector<SpeculationGuard::Request> crowd = Crowd(guard, 16);
  const int64_t first = crowd.front().Choose(1000);
  EXPECT_GT(first, 1);
  EXPECT_LE(first, 4);
  EXPECT_TRUE(crowd.front().last().exploring);
  // The whole batch takes it.
  for (size_t i = 1; i < crowd.size(); ++i) EXPECT_EQ(crowd[i].Choose(1000), first);
}

TEST(SpeculationGuardTest, TakesTheDrafterBackWhenItsDraftsBecomeGood) {
  SpeculationGuard guard;
  SpeculationGuard::Request request = guard.Open(Regime::kShort, kBlock, kPrompt);
  SimulatedPair pair{.accept = 0};
  pair.Run(request, 100);
  EXPECT_EQ(request.last().block_size, 1);
  pair.accept = 0.95;  // the text turned repetitive
  const std::vector<int64_t> chosen = pair.Run(request, 200);
  EXPECT_GE(CountIn(chosen, kBlock, 50), 45);
}

TEST(SpeculationGuardTest, ARegimesRequestsShareWhatTheyLearnedAboutAcceptance) {
  SpeculationGuard guard;
  SimulatedPair pair{.accept = 0};
  {
    SpeculationGuard::Request first = guard.Open(Regime::kLong, kBlock, kPrompt);
    pair.Run(first, 200);
  }
  // A new long request starts from its regime's odds, and does not speculate at all…
  SpeculationGuard::Request next = guard.Open(Regime::kLong, kBlock, kPrompt);
  EXPECT_EQ(pair.Run(next, 20), std::vector<int64_t>(20, 1));
  // …while a short one, whose regime has no counts yet, still tries.
  SpeculationGuard::Request other = guard.Open(Regime::kShort, kBlock, kPrompt);
  EXPECT_GT(other.Choose(1000), 1);
}

}  // namespace
}  // namespace specd::engine
