#include "tests/support/free_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <stdexcept>
#include <utility>

namespace specd::testing {
namespace {

constexpr int kLowestPort = 10000;  // below: well-known and registered services

// The ports bind(0) hands out: /proc's ip_local_port_range, Linux's default if unreadable.
std::pair<int, int> EphemeralRange() {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  return {low, high};
}

bool Bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return bound;
}

}  // namespace

int FreePort() {
  const auto [ephemeral_low, ephemeral_high] = EphemeralRange();
  // Below the range where it leaves room, above it otherwise.
  const bool below = ephemeral_low - kLowestPort >= 1000;
  std::uniform_int_distribution<int> pick(below ? kLowestPort : ephemeral_high + 1,
                                          below ? ephemeral_low - 1 : 65535);
  static std::mt19937 random(std::random_device{}());
  for (int attempt = 0; attempt < 1000; ++attempt) {
    if (const int port = pick(random); Bindable(port)) return port;
  }
  throw std::runtime_error("no free loopback port outside the ephemeral range");
}

}  // namespace specd::testing
