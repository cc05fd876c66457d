// Stores shared by real processes, and the cohort-store and cohort-info
// programs as a user runs them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cohort/config.h"
#include "cohort/errors.h"
#include "cohort/file_store.h"
#include "cohort/tcp_store.h"
#include "store/store_harness.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// start_store_daemon starts cohort-store on a free port and returns the port.
uint16_t start_store_daemon(std::unique_ptr<Subprocess>* out, const std::vector<std::string>& extra = {},
                            const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {binary_path("tools/cohort-store"), "--host", "127.0.0.1", "--port", "0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  *out = std::make_unique<Subprocess>(argv, env);
  std::string line = (*out)->read_line(seconds(20));
  auto colon = line.rfind(':');
  if (line.find("listening on") == std::string::npos || colon == std::string::npos) {
    ADD_FAILURE() << "cohort-store said: '" << line << "'";
    return 0;
  }
  return static_cast<uint16_t>(std::stoi(line.substr(colon + 1)));
}

void run_workers(const std::string& kind, const std::string& where, int world, int adds,
                 const std::vector<std::string>& env = {}) {
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int r = 0; r < world; ++r) {
    workers.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{binary_path("tests/store_worker"), kind, where, std::to_string(r),
                                 std::to_string(world), std::to_string(adds)},
        env));
  }
  for (int r = 0; r < world; ++r) EXPECT_EQ(workers[r]->wait(), 0) << "rank " << r << " failed";
}

TEST(StoreProcessTest, FileStoreSharedByFourProcesses) {
  std::string path = temp_path("shared");
  FileStore parent(path);
  run_workers("file", path, 4, 200);
  EXPECT_EQ(parent.add("counter", 0), 800);
  EXPECT_EQ(parent.add("done", 0), 4);
}

TEST(StoreProcessTest, FileStoreSharedByFourProcessesWhileItsLogIsCompacted) {
  // A tiny threshold makes every process compact the log again and again
  // while the others append: nothing may be lost.
  set_config("COHORT_FILESTORE_COMPACT_BYTES", "2048");
  std::string path = temp_path("compacting");
  FileStore parent(path);
  run_workers("file", path, 4, 300, {"COHORT_FILESTORE_COMPACT_BYTES=2048"});
  EXPECT_EQ(parent.add("counter", 0), 1200);
  reset_config("COHORT_FILESTORE_COMPACT_BYTES");
}

TEST(StoreProcessTest, TcpStoreSharedByFourProcessesThroughTheDaemon) {
  std::unique_ptr<Subprocess> daemon;
  uint16_t port = start_store_daemon(&daemon);
  ASSERT_NE(port, 0);
  run_workers("tcp", std::to_string(port), 4, 200);
  TcpStoreOptions o;
  o.port = port;
  TcpStore client("127.0.0.1", o);
  EXPECT_EQ(client.add("counter", 0), 800);
}

TEST(StoreProcessTest, DaemonStopsCleanlyOnSigterm) {
  std::unique_ptr<Subprocess> daemon;
  uint16_t port = start_store_daemon(&daemon);
  ASSERT_NE(port, 0);
  {
    TcpStoreOptions o;
    o.port = port;
    TcpStore client("127.0.0.1", o);
    client.set("k", to_bytes("v"));
  }
  daemon->signal(SIGTERM);
  EXPECT_NE(daemon->read_line(seconds(10)).find("stopping on signal"), std::string::npos);
  EXPECT_EQ(daemon->wait(), 0);
}

TEST(StoreProcessTest, DaemonReadsItsTokenFromAFile) {
  std::string token_file = temp_path("token");
  { std::ofstream(token_file) << "file-secret\n"; }
  std::unique_ptr<Subprocess> daemon;
  uint16_t port = start_store_daemon(&daemon, {"--token-file", token_file});
  ASSERT_NE(port, 0);
  TcpStoreOptions o;
  o.port = port;
  o.timeout = seconds(10);
  o.token = "file-secret";
  TcpStore client("127.0.0.1", o);
  client.set("k", to_bytes("v"));
  o.token = "other";
  EXPECT_THROW(TcpStore("127.0.0.1", o), StoreError);
  std::filesystem::remove(token_file);
}

TEST(StoreProcessTest, DaemonRejectsABadPortWithUsage) {
  Subprocess bad({binary_path("tools/cohort-store"), "--port", "99999"});
  EXPECT_EQ(bad.wait(), 2);
}

TEST(CohortInfoTest, PrintsEveryKnobWithValueAndSource) {
  Subprocess info({binary_path("tools/cohort-info")},
                  {"COHORT_LOG_LEVEL=debug", "COHORT_STORE_TOKEN=hunter2"});
  std::string out = info.read_all(seconds(20));
  EXPECT_EQ(info.wait(), 0);
  EXPECT_NE(out.find("COHORT_LOG_LEVEL=debug\n    source: environment"), std::string::npos) << out;
  EXPECT_NE(out.find("COHORT_STORE_MAX_KEY_BYTES=65536\n    source: default"), std::string::npos) << out;
  EXPECT_NE(out.find("COHORT_STORE_TOKEN=<set>"), std::string::npos) << out;
  EXPECT_EQ(out.find("hunter2"), std::string::npos) << "the secret was printed";
}

TEST(CohortInfoTest, ABadEnvironmentValueIsNamed) {
  Subprocess info({binary_path("tools/cohort-info")}, {"COHORT_STORE_MAX_FRAME_BYTES=big"});
  info.read_all(seconds(20));
  EXPECT_EQ(info.wait(), 1);
}

TEST(CohortInfoTest, ATimeoutThatWouldMeanWaitingForeverIsRefusedWithItsRange) {
  for (const char* bad : {"0", "-5", "0.0001", "inf", "nan", "1e30"}) {
    Subprocess info({binary_path("tools/cohort-info")}, {std::string("COHORT_TIMEOUT_S=") + bad}, true);
    const std::string out = info.read_all(seconds(20));
    EXPECT_EQ(info.wait(), 1) << bad;
    EXPECT_NE(out.find(std::string("COHORT_TIMEOUT_S (from the environment) is '") + bad + "'"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("from 0.001 to 31536000"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace cohort::testing
