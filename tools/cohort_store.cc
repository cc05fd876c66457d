// cohort-store: a standalone TcpStore server (torch's standalone TCPStore).
//
//   cohort-store [--host ADDR] [--port N] [--token-file FILE]
//
// Prints "cohort-store listening on HOST:PORT" once it accepts connections
// (port 0 picks one), then serves until SIGINT or SIGTERM. The token, when
// given, is read from a file (or COHORT_STORE_TOKEN) rather than the
// command line, where other users could read it in `ps`.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "cohort/errors.h"
#include "cohort/tcp_store_server.h"
#include "common/socket.h"

namespace {

int usage(const char* why) {
  std::fprintf(stderr, "cohort-store: %s\nusage: cohort-store [--host ADDR] [--port N] [--token-file FILE]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::TcpStoreServerOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return usage("a standalone cohort key-value store server"), 0;
    if (i + 1 >= argc) return usage(("missing value after " + arg).c_str());
    std::string value = argv[++i];
    if (arg == "--host") {
      options.host = value;
    } else if (arg == "--port") {
      char* end = nullptr;
      long port = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || port < 0 || port > 65535)
        return usage(("--port is '" + value + "', expected 0..65535").c_str());
      options.port = static_cast<uint16_t>(port);
    } else if (arg == "--token-file") {
      std::ifstream in(value);
      if (!in) return usage(("cannot read --token-file " + value).c_str());
      std::stringstream ss;
      ss << in.rdbuf();
      std::string token = ss.str();
      while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
      options.token = token;
    } else {
      return usage(("unknown option " + arg).c_str());
    }
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  // Blocked before the server thread starts, so only sigwait below sees them.
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    cohort::TcpStoreServer server(options);
    std::cout << "cohort-store listening on " << cohort::format_address(options.host, server.port())
              << std::endl;
    int sig = 0;
    sigwait(&stop_signals, &sig);
    auto stats = server.stats();
    std::cout << "cohort-store stopping on signal " << sig << " (" << stats.accepted_connections
              << " connections served, " << stats.keys << " keys held)" << std::endl;
  } catch (const cohort::Error& e) {
    std::fprintf(stderr, "cohort-store: %s\n", e.what());
    return 1;
  }
  return 0;
}
