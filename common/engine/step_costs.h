#pragma once
// What decode steps cost on one served pair, measured as it serves, by the number of requests
// decoding at once (bucketed by powers of two): the step schedulers batch their forwards, so a
// step's time is that of a forward over every member's rows. Kept per batch size:
// - the verify forward's time as a plane in its rows and in those of them the LM head ran over,
//   fitted to recent steps: a forward that also took prefill chunks is priced by its larger row
//   count, not blamed on a block, and its chunks' rows, which skip the head, by what they cost (on
//   a CPU 2.2 ms a row of the 0.8B shape against 3.2 for a block's: a line through both put a
//   16-client verify of 96 rows at 275 ms for 310, and speculation at 1.08× where it ran at 0.93×);
//   a verify is priced as a forward whose every row goes through the head;
// - a target-only forward's time (every sequence's one token) on its own: a forward of blocks
//   does per sequence what one of single tokens does not, and a CPU's turns compute-bound past a
//   few rows, so a line through forwards of blocks misprices one of single tokens. Nor is one that
//   replayed an earlier block's rows (the step after speculating) a price of target-only decoding,
//   which replays none: on a CPU at 16 requests it cost 86 ms against 64;
// - the draft forward's time, as a plane in its rows (each call's block, and the context rows it
//   takes in first: those committed since the request last drafted, which a drafter reading
//   hidden states projects, so a call after many steps without drafting, or the first after a
//   long prompt, costs more) and in the drafts asked of it (a model drafter's head runs over
//   each drafted position, which on a CPU costs about what a verified row does).
// Times exclude the wait for the forward to start; each of a batch's requests records the same
// step, so its samples count as a batch-th of one.
// Not thread-safe: the guard locks it.
#include <cstdint>
#include <optional>
#include <vector>

#include "common/engine/ports.h"

namespace specd::engine {

class StepCosts {
 public:
  // A verify step at `batch` open requests that took `ms` in `forward` (its unknown counts taken
  // as `batch` blocks like its own), `own` rows its own.
  void RecordVerify(int64_t batch, int64_t own, const TargetForward& forward, double ms);
  // A draft call at `batch` that was asked for `own_drafts` drafts, in a draft forward of
  // `forward_rows` rows (every call's block and context rows taken in) asked for
  // `forward_drafts`, that took `ms`.
  void RecordDraft(int64_t batch, int64_t own_drafts, int64_t forward_rows, int64_t forward_drafts,
                   double ms);

  // The time of a forward of `rows` rows (fractional: expected) at `batch`; nullopt before any.
  std::optional<double> VerifyMs(int64_t batch, double rows) const;
  // The time of a target-only forward at `batch` (VerifyMs of `batch` rows until one ran).
  std::optional<double> TargetOnlyMs(int64_t batch) const;
  // The time of a draft forward of `rows` rows asked for `drafts` drafts at `batch`; nullopt
  // before any.
  std::optional<double> DraftMs(int64_t batch, double rows, double drafts) const;
  // The drafts every draft call at `batch` was asked for while all were asked for as many (how a
  // call's time changes with the count is unknown then); nullopt before any call and after.
  std::optional<int64_t> OnlyDraftCount(int64_t batch) const;

  // Steps (forwards, however many of their requests recorded them) at `batch` since a target-only
  // forward, or a drafting call, was recorded (nullopt: never).
  std::optional<int64_t> TargetOnlyAge(int64_t batch) const;
  std::optional<int64_t> DraftAge(int64_t batch) const;

 private:
  // Least squares of ms on two inputs over the samples, older ones fading. An input that never
  // varied says nothing of its slope: flat in it until it does. Time never falls as one grows.
  struct Plane {
    double weight = 0, x = 0, y = 0, ms = 0, xx = 0, yy = 0, xy = 0, x_ms = 0, y_ms = 0;

    // Older samples' weights multiplied by `fading` first.
    void Add(double sample_x, double sample_y, double sample_ms, double fading);
    double At(double at_x, double at_y) const;
  };
  struct Bucket {
    Plane verify;                               // in rows and logit rows
    Plane target_only;                          // its mean (x and y unused)
    std::optional<double> target_only_at_step;  // the last target-only step
    Plane drafting;                             // in a draft forward's rows and drafts
    std::optional<double> drafted_at_step;      // the last step that drafted
    std::optional<int64_t> own_drafts;          // what every call asked for, while all asked alike
    bool own_drafts_varied = false;
    double steps = 0;  // each sample a batch-th of one
  };

  static size_t BucketOf(int64_t batch);
  Bucket& At(int64_t batch);
  const Bucket* Find(int64_t batch) const;

  std::vector<Bucket> buckets_;
};

}  // namespace specd::engine
