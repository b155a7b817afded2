#include "common/rpc/resolve_hosts.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace specd::rpc {

absl::StatusOr<std::vector<std::string>> ResolveHosts(const std::string& name) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(name.c_str(), nullptr, &hints, &found); error != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", name, ": ", gai_strerror(error)));
  }
  std::vector<std::string> hosts;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (entry->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(entry->ai_addr)->sin_addr, text,
                sizeof(text));
      hosts.emplace_back(text);
    } else if (entry->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(entry->ai_addr)->sin6_addr, text,
                sizeof(text));
      hosts.push_back(absl::StrCat("[", text, "]"));
    }
  }
  freeaddrinfo(found);
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  if (hosts.empty()) return absl::NotFoundError(absl::StrCat(name, " has no addresses"));
  return hosts;
}

}  // namespace specd::rpc
