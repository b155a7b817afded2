// Properties of the specd.v1 contract that the services rely on, checked through the generated
// code and its descriptors: which RPCs each service has, explicit presence of sampling fields,
// lossless round trips of tensor handles, and the naming rules the handlers depend on.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "specd/v1/drafter.grpc.pb.h"
#include "specd/v1/generation.grpc.pb.h"
#include "specd/v1/trainer.grpc.pb.h"
#include "specd/v1/types.pb.h"
#include "specd/v1/verifier.grpc.pb.h"

namespace specd::v1 {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::ServiceDescriptor;
using google::protobuf::util::MessageDifferencer;

// Every file of the contract. Taking a message's descriptor also makes sure the linker keeps that
// file's generated object (and so its descriptors in the generated pool).
std::vector<const FileDescriptor*> ContractFiles() {
  return {SamplingParams::descriptor()->file(), GenerateRequest::descriptor()->file(),
          PrefillRequest::descriptor()->file(), DraftRequest::descriptor()->file(),
          SubmitJobRequest::descriptor()->file()};
}

struct Rpc {
  std::string name;
  std::string request;
  std::string response;
  bool server_streaming;
};

// Looks a service up by the name the generated stub reports, and checks that its RPCs are exactly
// `expected` (names, message types, streaming).
void ExpectService(const std::string& full_name, const std::vector<Rpc>& expected) {
  ContractFiles();
  const ServiceDescriptor* service = DescriptorPool::generated_pool()->FindServiceByName(full_name);
  ASSERT_NE(service, nullptr) << full_name << " is not in the generated pool";
  EXPECT_EQ(service->file()->package(), "specd.v1");
  std::set<std::string> names;
  for (int i = 0; i < service->method_count(); ++i) names.insert(service->method(i)->name());
  std::set<std::string> expected_names;
  for (const Rpc& rpc : expected) expected_names.insert(rpc.name);
  EXPECT_EQ(names, expected_names) << full_name;
  for (const Rpc& rpc : expected) {
    const auto* method = service->FindMethodByName(rpc.name);
    ASSERT_NE(method, nullptr) << full_name << "." << rpc.name;
    EXPECT_EQ(method->input_type()->full_name(), "specd.v1." + rpc.request) << rpc.name;
    EXPECT_EQ(method->output_type()->full_name(), "specd.v1." + rpc.response) << rpc.name;
    EXPECT_FALSE(method->client_streaming()) << rpc.name;
    EXPECT_EQ(method->server_streaming(), rpc.server_streaming) << rpc.name;
  }
}

TEST(ContractServicesTest, GenerationServiceHasTheDesignedRpcs) {
  EXPECT_STREQ(GenerationService::service_full_name(), "specd.v1.GenerationService");
  ExpectService(GenerationService::service_full_name(),
                {{"Generate", "GenerateRequest", "GenerateResponse", false},
                 {"GenerateStream", "GenerateStreamRequest", "GenerateStreamResponse", true},
                 {"Abort", "AbortRequest", "AbortResponse", false},
                 {"GetModelInfo", "GetModelInfoRequest", "GetModelInfoResponse", false}});
}

TEST(ContractServicesTest, TargetVerifierServiceHasTheDesignedRpcs) {
  ExpectService(
      TargetVerifierService::service_full_name(),
      {{"Prefill", "PrefillRequest", "PrefillResponse", false},
       {"Verify", "VerifyRequest", "VerifyResponse", false},
       {"Release", "TargetVerifierServiceReleaseRequest", "TargetVerifierServiceReleaseResponse",
        false},
       {"Info", "TargetVerifierServiceInfoRequest", "TargetVerifierServiceInfoResponse", false}});
}

TEST(ContractServicesTest, DrafterServiceHasTheDesignedRpcs) {
  ExpectService(
      DrafterService::service_full_name(),
      {{"Draft", "DraftRequest", "DraftResponse", false},
       {"Release", "DrafterServiceReleaseRequest", "DrafterServiceReleaseResponse", false},
       {"Info", "DrafterServiceInfoRequest", "DrafterServiceInfoResponse", false}});
}

TEST(ContractServicesTest, TrainerServiceHasTheDesignedRpcs) {
  ExpectService(TrainerService::service_full_name(),
                {{"SubmitJob", "SubmitJobRequest", "SubmitJobResponse", false},
                 {"GetJob", "GetJobRequest", "GetJobResponse", false},
                 {"ListJobs", "ListJobsRequest", "ListJobsResponse", false},
                 {"CancelJob", "CancelJobRequest", "CancelJobResponse", false},
                 {"StreamLogs", "StreamLogsRequest", "StreamLogsResponse", true}});
}

// The default of a sampling field is the server's, so "unset" must survive the wire as
// something different from an explicit zero (temperature 0 = greedy, top_k 0 = off, seed 0).
TEST(ContractSamplingParamsTest, EverySingularFieldTracksPresence) {
  for (const Descriptor* d : {SamplingParams::descriptor(), SpeculationParams::descriptor()}) {
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      if (f->is_repeated()) continue;
      EXPECT_TRUE(f->has_presence()) << d->name() << "." << f->name() << " must be `optional`";
    }
  }
}

