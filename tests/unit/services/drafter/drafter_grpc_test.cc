// The drafter behind a real gRPC server on loopback, called through GrpcDrafterClient: the wire
// changes neither the proposals of the handler it serves nor the codes of its errors.
#include "services/drafter/drafter_grpc.h"

#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/rpc/grpc_server.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "services/drafter/drafter_handler.h"
#include "services/verifier/verifier_handler.h"
#include "tests/unit/common/engine/engine_fixture.h"
#include "tests/unit/services/drafter/drafter_fixture.h"
#include "tests/unit/services/verifier/verifier_fixture.h"

namespace specd::drafter {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::DraftRequestFor;
using verifier::testing::Ids;
using verifier::testing::PrefillRequestFor;
using verifier::testing::VerifyRequestFor;

TEST(DrafterGrpc, AClientOverLoopbackGetsTheHandlersProposalsAndErrorCodes) {
  std::unique_ptr<model::Qwen35Model> target = engine::testing::LoadTarget("qwen35-tiny-a");
  ASSERT_NE(target, nullptr);
  verifier::VerifierOptions verifier_options;
  verifier_options.tapped_layer_ids = {0, 2};
  verifier_options.max_block_size = 8;
  std::unique_ptr<verifier::VerifierHandler> verifier =
      verifier::testing::MakeVerifier(*target, verifier_options);
  DrafterOptions options;
  options.model_name = "dflash-tiny-a";
  options.quantization = "dense";
  std::unique_ptr<DrafterHandler> handler = testing::MakeDrafter(*target, options);
  ASSERT_TRUE(verifier != nullptr && handler != nullptr);

  DrafterGrpcService service(*handler);
  prometheus::Registry registry;
  absl::StatusOr<rpc::GrpcServer> server =
      rpc::StartGrpcServer("127.0.0.1:0", {&service}, {}, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  GrpcDrafterClient client(rpc::Connect("127.0.0.1:" + std::to_string(server->port)),
                           absl::Seconds(30));

  absl::StatusOr<v1::DrafterServiceInfoResponse> info = client.Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*info, *handler->Info()));

  // One verifier session; the drafter drafts for it over the wire and in process.
  const std::vector<int64_t> prompt =
      engine::testing::RandomPrompt(6, 18, target->config().vocab_size);
  absl::StatusOr<v1::PrefillResponse> prefill = verifier->Prefill(PrefillRequestFor("v", prompt));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  v1::DraftRequest request = DraftRequestFor("wire", prefill->context(), prefill->next_token_id());
  request.set_return_confidence(true);
  absl::StatusOr<v1::DraftResponse> wire = client.Draft(request);
  request.set_session_id("local");
  absl::StatusOr<v1::DraftResponse> local = handler->Draft(request);
  ASSERT_TRUE(wire.ok()) << wire.status();
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(Ids(wire->draft_token_ids()), Ids(local->draft_token_ids()));
  EXPECT_EQ(std::vector<float>(wire->confidence().begin(), wire->confidence().end()),
            std::vector<float>(local->confidence().begin(), local->confidence().end()));
  EXPECT_EQ(wire->context_length(), local->context_length());

  // After a Verify, the Prefill's handle is older than the one the wire session has seen.
  absl::StatusOr<v1::VerifyResponse> verify =
      verifier->Verify(VerifyRequestFor("v", 1, Ids(wire->draft_token_ids())));
  ASSERT_TRUE(verify.ok()) << verify.status();
  ASSERT_TRUE(
      client.Draft(DraftRequestFor("wire", verify->context(), verify->next_token_id())).ok());
  const absl::Status stale =
      client.Draft(DraftRequestFor("wire", prefill->context(), prefill->next_token_id())).status();
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  request.set_session_id("wire");
  request.set_block_size(9);
  EXPECT_EQ(client.Draft(request).status().code(), absl::StatusCode::kInvalidArgument);

  v1::DrafterServiceReleaseRequest release;
  release.set_session_id("wire");
  absl::StatusOr<v1::DrafterServiceReleaseResponse> released = client.Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->released());
  released = client.Release(release);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->released());
  server->server->Shutdown();
}

}  // namespace
}  // namespace specd::drafter
