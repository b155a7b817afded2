#include "common/model/cache_id.h"

#include <atomic>

namespace specd::model {

uint64_t NewCacheId() {
  static std::atomic<uint64_t> made{0};
  return ++made;
}

}  // namespace specd::model
