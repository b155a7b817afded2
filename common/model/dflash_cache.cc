#include "common/model/dflash_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/cache_id.h"

namespace specd::model {

DFlashCache::DFlashCache(std::vector<KvCache> layers, int64_t max_length)
    : layers_(std::move(layers)), id_(NewCacheId()), max_length_(max_length) {}

absl::Status DFlashCache::Truncate(int64_t length) {
  if (length < 0 || length > length_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot truncate a drafter context of ", length_, " positions to ", length));
  }
  length_ = length;
  return absl::OkStatus();
}

int64_t DFlashCache::bytes() const {
  int64_t total = 0;
  for (const KvCache& layer : layers_) total += layer.bytes();
  return total;
}

}  // namespace specd::model
