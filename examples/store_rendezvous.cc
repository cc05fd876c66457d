// store_rendezvous: the multi-rank program scripts/demo runs until the
// training demo exists. Every rank joins through env:// (MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE; rank 0 hosts the TcpStore), publishes what
// it is, meets the others at a barrier built from add/wait, and rank 0
// prints the roll call and an all-reduced sum computed through the store.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "cohort/errors.h"
#include "rendezvous/init_url.h"

namespace {

// barrier: everyone adds to a counter; the last one in opens the gate.
void barrier(cohort::Store& store, const std::string& name, int world_size) {
  if (store.add(name + "/arrived", 1) == world_size) store.set(name + "/open", cohort::to_bytes("1"));
  store.wait({name + "/open"});
}

}  // namespace

int main() {
  try {
    auto start = std::chrono::steady_clock::now();
    cohort::Rendezvous rv = cohort::rendezvous("env://", -1, -1, std::chrono::seconds(60));
    auto joined = std::chrono::steady_clock::now();
    cohort::Store& store = *rv.store;
    char host[256] = "?";
    gethostname(host, sizeof host);
    std::string me = "rank " + std::to_string(rv.rank) + " pid " + std::to_string(getpid()) + " on " + host;
    store.set("who/" + std::to_string(rv.rank), cohort::to_bytes(me));
    // Each rank contributes (rank+1)^2; the sum is everyone's to read.
    store.add("sum_of_squares", static_cast<int64_t>(rv.rank + 1) * (rv.rank + 1));
    barrier(store, "after_contributions", rv.world_size);
    int64_t sum = store.add("sum_of_squares", 0);
    int64_t expected = 0;
    for (int r = 1; r <= rv.world_size; ++r) expected += static_cast<int64_t>(r) * r;
    if (sum != expected) {
      std::fprintf(stderr, "rank %d: sum %lld, expected %lld\n", rv.rank, static_cast<long long>(sum),
                   static_cast<long long>(expected));
      return 1;
    }
    if (rv.rank == 0) {
      std::vector<std::string> keys;
      for (int r = 0; r < rv.world_size; ++r) keys.push_back("who/" + std::to_string(r));
      std::printf("%d ranks joined through env:// in %.1f ms:\n", rv.world_size,
                  std::chrono::duration<double, std::milli>(joined - start).count());
      for (const auto& v : store.multi_get(keys)) std::printf("  %s\n", cohort::to_string(v).c_str());
      std::printf("sum over ranks of (rank+1)^2 = %lld (expected %lld)\n", static_cast<long long>(sum),
                  static_cast<long long>(expected));
    }
    // Rank 0 hosts the store: it leaves last.
    barrier(store, "done", rv.world_size);
    if (rv.rank == 0) {
      while (store.add("left", 0) < rv.world_size - 1) usleep(1000);
    } else {
      store.add("left", 1);
    }
  } catch (const cohort::Error& e) {
    std::fprintf(stderr, "store_rendezvous: %s\n", e.what());
    return 1;
  }
  return 0;
}
