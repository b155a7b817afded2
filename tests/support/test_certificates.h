#pragma once
// A certificate authority and one certificate it signs for loopback (localhost, 127.0.0.1; for
// servers and clients alike), or for other names, made with the openssl command in a test's
// directory: what the TLS tests serve, connect and authenticate each other with.
#include <filesystem>
#include <string>

namespace specd::testing {

struct TestCertificates {
  std::filesystem::path ca;    // the authority's certificate (PEM): what clients and servers trust
  std::filesystem::path cert;  // the certificate (PEM)
  std::filesystem::path key;   // its private key (PEM)
};

// Writes them into `dir`; a failed openssl run fails the test. `subject_alt_names` are the names
// the certificate carries, as openssl's subjectAltName extension spells them.
TestCertificates MakeTestCertificates(
    const std::filesystem::path& dir,
    const std::string& subject_alt_names = "DNS:localhost,IP:127.0.0.1");

}  // namespace specd::testing