TEST(ContractSamplingParamsTest, ExplicitZeroSurvivesTheWireAndUnsetStaysUnset) {
  SamplingParams params;
  params.set_temperature(0.0f);
  params.set_top_k(0);
  params.set_seed(0);
  params.set_ignore_eos(false);
  params.add_stop("\n\n");
  params.add_stop_token_ids(248046);

  SamplingParams parsed;
  ASSERT_TRUE(parsed.ParseFromString(params.SerializeAsString()));
  EXPECT_TRUE(parsed.has_temperature());
  EXPECT_EQ(parsed.temperature(), 0.0f);
  EXPECT_TRUE(parsed.has_top_k());
  EXPECT_TRUE(parsed.has_seed());
  EXPECT_TRUE(parsed.has_ignore_eos());
  EXPECT_FALSE(parsed.has_top_p());
  EXPECT_FALSE(parsed.has_max_new_tokens());
  EXPECT_FALSE(parsed.has_skip_special_tokens());
  ASSERT_EQ(parsed.stop_size(), 1);
  EXPECT_EQ(parsed.stop(0), "\n\n");
  EXPECT_EQ(parsed.stop_token_ids(0), 248046u);

  params.clear_temperature();
  EXPECT_FALSE(params.has_temperature());
  ASSERT_TRUE(parsed.ParseFromString(params.SerializeAsString()));
  EXPECT_FALSE(parsed.has_temperature());
}

TensorHandle CudaContextHandle() {
  TensorHandle handle;
  CudaIpcRegion* region = handle.mutable_cuda_ipc();
  // cudaIpcMemHandle_t / cudaIpcEventHandle_t are 64 opaque bytes: NULs and high bytes included.
  std::string memory(64, '\0'), event(64, '\0');
  for (int i = 0; i < 64; ++i) {
    memory[i] = static_cast<char>(i * 37);
    event[i] = static_cast<char>(255 - i * 3);
  }
  region->set_memory_handle(memory);
  region->set_event_handle(event);
  region->set_device_index(1);
  region->set_device_uuid("GPU-6c3b1a0e-8d5f-4c2b-9e7a-1f0d2c3b4a59");
  region->set_size_bytes(uint64_t{3} << 32);  // beyond 32 bits on purpose
  handle.set_owner_instance_id("verifier-5f0c");
  handle.set_buffer_id(42);
  handle.set_dtype(DTYPE_BFLOAT16);
  for (int64_t dim : {int64_t{262144}, int64_t{5 * 2560}}) handle.add_shape(dim);
  handle.set_byte_offset(uint64_t{1} << 33);
  handle.set_byte_size(uint64_t{262144} * 5 * 2560 * 2);
  handle.mutable_token_range()->set_begin(1000);
  handle.mutable_token_range()->set_end(1007);
  handle.set_generation(uint64_t{1} << 40);
  return handle;
}

