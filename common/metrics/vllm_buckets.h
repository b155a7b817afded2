#pragma once
// Histogram bucket boundaries identical to vLLM's, so specd's latency histograms can be compared
// with a vLLM deployment's on the same Grafana panels.
#include <vector>

namespace specd::metrics {

std::vector<double> TimeToFirstTokenBuckets();   // vllm:time_to_first_token_seconds
std::vector<double> InterTokenLatencyBuckets();  // vllm:inter_token_latency_seconds
std::vector<double> RequestLatencyBuckets();     // vllm:e2e_request_latency_seconds

}  // namespace specd::metrics
