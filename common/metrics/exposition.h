#pragma once
// What a scrape of /metrics returns: the Prometheus text exposition (format 0.0.4) of a registry
// or any other prometheus-cpp collectable, written by prometheus-cpp's TextSerializer.
#include <prometheus/collectable.h>

#include <string>

namespace specd::metrics {

// The Content-Type of Prometheus text format 0.0.4.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// Collects `metrics` now and writes their samples as text.
std::string Exposition(const prometheus::Collectable& metrics);

}  // namespace specd::metrics
