// Runs every tutorial port in examples/tutorial as real processes through
// env://, and checks what each rank prints.
#include <gtest/gtest.h>

#include "common/socket.h"
#include "support/subprocess.h"

namespace cohort::testing {
namespace {

using std::chrono::seconds;

std::vector<std::string> run_example(const std::string& name, int world) {
  uint16_t port;
  {
    auto s = listen_tcp("", 0);
    port = local_port(s.value().fd());
  }
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{binary_path("examples/" + name)},
        std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
                                 "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)}));
  }
  std::vector<std::string> out;
  for (auto& p : ranks) {
    out.push_back(p->read_all(seconds(60)));
    EXPECT_EQ(p->wait(), 0) << name << ": " << out.back();
  }
  return out;
}

TEST(TutorialExamples, BlockingPointToPoint) {
  auto out = run_example("p2p_blocking", 2);
  EXPECT_EQ(out[0], "Rank 0 has data 1.0\n");
  EXPECT_EQ(out[1], "Rank 1 has data 1.0\n");
}

TEST(TutorialExamples, NonBlockingPointToPoint) {
  auto out = run_example("p2p_nonblocking", 2);
  EXPECT_EQ(out[0], "Rank 0 started sending\nRank 0 has data 1.0\n");
  EXPECT_EQ(out[1], "Rank 1 started receiving\nRank 1 has data 1.0\n");
}

TEST(TutorialExamples, AllReduceInAGroupOfTwoOutOfFour) {
  auto out = run_example("group_all_reduce", 4);
  EXPECT_EQ(out[0], "Rank 0 has data 2.0\n");
  EXPECT_EQ(out[1], "Rank 1 has data 2.0\n");
  EXPECT_EQ(out[2], "Rank 2 has data 1.0\n");  // not in the group
  EXPECT_EQ(out[3], "Rank 3 has data 1.0\n");
}

TEST(TutorialExamples, RingAllReduceFromIsendAndRecv) {
  auto out = run_example("ring_all_reduce", 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(out[r], "Rank " + std::to_string(r) + " has data 10.0\n");
}

TEST(TutorialExamples, DataPartitionerSplitsEvenlyAndCoversTheSet) {
  auto out = run_example("data_partitioner", 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(out[r].find("Rank " + std::to_string(r) + " has 250 samples"), std::string::npos) << out[r];
    // 1000 distinct samples 0..999 in all: their sum is 499500.
    EXPECT_NE(out[r].find("all ranks: 1000 samples, sum 499500"), std::string::npos) << out[r];
  }
}

}  // namespace
}  // namespace cohort::testing

namespace cohort::testing {
namespace {

TEST(CohortBench, PrintsNcclTestsColumnsAndChecksResults) {
  for (const char* collective :
       {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"}) {
    Subprocess bench({binary_path("tools/cohort-bench"), collective, "-b", "64", "-e", "64K", "-f", "32",
                      "-n", "2", "-w", "1", "--spawn", "3"});
    std::string out = bench.read_all(std::chrono::seconds(120));
    EXPECT_EQ(bench.wait(), 0) << collective << ":\n" << out;
    EXPECT_NE(out.find("size        count     type  redop  root   time(us) algbw(GB/s) busbw(GB/s)  #wrong"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("# Avg bus bandwidth"), std::string::npos) << out;
    // Three sizes (64 B, 2 KiB, 64 KiB), each with 0 wrong elements.
    size_t rows = 0, pos = 0;
    while ((pos = out.find("       0\n", pos)) != std::string::npos) ++rows, ++pos;
    EXPECT_EQ(rows, 3u) << collective << ":\n" << out;
  }
}

TEST(CohortBench, JsonOutput) {
  Subprocess bench({binary_path("tools/cohort-bench"), "all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w",
                    "0", "--json", "--spawn", "2"});
  std::string out = bench.read_all(std::chrono::seconds(60));
  EXPECT_EQ(bench.wait(), 0);
  EXPECT_EQ(out.rfind("[{\"size\":8,\"count\":2,\"type\":\"float32\",\"redop\":\"SUM\"", 0), 0u) << out;
  EXPECT_NE(out.find("\"wrong\":0}]"), std::string::npos) << out;
}

TEST(CohortBench, RejectsAnUnknownCollective) {
  Subprocess bench({binary_path("tools/cohort-bench"), "all_shuffle"});
  EXPECT_EQ(bench.wait(), 2);
}

}  // namespace
}  // namespace cohort::testing
