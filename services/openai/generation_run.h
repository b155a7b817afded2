#pragma once
// One request of the GenerationHandler on a thread of its own, its stream messages queued for an
// HTTP writer. HTTP commits to a status code with its first byte, so the writer waits for the
// request to start — its first message, or an error (a bad parameter, a full queue) that then
// becomes the status — and a writer that finds its client gone cancels the request, which stops
// at its next step.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/orchestrator/generation_handler.h"
#include "specd/v1/generation.pb.h"

namespace specd::openai {

class GenerationRun {
 public:
  // Starts `request`; `handler` must outlive the run.
  GenerationRun(orchestrator::GenerationHandler& handler, v1::GenerateStreamRequest request);
  // Cancels the request if it still runs, and waits for it to end.
  ~GenerationRun();

  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  enum class Next { kMessage, kTimeout, kEnded };
  // The next message into `message`; kTimeout when none came within `timeout`; kEnded once every
  // message has been taken and the request has ended (then status()).
  Next Take(absl::Duration timeout, v1::GenerateStreamResponse& message);
  // Waits until a message is ready or the request has ended; true for a message.
  bool Started();
  // How the request ended; OK until it has.
  absl::Status status();
  // The request's id (the client's, or the one the handler gave it) once Started().
  std::string request_id();

  void Cancel();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<v1::GenerateStreamResponse> messages_;
  bool ended_ = false;
  bool cancelled_ = false;
  absl::Status status_;
  std::string request_id_;
  std::thread thread_;
};

}  // namespace specd::openai
