#pragma once
// Loopback ports for servers that cannot pick their own (a port given on a command line).

namespace specd::testing {

// A loopback port nothing listens on right now, below the kernel's ephemeral range: every
// bind(0) and outgoing connection draws its port from that range, so no other test's server or
// client can take this one between the pick and the bind of the server it is meant for. Two
// tests picking the same port at once is left to chance (a random pick among thousands).
int FreePort();

}  // namespace specd::testing
