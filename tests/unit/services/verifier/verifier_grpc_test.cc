// The verifier behind a real gRPC server on loopback, called through GrpcVerifierClient: the
// wire changes neither the results of the handler it serves nor the codes of its errors.
#include "services/verifier/verifier_grpc.h"

#include <ATen/ATen.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/rpc/grpc_server.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "services/verifier/verifier_handler.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/services/verifier/verifier_fixture.h"

namespace specd::verifier {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::Ids;
using testing::PrefillRequestFor;
using testing::ReadRows;
using testing::VerifyRequestFor;

TEST(VerifierGrpc, AClientOverLoopbackGetsTheHandlersResultsAndErrorCodes) {
  std::unique_ptr<model::Qwen35Model> target = engine::testing::LoadTarget("qwen35-tiny-a");
  ASSERT_NE(target, nullptr);
  VerifierOptions options;
  options.model_name = "qwen35-tiny-a";
  options.quantization = "dense";
  options.tapped_layer_ids = {0, 2};
  options.max_block_size = 8;
  std::unique_ptr<VerifierHandler> handler = testing::MakeVerifier(*target, options);
  ASSERT_NE(handler, nullptr);

  VerifierGrpcService service(*handler);
  prometheus::Registry registry;
  absl::StatusOr<rpc::GrpcServer> server =
      rpc::StartGrpcServer("127.0.0.1:0", {&service}, {}, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  GrpcVerifierClient client(rpc::Connect("127.0.0.1:" + std::to_string(server->port)),
                            absl::Seconds(30));

  absl::StatusOr<v1::TargetVerifierServiceInfoResponse> info = client.Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*info, *handler->Info()));

  // The same request over the wire and in process, on two sessions of the same handler.
  const int64_t vocab = target->config().vocab_size;
  const std::vector<int64_t> prompt = engine::testing::RandomPrompt(5, 13, vocab);
  const std::vector<int64_t> expected =
      engine::testing::TargetOnly(*target, engine::testing::Request(prompt, 12)).ids;
  absl::StatusOr<v1::PrefillResponse> wire = client.Prefill(PrefillRequestFor("wire", prompt));
  absl::StatusOr<v1::PrefillResponse> local = handler->Prefill(PrefillRequestFor("local", prompt));
  ASSERT_TRUE(wire.ok()) << wire.status();
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(wire->next_token_id(), local->next_token_id());
  EXPECT_EQ(wire->generation(), local->generation());
  EXPECT_EQ(wire->context().token_range().end(), local->context().token_range().end());
  EXPECT_TRUE(at::equal(ReadRows(wire->context(), 0, 13), ReadRows(local->context(), 0, 13)));

  const std::vector<int64_t> drafts = {expected[1], expected[2], (expected[3] + 1) % vocab};
  absl::StatusOr<v1::VerifyResponse> wire_step =
      client.Verify(VerifyRequestFor("wire", wire->generation(), drafts));
  absl::StatusOr<v1::VerifyResponse> local_step =
      handler->Verify(VerifyRequestFor("local", local->generation(), drafts));
  ASSERT_TRUE(wire_step.ok()) << wire_step.status();
  ASSERT_TRUE(local_step.ok()) << local_step.status();
  EXPECT_EQ(Ids(wire_step->accepted_token_ids()), Ids(local_step->accepted_token_ids()));
  EXPECT_EQ(wire_step->next_token_id(), local_step->next_token_id());
  EXPECT_EQ(wire_step->next_token_id(), expected[3]);
  EXPECT_EQ(wire_step->generation(), local_step->generation());
  EXPECT_TRUE(MessageDifferencer::Equals(wire_step->context().token_range(),
                                         local_step->context().token_range()));

  const absl::Status unknown = client.Verify(VerifyRequestFor("nobody", 1, {})).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("nobody"), std::string::npos) << unknown;
  EXPECT_EQ(client.Verify(VerifyRequestFor("wire", wire->generation(), {})).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(client.Prefill(PrefillRequestFor("wire", prompt)).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(client.Prefill(PrefillRequestFor("empty", {})).status().code(),
            absl::StatusCode::kInvalidArgument);

  v1::TargetVerifierServiceReleaseRequest release;
  release.set_session_id("wire");
  absl::StatusOr<v1::TargetVerifierServiceReleaseResponse> released = client.Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->released());
  released = client.Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->released());
  server->server->Shutdown();
}

}  // namespace
}  // namespace specd::verifier