TEST(ContractTensorHandleTest, CudaIpcHandleRoundTripsBitForBit) {
  const TensorHandle handle = CudaContextHandle();
  TensorHandle parsed;
  ASSERT_TRUE(parsed.ParseFromString(handle.SerializeAsString()));
  EXPECT_TRUE(MessageDifferencer::Equals(handle, parsed));
  EXPECT_EQ(parsed.memory_case(), TensorHandle::kCudaIpc);
  EXPECT_EQ(parsed.cuda_ipc().memory_handle().size(), 64u);
  EXPECT_EQ(parsed.cuda_ipc().memory_handle(), handle.cuda_ipc().memory_handle());
  EXPECT_EQ(parsed.cuda_ipc().event_handle(), handle.cuda_ipc().event_handle());
  EXPECT_EQ(parsed.byte_offset(), uint64_t{1} << 33);
  EXPECT_EQ(parsed.generation(), uint64_t{1} << 40);
  EXPECT_TRUE(parsed.strides().empty());  // contiguous row-major
}

TEST(ContractTensorHandleTest, ShmHandleAndWeightHandleAreDistinguishable) {
  TensorHandle context;
  context.mutable_posix_shm()->set_name("/specd.1234.7");
  context.mutable_posix_shm()->set_size_bytes(1 << 20);
  context.set_dtype(DTYPE_FLOAT32);
  context.mutable_token_range()->set_begin(0);
  context.mutable_token_range()->set_end(0);  // an empty range is still a range
  context.set_generation(1);

  TensorHandle weight;
  weight.mutable_posix_shm()->set_name("/specd.1234.w0");
  weight.set_dtype(DTYPE_FLOAT32);

  TensorHandle parsed_context, parsed_weight;
  ASSERT_TRUE(parsed_context.ParseFromString(context.SerializeAsString()));
  ASSERT_TRUE(parsed_weight.ParseFromString(weight.SerializeAsString()));
  EXPECT_EQ(parsed_context.memory_case(), TensorHandle::kPosixShm);
  EXPECT_EQ(parsed_context.posix_shm().name(), "/specd.1234.7");
  EXPECT_TRUE(parsed_context.has_token_range());
  EXPECT_FALSE(parsed_weight.has_token_range());
  EXPECT_EQ(parsed_weight.generation(), 0u);

  // Setting the other member of the oneof replaces the first: a handle names one memory.
  context.mutable_cuda_ipc();
  EXPECT_EQ(context.memory_case(), TensorHandle::kCudaIpc);
  EXPECT_FALSE(context.has_posix_shm());
}

TEST(ContractTensorHandleTest, HandlesSurviveInsideServiceMessages) {
  VerifyResponse verify;
  verify.add_accepted_token_ids(11);
  verify.add_accepted_token_ids(12);
  verify.set_next_token_id(13);
  *verify.mutable_context() = CudaContextHandle();

  DraftRequest draft;
  draft.set_session_id("req-1");
  *draft.mutable_context() = verify.context();
  draft.set_anchor_token_id(verify.next_token_id());

  DraftRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(draft.SerializeAsString()));
  EXPECT_TRUE(MessageDifferencer::Equals(parsed.context(), CudaContextHandle()));
  EXPECT_FALSE(parsed.has_window());  // unset window: the drafter's default, distinct from 0
  parsed.set_window(0);
  EXPECT_TRUE(parsed.has_window());
}

