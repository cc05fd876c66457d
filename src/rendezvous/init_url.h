// init_url.h: turning an init method ("env://", "tcp://host:port",
// "file:///path") into a store, a rank and a world size, as torch's
// rendezvous handlers do.
//
// Query parameters: rank, world_size (as torch) and token (the TcpStore
// secret, instead of COHORT_STORE_TOKEN). env:// reads MASTER_ADDR,
// MASTER_PORT, RANK and WORLD_SIZE; without RANK and WORLD_SIZE it takes
// mpirun's OMPI_COMM_WORLD_RANK/SIZE, else srun's SLURM_PROCID/NTASKS. A missing or malformed value raises
// InvalidArgument naming it. Rank 0 hosts the TcpStore server.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cohort/store.h"

namespace cohort {

// InitUrl is a parsed init method.
struct InitUrl {
  std::string scheme;  // "env", "tcp" or "file"
  std::string host;    // tcp
  uint16_t port = 0;   // tcp
  std::string path;    // file
  std::map<std::string, std::string> query;
};

// parse_init_url parses `url`; throws InvalidArgument saying what is wrong.
InitUrl parse_init_url(const std::string& url);

// Rendezvous is what an init method yields.
struct Rendezvous {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
};

// rendezvous resolves `url` to a store. `rank` and `world_size` of -1 are
// taken from the URL's query or, for env://, from RANK and WORLD_SIZE.
// It waits only for the store server (rank 0 starts it); waiting for every
// rank is the process group's job, which names the ranks that are missing.
// master_host, when given, receives the store's host ("" for file://).
Rendezvous rendezvous(const std::string& url, int rank, int world_size, std::chrono::milliseconds timeout,
                      std::string* master_host = nullptr);

}  // namespace cohort
