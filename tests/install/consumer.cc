// Built against an install tree by check_install.cmake: proves that the
// installed headers and library are enough to use cohort.
#include <cohort/cohort.h>  // the umbrella header of cohort::cohort

#include <cstdio>

int main() {
  cohort::TcpStoreOptions options;
  options.port = 0;
  options.is_server = true;
  cohort::TcpStore store("127.0.0.1", options);
  store.set("greeting", cohort::to_bytes("hello from an installed cohort"));
  std::printf("%s\n", cohort::to_string(store.get("greeting")).c_str());
  cohort::HashStore local;
  return local.add("n", 41) + 1 == 42 ? 0 : 1;
}
