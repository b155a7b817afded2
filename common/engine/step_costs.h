#pragma once
// What decode steps cost on one served pair, measured as it serves, by the number of requests
// decoding at once (bucketed by powers of two): the step schedulers batch their forwards, so a
// step's time is that of a forward over every member's rows. Kept per batch size:
// - the verify forward's time as a line in its rows, fitted to recent steps (a forward that also
//   took prefill chunks is priced by its larger row count, not blamed on a block);
// - the draft call's time when it drafts, as a line in the context rows it takes in first (the
//   rows committed since the request last drafted: a drafter that reads hidden states projects
//   each, so a call after many steps without drafting, or the first after a long prompt, costs
//   more);
// - its time when it drafts nothing (the call still returns only once the others' drafting has).
// Not thread-safe: the guard locks it.
#include <cstdint>
#include <optional>
#include <vector>

namespace specd::engine {

class StepCosts {
 public:
  // A verify step at `batch` open requests that took `ms`, in a forward of `forward_rows` rows
  // (0: unknown, taken as `batch` blocks like its own), `own` of them its own.
  void RecordVerify(int64_t batch, int64_t own, int64_t forward_rows, double ms);
  // A draft call at `batch` that drafted after taking in `context_rows` rows.
  void RecordDraft(int64_t batch, int64_t context_rows, double ms);
  // A draft call at `batch` that drafted nothing.
  void RecordIdleDraft(int64_t batch, double ms);

  // The time of a forward of `rows` rows (fractional: expected) at `batch`; nullopt before any.
  std::optional<double> VerifyMs(int64_t batch, double rows) const;
  // The time of a draft call that takes in `context_rows` rows and drafts; nullopt before any.
  std::optional<double> DraftMs(int64_t batch, double context_rows) const;
  // The time of a draft call that drafts nothing; nullopt before any.
  std::optional<double> IdleDraftMs(int64_t batch) const;

  // Verify steps recorded at `batch` since one of a single own token, or a drafting call, was
  // (nullopt: never).
  std::optional<int64_t> SingleAge(int64_t batch) const;
  std::optional<int64_t> DraftAge(int64_t batch) const;

 private:
  // An exponentially weighted mean: the first samples count fully, later ones by a fixed
  // weight, so the cost follows a machine whose load changes.
  struct Mean {
    double value = 0;
    int64_t samples = 0;

    void Add(double sample);
  };
  // Least squares of ms on rows over the samples, older ones fading.
  struct Line {
    double weight = 0, rows = 0, rows_squared = 0, ms = 0, rows_ms = 0;

    void Add(double sample_rows, double sample_ms);
    double At(double at_rows) const;
  };
  struct Bucket {
    Line verify;
    std::optional<int64_t> single_at_step;  // the last step of one own token
    Line drafting;
    std::optional<int64_t> drafted_at_step;  // the last step that drafted
    Mean idle_draft;
    int64_t steps = 0;
  };

  static size_t BucketOf(int64_t batch);
  Bucket& At(int64_t batch);
  const Bucket* Find(int64_t batch) const;

  std::vector<Bucket> buckets_;
};

}  // namespace specd::engine
