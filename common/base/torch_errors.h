#pragma once
// LibTorch reports failures by throwing c10::Error; library boundaries return statuses. Every
// boundary that runs LibTorch wraps its body in CatchTorchErrors.
#include <c10/util/Exception.h>

#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace specd::base {
namespace internal {

// A body's result as a status: Status and StatusOr<T> as they are, any other T as StatusOr<T>.
template <typename T>
struct AsStatus {
  using type = absl::StatusOr<T>;
};
template <>
struct AsStatus<absl::Status> {
  using type = absl::Status;
};
template <typename T>
struct AsStatus<absl::StatusOr<T>> {
  using type = absl::StatusOr<T>;
};

}  // namespace internal

// body(), or INTERNAL "what: LibTorch's message" when it throws.
template <typename Body>
auto CatchTorchErrors(const char* what, Body&& body) ->
    typename internal::AsStatus<std::invoke_result_t<Body>>::type {
  try {
    return body();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
  }
}

}  // namespace specd::base
