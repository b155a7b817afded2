#include "tests/support/test_certificates.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace specd::testing {
namespace {

void Openssl(std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  const ProcessResult run = RunProcess(args);
  EXPECT_EQ(run.exit_code, 0) << args[1] << ": " << run.err;
}

}  // namespace

TestCertificates MakeTestCertificates(const std::filesystem::path& dir,
                                      const std::string& subject_alt_names) {
  const TestCertificates files = {
      .ca = dir / "ca.pem", .cert = dir / "loopback.pem", .key = dir / "loopback.key"};
  const std::string ca_key = (dir / "ca.key").string();
  const std::string request = (dir / "loopback.csr").string();
  const std::string extensions = (dir / "loopback.ext").string();
  // P-256 keys: as strong as RSA-3072 for these purposes, generated in milliseconds.
  Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", ca_key, "-out", files.ca.string(), "-days", "2", "-subj", "/CN=specd test CA",
           "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
           "keyUsage=critical,keyCertSign,cRLSign"});
  Openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
           files.key.string(), "-out", request, "-subj", "/CN=localhost"});
  std::ofstream(extensions) << "subjectAltName=" << subject_alt_names
                            << "\nextendedKeyUsage=serverAuth,clientAuth\n";
  Openssl({"x509", "-req", "-in", request, "-CA", files.ca.string(), "-CAkey", ca_key,
           "-CAcreateserial", "-out", files.cert.string(), "-days", "2", "-extfile", extensions});
  return files;
}

}  // namespace specd::testing
