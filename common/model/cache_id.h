#pragma once
// What names a cache's memory: a CUDA graph that reads or writes a cache is kept by it
// (step_graphs.h). Caches never reallocate, so one id stays the same memory for the cache's life.
#include <cstdint>

namespace specd::model {

// A number no cache made before in this process has.
uint64_t NewCacheId();

}  // namespace specd::model
