#pragma once
// Misuse of the metrics API (a bad name, wrong label arity, a negative counter increment) is a
// bug in the caller, found the first time the code runs; it aborts with a message that says what.
#include <string>

namespace specd::metrics {

// Prints "specd::metrics: <message>" to stderr and aborts.
[[noreturn]] void AbortOnProgrammingError(const std::string& message);

}  // namespace specd::metrics
