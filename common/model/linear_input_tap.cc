#include "common/model/linear_input_tap.h"

#include <utility>

namespace specd::model {
namespace {

thread_local LinearInputTap* innermost_tap = nullptr;

}  // namespace

LinearInputTap::LinearInputTap(Observer observer)
    : observer_(std::move(observer)), outer_(innermost_tap) {
  innermost_tap = this;
}

LinearInputTap::~LinearInputTap() { innermost_tap = outer_; }

void LinearInputTap::Observe(const std::string& module, const at::Tensor& input) {
  if (innermost_tap != nullptr) innermost_tap->observer_(module, input);
}

}  // namespace specd::model