// Handlers serve Generate and GenerateStream with one code path; that needs both requests to
// carry the same fields under the same numbers and types.
TEST(ContractGenerationTest, UnaryAndStreamingRequestsHaveTheSameFields) {
  const Descriptor* unary = GenerateRequest::descriptor();
  const Descriptor* stream = GenerateStreamRequest::descriptor();
  ASSERT_EQ(unary->field_count(), stream->field_count());
  for (int i = 0; i < unary->field_count(); ++i) {
    const FieldDescriptor* a = unary->field(i);
    const FieldDescriptor* b = stream->FindFieldByName(a->name());
    ASSERT_NE(b, nullptr) << a->name();
    EXPECT_EQ(a->number(), b->number()) << a->name();
    EXPECT_EQ(a->type(), b->type()) << a->name();
    EXPECT_EQ(a->is_repeated(), b->is_repeated()) << a->name();
    EXPECT_EQ(a->message_type(), b->message_type()) << a->name();
  }
  // The same holds for the responses, so a unary response is the concatenation of a stream.
  const Descriptor* whole = GenerateResponse::descriptor();
  const Descriptor* chunk = GenerateStreamResponse::descriptor();
  ASSERT_EQ(whole->field_count(), chunk->field_count());
  for (int i = 0; i < whole->field_count(); ++i) {
    const FieldDescriptor* b = chunk->FindFieldByNumber(whole->field(i)->number());
    ASSERT_NE(b, nullptr) << whole->field(i)->name();
    EXPECT_EQ(whole->field(i)->name(), b->name());
    EXPECT_EQ(whole->field(i)->type(), b->type()) << b->name();
  }
}

TEST(ContractGenerationTest, PromptIsExactlyOneOfTextChatOrTokenIds) {
  GenerateRequest request;
  request.mutable_prompt()->set_text("hello");
  EXPECT_EQ(request.prompt().kind_case(), Prompt::kText);
  request.mutable_prompt()->mutable_token_ids()->add_ids(1);
  EXPECT_EQ(request.prompt().kind_case(), Prompt::kTokenIds);
  EXPECT_FALSE(request.prompt().has_chat());
  ChatMessage* turn = request.mutable_prompt()->mutable_chat()->add_messages();
  turn->set_role("user");
  turn->set_content("hi");
  request.mutable_prompt()->mutable_chat()->set_enable_thinking(false);
  EXPECT_EQ(request.prompt().kind_case(), Prompt::kChat);
  EXPECT_TRUE(request.prompt().chat().has_enable_thinking());
}

// proto3 zero values must mean "not set" so that a field a sender forgot never reads as a real
// state (a job that is QUEUED, a finish reason of STOP).
TEST(ContractEnumsTest, EveryEnumStartsWithUnspecifiedAndPrefixesItsValues) {
  int enums = 0;
  for (const FileDescriptor* file : ContractFiles()) {
    std::vector<const EnumDescriptor*> all;
    for (int i = 0; i < file->enum_type_count(); ++i) all.push_back(file->enum_type(i));
    for (int m = 0; m < file->message_type_count(); ++m) {
      for (int i = 0; i < file->message_type(m)->enum_type_count(); ++i) {
        all.push_back(file->message_type(m)->enum_type(i));
      }
    }
    for (const EnumDescriptor* e : all) {
      ++enums;
      ASSERT_GT(e->value_count(), 1) << e->full_name();
      const std::string zero = e->FindValueByNumber(0)->name();
      EXPECT_TRUE(zero.ends_with("_UNSPECIFIED")) << e->full_name() << ": " << zero;
      const std::string prefix = zero.substr(0, zero.size() - std::string("UNSPECIFIED").size());
      for (int i = 0; i < e->value_count(); ++i) {
        EXPECT_TRUE(e->value(i)->name().starts_with(prefix)) << e->value(i)->name();
      }
    }
  }
  EXPECT_GE(enums, 6);  // Dtype, MemoryKind, FinishReason, InputLengthRegime, JobType, JobState
}

TEST(ContractEnumsTest, FinishReasonsAndRegimesAreTheDesignedOnes) {
  EXPECT_EQ(FinishReason_Name(FINISH_REASON_STOP), "FINISH_REASON_STOP");
  EXPECT_EQ(FinishReason_Name(FINISH_REASON_LENGTH), "FINISH_REASON_LENGTH");
  EXPECT_EQ(FinishReason_Name(FINISH_REASON_ABORT), "FINISH_REASON_ABORT");
  EXPECT_EQ(FinishReason_descriptor()->value_count(), 4);
  EXPECT_EQ(InputLengthRegime_descriptor()->value_count(), 4);
  for (auto regime :
       {INPUT_LENGTH_REGIME_SHORT, INPUT_LENGTH_REGIME_MEDIUM, INPUT_LENGTH_REGIME_LONG}) {
    EXPECT_TRUE(InputLengthRegime_IsValid(regime));
  }
}

