#pragma once
// What a decode step costs on one served pair, measured as it serves: the draft call and the
// verify forward by the verify block's size, each by the number of requests decoding at once
// (the step schedulers batch them into one forward, so a step's time depends on its company).
// Batch sizes are bucketed by powers of two. A block size never measured is interpolated
// linearly between the measured ones (a verify forward costs a weight read plus a little per
// token), so a few measured sizes price them all. Not thread-safe: the guard locks it.
#include <cstdint>
#include <optional>
#include <vector>

namespace specd::engine {

class StepCosts {
 public:
  void RecordVerify(int64_t batch, int64_t block, double ms);
  void RecordDraft(int64_t batch, double ms);

  // The verify time of a block of `block` tokens (fractional: an expected size) at `batch`
  // requests, from that batch's bucket; nullopt before any verify there.
  std::optional<double> VerifyMs(int64_t batch, double block) const;
  // The draft call's time at `batch`; nullopt before any draft there.
  std::optional<double> DraftMs(int64_t batch) const;

  // Verify steps recorded at `batch` since a verify of `block` tokens, or a draft call, was
  // (nullopt: never).
  std::optional<int64_t> VerifyAge(int64_t batch, int64_t block) const;
  std::optional<int64_t> DraftAge(int64_t batch) const;

 private:
  // An exponentially weighted mean: the first samples count fully, later ones by a fixed
  // weight, so the cost follows a machine whose load changes.
  struct Mean {
    double ms = 0;
    int64_t samples = 0;
    int64_t at_step = 0;  // the bucket's step count when last recorded

    void Add(double value, int64_t step);
    std::optional<int64_t> AgeAt(int64_t step) const;
  };
  struct Bucket {
    std::vector<Mean> verify;  // [block − 1]
    Mean draft;
    int64_t steps = 0;
  };

  static size_t BucketOf(int64_t batch);
  Bucket& At(int64_t batch);
  const Bucket* Find(int64_t batch) const;

  std::vector<Bucket> buckets_;
};

}  // namespace specd::engine
