#include "services/openai/generation_run.h"

#include <utility>

namespace specd::openai {

GenerationRun::GenerationRun(orchestrator::GenerationHandler& handler,
                             v1::GenerateStreamRequest request) {
  thread_ = std::thread([this, &handler, request = std::move(request)] {
    absl::Status status = handler.GenerateStream(
        request,
        [this] {
          std::lock_guard lock(mutex_);
          return cancelled_;
        },
        [this](const v1::GenerateStreamResponse& message) {
          std::lock_guard lock(mutex_);
          if (cancelled_) return false;
          if (request_id_.empty()) request_id_ = message.request_id();
          messages_.push_back(message);
          changed_.notify_all();
          return true;
        });
    std::lock_guard lock(mutex_);
    ended_ = true;
    status_ = std::move(status);
    changed_.notify_all();
  });
}

GenerationRun::~GenerationRun() {
  Cancel();
  thread_.join();
}

GenerationRun::Next GenerationRun::Take(absl::Duration timeout,
                                        v1::GenerateStreamResponse& message) {
  std::unique_lock lock(mutex_);
  const bool ready = changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                                       [this] { return !messages_.empty() || ended_; });
  if (!ready) return Next::kTimeout;
  if (messages_.empty()) return Next::kEnded;
  message = std::move(messages_.front());
  messages_.pop_front();
  return Next::kMessage;
}

bool GenerationRun::Started() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !messages_.empty() || ended_; });
  return !messages_.empty();
}

absl::Status GenerationRun::status() {
  std::lock_guard lock(mutex_);
  return status_;
}

std::string GenerationRun::request_id() {
  std::lock_guard lock(mutex_);
  return request_id_;
}

void GenerationRun::Cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

}  // namespace specd::openai
