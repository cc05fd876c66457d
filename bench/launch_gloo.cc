// launch_gloo: what bench/launch_bench.sh times under torchrun: libtorch's
// env:// equivalent (a c10d::TCPStore at MASTER_ADDR:MASTER_PORT, rank 0
// hosting it unless the agent does) and ProcessGroupGloo, one barrier,
// leave. One translation unit: each libtorch one costs ~25 s to compile.
#include <cstdlib>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

int main() {
  const int rank = std::stoi(env("RANK"));
  const int world = std::stoi(env("WORLD_SIZE"));
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(std::stoi(env("MASTER_PORT")));
  options.isServer = rank == 0 && env("TORCHELASTIC_USE_AGENT_STORE") != "True";
  options.numWorkers = world;
  options.waitWorkers = false;
  auto store = c10::make_intrusive<c10d::TCPStore>(env("MASTER_ADDR"), options);
  auto pg_options = c10d::ProcessGroupGloo::Options::create();
  pg_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  c10d::ProcessGroupGloo pg(store, rank, world, pg_options);
  pg.barrier()->wait();
  return 0;
}
