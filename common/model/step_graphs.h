#pragma once
// Forward steps replayed as CUDA graphs. A decode step of a few sequences launches hundreds of
// small kernels, and on a GPU their launches, not the arithmetic, bound it: a graph launches them
// all at once. A graph writes the memory of the caches it was captured with, so one is captured
// per batch of caches — on the batch's second step in a row (the first runs as it is and warms up
// what a capture cannot create: cuBLAS handles, lazily loaded kernels) — and replayed while that
// batch keeps stepping: the step's inputs copied into the graph's own, a replay. One graph is kept
// per batch size. On a CPU there is nothing to capture: the step runs as it is.
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace specd::model {

class StepGraphs {
 public:
  // A step of the batch: reads nothing but its inputs and memory that stays where it is (the
  // weights, the caches), and launches the same work whenever its inputs have the same shapes.
  using Step = std::function<std::vector<at::Tensor>(std::span<const at::Tensor> inputs)>;

  StepGraphs();
  ~StepGraphs();

  // step(inputs) for the batch whose caches `caches` names (their ids, cache_id.h, in row order).
  // `settings`: what else the step bakes in that its inputs do not carry (a drafter's windows). A
  // graph replays only for the same caches, settings and input shapes. Its outputs are the graph's
  // own memory, which its next replay overwrites: copy what must outlive the batch's next step.
  std::vector<at::Tensor> Run(std::span<const uint64_t> caches, std::span<const int64_t> settings,
                              std::span<const at::Tensor> inputs, const Step& step);

 private:
  // What a graph is captured for.
  struct Work {
    std::vector<uint64_t> caches;
    std::vector<int64_t> settings_and_shapes;
    bool operator==(const Work&) const = default;
  };
  struct Graph;

  std::mutex mutex_;
  // Per number of caches: the work that last stepped uncaptured, and the graph captured for one.
  std::map<size_t, Work> uncaptured_;
  std::map<size_t, std::unique_ptr<Graph>> graphs_;
};

}  // namespace specd::model