TEST(ContractTrainerTest, JobTypesCoverEveryTrainingStageAndStatesTheLifeCycle) {
  std::set<std::string> types;
  for (int i = 0; i < JobType_descriptor()->value_count(); ++i) {
    types.insert(JobType_descriptor()->value(i)->name());
  }
  for (const char* stage : {"PRETRAIN", "QUANTIZE", "QAD", "REGENERATE", "PACK", "DRAFTER_STAGE1",
                            "DRAFTER_STAGE2", "GPTQ_DRAFTER", "PIPELINE"}) {
    EXPECT_TRUE(types.contains(std::string("JOB_TYPE_") + stage)) << stage;
  }
  std::set<std::string> states;
  for (int i = 0; i < JobState_descriptor()->value_count(); ++i) {
    states.insert(JobState_descriptor()->value(i)->name());
  }
  EXPECT_EQ(states,
            (std::set<std::string>{"JOB_STATE_UNSPECIFIED", "JOB_STATE_QUEUED", "JOB_STATE_RUNNING",
                                   "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED",
                                   "JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED"}));
}

TEST(ContractTrainerTest, SubmissionIdAndProgressRoundTrip) {
  SubmitJobRequest submit;
  submit.set_submission_id("smoke-2026-11-29.1");
  submit.set_type(JOB_TYPE_PIPELINE);
  submit.set_config_yaml("preset: smoke\n");
  (*submit.mutable_labels())["owner"] = "ci";

  Job job;
  job.set_job_id("job-1");
  job.set_submission_id(submit.submission_id());
  job.set_state(JOB_STATE_RUNNING);
  job.mutable_progress()->set_step(10);
  job.mutable_progress()->set_stage(JOB_TYPE_QAD);
  job.mutable_create_time()->set_seconds(1'800'000'000);
  Job parsed;
  ASSERT_TRUE(parsed.ParseFromString(job.SerializeAsString()));
  EXPECT_TRUE(MessageDifferencer::Equals(job, parsed));
  EXPECT_FALSE(parsed.progress().has_loss());  // no loss reported yet, not a loss of 0
  EXPECT_FALSE(parsed.has_exit_code());        // still running
  EXPECT_FALSE(parsed.has_start_time());

  StreamLogsRequest logs;
  logs.set_job_id("job-1");
  logs.set_follow(true);
  EXPECT_EQ(logs.start_case(), StreamLogsRequest::START_NOT_SET);  // from the first line
  logs.set_tail_lines(0);
  EXPECT_EQ(logs.start_case(), StreamLogsRequest::kTailLines);  // only new lines
}

// The drafter consumes exactly what the verifier writes: the two Info messages must describe the
// taps and sizes with the same types so the orchestrator can compare them field by field.
TEST(ContractInternalTest, VerifierAndDrafterDescribeTapsAlike) {
  const FieldDescriptor* taps =
      TargetVerifierServiceInfoResponse::descriptor()->FindFieldByName("tapped_layer_ids");
  const FieldDescriptor* wants =
      DrafterServiceInfoResponse::descriptor()->FindFieldByName("target_layer_ids");
  ASSERT_NE(taps, nullptr);
  ASSERT_NE(wants, nullptr);
  EXPECT_EQ(taps->type(), wants->type());
  EXPECT_TRUE(taps->is_repeated());
  EXPECT_TRUE(wants->is_repeated());
  for (const char* field : {"hidden_size", "vocab_size", "instance_id", "session_idle_timeout"}) {
    const FieldDescriptor* a =
        TargetVerifierServiceInfoResponse::descriptor()->FindFieldByName(field);
    const FieldDescriptor* b = DrafterServiceInfoResponse::descriptor()->FindFieldByName(field);
    ASSERT_NE(a, nullptr) << field;
    ASSERT_NE(b, nullptr) << field;
    EXPECT_EQ(a->type(), b->type()) << field;
  }
}

}  // namespace
}  // namespace specd::v1
