// specctl generate (PROMPT | --ids 1,2,3) [--stream] [--max-new-tokens N] [--temperature T]
//                  [--seed S] [--ignore-eos] [--json]
// One request to the GenerationService. Text goes to stdout as it arrives (with --stream) or at
// the end; --json prints {"ids": [...], "text": ...} instead.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/specctl/commands.h"
#include "nlohmann/json.hpp"
#include "specd/v1/generation.grpc.pb.h"

namespace specd::specctl {
namespace {

struct GenerateFlags {
  std::string prompt;
  std::vector<uint32_t> ids;
  bool stream = false;
  std::optional<uint32_t> max_new_tokens;
  std::optional<float> temperature;
  std::optional<uint64_t> seed;
  bool ignore_eos = false;
  std::optional<uint32_t> block_size;
  bool json = false;
};

v1::GenerateRequest Request(const GenerateFlags& flags) {
  v1::GenerateRequest request;
  if (flags.ids.empty()) {
    request.mutable_prompt()->set_text(flags.prompt);
  } else {
    request.mutable_prompt()->mutable_token_ids()->mutable_ids()->Assign(flags.ids.begin(),
                                                                         flags.ids.end());
  }
  v1::SamplingParams& sampling = *request.mutable_sampling();
  if (flags.max_new_tokens.has_value()) sampling.set_max_new_tokens(*flags.max_new_tokens);
  if (flags.temperature.has_value()) sampling.set_temperature(*flags.temperature);
  if (flags.seed.has_value()) sampling.set_seed(*flags.seed);
  if (flags.ignore_eos) sampling.set_ignore_eos(true);
  if (flags.block_size.has_value())
    request.mutable_speculation()->set_block_size(*flags.block_size);
  return request;
}

void PrintResult(const GenerateFlags& flags, const std::vector<uint32_t>& ids,
                 const std::string& text, bool text_already_printed) {
  if (flags.json) {
    std::cout << nlohmann::json{{"ids", ids}, {"text", text}}.dump() << std::endl;
    return;
  }
  if (!text_already_printed) std::cout << text;
  if (text.empty()) {
    // A server without a tokenizer answers with ids only.
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i == 0 ? "" : " ") << ids[i];
  }
  std::cout << std::endl;
}

void Generate(const GenerateFlags& flags, const ClientOptions& options) {
  if (flags.prompt.empty() == flags.ids.empty()) {
    ExitOnError(absl::InvalidArgumentError("give a PROMPT or --ids, not both"));
  }
  auto stub = v1::GenerationService::NewStub(Connect(options));
  const v1::GenerateRequest request = Request(flags);
  grpc::ClientContext context;
  ConfigureCall(context, options, flags.stream);
  if (!flags.stream) {
    v1::GenerateResponse response;
    ExitOnError(stub->Generate(&context, request, &response));
    PrintResult(flags, {response.token_ids().begin(), response.token_ids().end()}, response.text(),
                false);
    return;
  }
  // Same fields, same numbers: the unary request is the stream's.
  v1::GenerateStreamRequest stream_request;
  stream_request.ParseFromString(request.SerializeAsString());
  auto reader = stub->GenerateStream(&context, stream_request);
  std::vector<uint32_t> ids;
  std::string text;
  v1::GenerateStreamResponse message;
  while (reader->Read(&message)) {
    ids.insert(ids.end(), message.token_ids().begin(), message.token_ids().end());
    text += message.text();
    if (!flags.json) std::cout << message.text() << std::flush;
  }
  ExitOnError(reader->Finish());
  PrintResult(flags, ids, text, true);
}

}  // namespace

void AddGenerateCommand(CLI::App& app, const ClientOptions& options) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* generate = app.add_subcommand("generate", "generate a completion");
  generate->add_option("prompt", flags->prompt, "the prompt text");
  generate->add_option("--ids", flags->ids, "the prompt as token ids, e.g. 1,2,3")->delimiter(',');
  generate->add_flag("--stream", flags->stream, "print the text as it is generated");
  generate->add_option("--max-new-tokens", flags->max_new_tokens, "most tokens to generate");
  generate->add_option("--temperature", flags->temperature, "0: greedy (server default: 1)");
  generate->add_option("--seed", flags->seed, "seed of the request's random stream");
  generate->add_flag("--ignore-eos", flags->ignore_eos, "keep going past end-of-sequence");
  generate->add_option("--block-size", flags->block_size,
                       "draft blocks of this size every step, anchor included (1: target-only; "
                       "default: the server's speculation guard chooses)");
  generate->add_flag("--json", flags->json, R"(print {"ids": [...], "text": ...})");
  generate->callback([flags, &options] { Generate(*flags, options); });
}

}  // namespace specd::specctl
