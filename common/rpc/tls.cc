#include "common/rpc/tls.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace specd::rpc {
namespace {

absl::StatusOr<std::string> ReadPem(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  if (!file || !(text << file.rdbuf())) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", path.string()));
  }
  return text.str();
}

}  // namespace

absl::Status TlsFiles::Check() const {
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key come together");
  }
  if (!client_ca.empty() && cert.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key to serve");
  }
  if (!server_name.empty() && ca.empty()) {
    return absl::InvalidArgumentError("--tls-server-name needs --tls-ca");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsOf(const TlsFiles& tls) {
  if (absl::Status checked = tls.Check(); !checked.ok()) return checked;
  if (!tls.serves()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadPem(tls.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(tls.key);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({.private_key = *key, .cert_chain = *cert});
  if (!tls.client_ca.empty()) {
    absl::StatusOr<std::string> roots = ReadPem(tls.client_ca);
    if (!roots.ok()) return roots.status();
    options.pem_root_certs = *roots;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsOf(
    const TlsFiles& tls) {
  if (absl::Status checked = tls.Check(); !checked.ok()) return checked;
  if (tls.ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> roots = ReadPem(tls.ca);
  if (!roots.ok()) return roots.status();
  options.pem_root_certs = *roots;
  if (!tls.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls.cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls.key);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

}  // namespace specd::rpc
