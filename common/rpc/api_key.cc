#include "common/rpc/api_key.h"

namespace specd::rpc {

bool ApiKey::Admits(std::string_view authorization) const {
  if (key_.empty()) return true;
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() != kScheme.size() + key_.size() ||
      authorization.substr(0, kScheme.size()) != kScheme) {
    return false;
  }
  unsigned char difference = 0;
  for (size_t i = 0; i < key_.size(); ++i) {
    difference |= static_cast<unsigned char>(authorization[kScheme.size() + i] ^ key_[i]);
  }
  return difference == 0;
}

grpc::Status ApiKey::Check(const grpc::ServerContext& context) const {
  if (key_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find("authorization");
  if (found != metadata.end() &&
      Admits(std::string_view(found->second.data(), found->second.size()))) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "a valid API key is required: send it as `authorization: Bearer <key>` "
                      "metadata");
}

}  // namespace specd::rpc
