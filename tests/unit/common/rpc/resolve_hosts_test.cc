// Host names become the addresses an orchestrator dials: every address once, IPv6 in brackets,
// and a name that resolves to nothing is NOT_FOUND.
#include "common/rpc/resolve_hosts.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace specd::rpc {
namespace {

TEST(ResolveHostsTest, AnAddressStandsForItself) {
  EXPECT_EQ(*ResolveHosts("127.0.0.2"), std::vector<std::string>{"127.0.0.2"});
  EXPECT_EQ(*ResolveHosts("::1"), std::vector<std::string>{"[::1]"});
}

TEST(ResolveHostsTest, LocalhostIncludesTheLoopbackAddressOnce) {
  absl::StatusOr<std::vector<std::string>> hosts = ResolveHosts("localhost");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(std::count(hosts->begin(), hosts->end(), "127.0.0.1"), 1);
  EXPECT_TRUE(std::is_sorted(hosts->begin(), hosts->end()));
}

TEST(ResolveHostsTest, ANameThatResolvesToNothingIsNotFound) {
  // .invalid never resolves (RFC 6761), with or without a network.
  EXPECT_EQ(ResolveHosts("pairs.specd.invalid").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace specd::rpc
