// store_worker: one rank of a multi-process store test.
//
//   store_worker file PATH RANK WORLD ADDS
//   store_worker tcp  PORT RANK WORLD ADDS
//
// Each rank adds ADDS times to "counter", publishes "rank/R", waits for every
// rank's key and checks their values, and races the others for "winner"
// with compare_set; all ranks must agree on the winner. Exits 0 when every
// check held, 1 with a message otherwise.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cohort/errors.h"
#include "cohort/file_store.h"
#include "cohort/tcp_store.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: store_worker file|tcp PATH|PORT RANK WORLD ADDS\n");
    return 2;
  }
  std::string kind = argv[1];
  int rank = std::atoi(argv[3]);
  int world = std::atoi(argv[4]);
  int adds = std::atoi(argv[5]);
  try {
    std::unique_ptr<cohort::Store> store;
    if (kind == "file") {
      store = std::make_unique<cohort::FileStore>(argv[2]);
    } else {
      cohort::TcpStoreOptions o;
      o.port = static_cast<uint16_t>(std::atoi(argv[2]));
      o.timeout = std::chrono::seconds(60);
      store = std::make_unique<cohort::TcpStore>("127.0.0.1", o);
    }
    for (int i = 0; i < adds; ++i) store->add("counter", 1);
    store->set("rank/" + std::to_string(rank), cohort::to_bytes("value-" + std::to_string(rank)));
    std::vector<std::string> keys;
    for (int r = 0; r < world; ++r) keys.push_back("rank/" + std::to_string(r));
    auto values = store->multi_get(keys);
    for (int r = 0; r < world; ++r) {
      if (cohort::to_string(values[r]) != "value-" + std::to_string(r)) {
        std::fprintf(stderr, "rank %d: rank/%d holds '%s'\n", rank, r, cohort::to_string(values[r]).c_str());
        return 1;
      }
    }
    std::string mine = std::to_string(rank);
    std::string winner = cohort::to_string(store->compare_set("winner", {}, cohort::to_bytes(mine)));
    store->set("saw/" + mine, cohort::to_bytes(winner));
    store->add("done", 1);
    std::vector<std::string> saw_keys;
    for (int r = 0; r < world; ++r) saw_keys.push_back("saw/" + std::to_string(r));
    for (const auto& v : store->multi_get(saw_keys)) {
      if (cohort::to_string(v) != winner) {
        std::fprintf(stderr, "rank %d: ranks disagree on the compare_set winner\n", rank);
        return 1;
      }
    }
    std::printf("rank %d ok, winner %s\n", rank, winner.c_str());
  } catch (const cohort::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
