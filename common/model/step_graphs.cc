#include "common/model/step_graphs.h"

#ifdef SPECD_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <c10/util/Exception.h>

namespace specd::model {

#ifdef SPECD_CUDA_GRAPHS

struct StepGraphs::Graph {
  Work work;
  std::vector<at::Tensor> inputs;   // the graph reads these: each step's are copied in
  std::vector<at::Tensor> outputs;  // and writes these
  at::cuda::CUDAGraph graph;
};

namespace {

// Copies in memory of their own: the graph's inputs.
std::vector<at::Tensor> Clones(std::span<const at::Tensor> tensors) {
  std::vector<at::Tensor> clones;
  clones.reserve(tensors.size());
  for (const at::Tensor& tensor : tensors) clones.push_back(tensor.clone());
  return clones;
}

// Records step(graph.inputs) into graph.graph, filling graph.outputs. A capture cannot run on the
// default stream: it runs on one of the pool's, after the caller's stream's work so far (the
// inputs' copies), and the caller's stream then waits for it.
void Capture(const StepGraphs::Step& step, auto& graph) {
  const c10::cuda::CUDAGuard on_device(graph.inputs.front().device());
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream();
  const c10::cuda::CUDAStream capturing = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAEvent inputs_copied;
  inputs_copied.record(caller);
  inputs_copied.block(capturing);
  {
    const c10::cuda::CUDAStreamGuard on_stream(capturing);
    // Thread-local: other threads' CUDA calls (a service's copies) stay legal meanwhile.
    graph.graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    try {
      graph.outputs = step(graph.inputs);
    } catch (const std::exception& error) {
      try {
        graph.graph.capture_end();  // ends the stream's capture; the graph is discarded
      } catch (const std::exception&) {
      }
      TORCH_CHECK(false, "capturing a step as a CUDA graph: ", error.what());
    }
    graph.graph.capture_end();
  }
  c10::cuda::CUDAEvent captured;
  captured.record(capturing);
  captured.block(caller);
}

}  // namespace

#else

struct StepGraphs::Graph {};

#endif

StepGraphs::StepGraphs() = default;
StepGraphs::~StepGraphs() = default;

std::vector<at::Tensor> StepGraphs::Run(std::span<const uint64_t> caches,
                                        std::span<const int64_t> settings,
                                        std::span<const at::Tensor> inputs, const Step& step) {
#ifdef SPECD_CUDA_GRAPHS
  if (inputs.empty() || !inputs.front().is_cuda()) return step(inputs);
  Work work{.caches = {caches.begin(), caches.end()},
            .settings_and_shapes = {settings.begin(), settings.end()}};
  for (const at::Tensor& input : inputs) {
    work.settings_and_shapes.push_back(input.dim());
    for (const int64_t size : input.sizes()) work.settings_and_shapes.push_back(size);
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<Graph>& graph = graphs_[caches.size()];
  if (graph == nullptr || graph->work != work) {
    Work& uncaptured = uncaptured_[caches.size()];
    if (uncaptured != work) {  // the work's first step
      uncaptured = std::move(work);
      return step(inputs);
    }
    graph.reset();  // the old graph's memory goes back before the new one takes its own
    auto captured = std::make_unique<Graph>();
    captured->work = std::move(work);
    captured->inputs = Clones(inputs);
    Capture(step, *captured);
    graph = std::move(captured);
  }
  for (size_t i = 0; i < inputs.size(); ++i) graph->inputs[i].copy_(inputs[i]);
  graph->graph.replay();
  return graph->outputs;
#else
  (void)caches;
  (void)settings;
  return step(inputs);
#endif
}

}  // namespace specd::model
