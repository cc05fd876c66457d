// A rank's dump: JSON round trip, the files, and documents that are not
// dumps.
#include "diagnostics/trace_dump.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace cohort::testing {
namespace {

RankDump sample_dump() {
  RankDump d;
  d.global_rank = 3;
  d.pid = 4242;
  d.host = "node-7";
  d.reason = "group default failed: all_reduce #5 of group default timed out: \"quoted\"\nsecond line";
  d.dumped_us = 1700000000123456;
  GroupDump g;
  g.name = "group_1";
  g.rank = 1;
  g.size = 2;
  g.global_ranks = {1, 3};
  g.backend = "cohort";
  g.capacity = 2000;
  g.collectives = Progress{5, 5, 4, 5, 5};
  g.p2p = Progress{2, 2, 1, 0, 1};
  TraceRecord a;
  a.id = 9;
  a.op = "all_reduce";
  a.sequence = 5;
  a.state = OpState::kFailed;
  a.input_count = a.output_count = 1 << 20;
  a.dtype = "float32";
  a.enqueued_us = 1700000000000001;
  a.started_us = 1700000000000002;
  a.ended_us = 1700000003000002;
  a.error = "timed out: still waiting to receive from ranks [0] \xe2\x80\x94 \x01";
  TraceRecord b;
  b.id = 10;
  b.op = "recv";
  b.collective = false;
  b.sequence = 2;
  b.state = OpState::kStarted;
  b.input_count = b.output_count = 1;
  b.dtype = "int64";
  b.peer = 0;
  b.tag = -3;
  b.enqueued_us = b.started_us = 1700000000000005;
  TraceRecord c;
  c.id = 11;
  c.op = "barrier";
  c.sequence = 6;
  c.state = OpState::kScheduled;
  c.enqueued_us = 1700000000000009;
  g.entries = {a, b, c};
  d.groups = {g};
  return d;
}

void expect_same(const TraceRecord& x, const TraceRecord& y) {
  EXPECT_EQ(x.id, y.id);
  EXPECT_EQ(x.op, y.op);
  EXPECT_EQ(x.collective, y.collective);
  EXPECT_EQ(x.sequence, y.sequence);
  EXPECT_EQ(x.state, y.state);
  EXPECT_EQ(x.input_count, y.input_count);
  EXPECT_EQ(x.output_count, y.output_count);
  EXPECT_EQ(x.dtype, y.dtype);
  EXPECT_EQ(x.peer, y.peer);
  EXPECT_EQ(x.tag, y.tag);
  EXPECT_EQ(x.enqueued_us, y.enqueued_us);
  EXPECT_EQ(x.started_us, y.started_us);
  EXPECT_EQ(x.ended_us, y.ended_us);
  EXPECT_EQ(x.error, y.error);
}

void expect_same(const Progress& x, const Progress& y) {
  EXPECT_EQ(x.enqueued, y.enqueued);
  EXPECT_EQ(x.started, y.started);
  EXPECT_EQ(x.completed, y.completed);
  EXPECT_EQ(x.failed, y.failed);
  EXPECT_EQ(x.finished, y.finished);
}

TEST(TraceDumpTest, JsonRoundTripKeepsEveryField) {
  const RankDump d = sample_dump();
  auto back = parse_rank_dump(rank_dump_json(d));
  ASSERT_TRUE(back.ok()) << back.status().message();
  const RankDump& e = back.value();
  EXPECT_EQ(e.global_rank, d.global_rank);
  EXPECT_EQ(e.pid, d.pid);
  EXPECT_EQ(e.host, d.host);
  EXPECT_EQ(e.reason, d.reason);
  EXPECT_EQ(e.dumped_us, d.dumped_us);
  ASSERT_EQ(e.groups.size(), 1u);
  const GroupDump& g = e.groups[0];
  const GroupDump& h = d.groups[0];
  EXPECT_EQ(g.name, h.name);
  EXPECT_EQ(g.rank, h.rank);
  EXPECT_EQ(g.size, h.size);
  EXPECT_EQ(g.global_ranks, h.global_ranks);
  EXPECT_EQ(g.backend, h.backend);
  EXPECT_EQ(g.capacity, h.capacity);
  expect_same(g.collectives, h.collectives);
  expect_same(g.p2p, h.p2p);
  ASSERT_EQ(g.entries.size(), h.entries.size());
  for (size_t i = 0; i < g.entries.size(); ++i) expect_same(g.entries[i], h.entries[i]);
}

TEST(TraceDumpTest, EntriesReadOneToALine) {
  const std::string text = rank_dump_json(sample_dump());
  EXPECT_NE(text.find("\n        {\"id\": 10, \"kind\": \"p2p\", \"sequence\": 2, \"op\": \"recv\", "
                      "\"state\": \"started\""),
            std::string::npos)
      << text;
}

TEST(TraceDumpTest, RecordTextNamesOperationsAsMessagesDo) {
  const RankDump d = sample_dump();
  EXPECT_EQ(record_text(d.groups[0].entries[0]), "all_reduce #5 (4 MiB float32)");
  EXPECT_EQ(record_text(d.groups[0].entries[1]), "recv from 0 tag -3 (p2p #2, 8 B int64)");
  EXPECT_EQ(record_text(d.groups[0].entries[2]), "barrier #6");
}

TEST(TraceDumpTest, TruncatedForeignAndInconsistentDocumentsAreRefused) {
  const std::string good = rank_dump_json(sample_dump());
  EXPECT_FALSE(parse_rank_dump(good.substr(0, good.size() / 2)).ok());
  auto foreign = parse_rank_dump(R"({"message": {"message": "a torch error file"}})");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("not a cohort-trace dump"), std::string::npos);
  std::string future = good;
  future.replace(future.find("\"version\": 1"), 12, "\"version\": 99");
  auto v = parse_rank_dump(future);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("version 99"), std::string::npos) << v.status().message();
  std::string bad_rank = good;
  bad_rank.replace(bad_rank.find("\"rank\": 1"), 9, "\"rank\": 7");
  EXPECT_FALSE(parse_rank_dump(bad_rank).ok()) << "group rank 7 of a group of 2";
}

TEST(TraceDumpTest, FilesAreWrittenWholeAndUnreadableOnesAreNamed) {
  char dir_template[] = "/tmp/cohort-dump-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = std::string(dir_template) + "/nested";  // made by the writer
  ASSERT_TRUE(write_rank_dump(dir, sample_dump()).ok());
  RankDump other = sample_dump();
  other.global_rank = 1;
  ASSERT_TRUE(write_rank_dump(dir, other).ok());
  { std::ofstream(dir + "/rank_2.json") << "{\"format\": \"cohort-trace\", \"vers"; }
  std::vector<std::string> problems;
  auto dumps = read_rank_dumps(dir, &problems);
  ASSERT_TRUE(dumps.ok());
  ASSERT_EQ(dumps.value().size(), 2u);
  EXPECT_EQ(dumps.value()[0].global_rank, 1);
  EXPECT_EQ(dumps.value()[1].global_rank, 3);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("rank_2.json: JSON:", 0), 0u) << problems[0];
  for (const char* f : {"/rank_1.json", "/rank_2.json", "/rank_3.json"}) unlink((dir + f).c_str());
  rmdir(dir.c_str());
  rmdir(dir_template);
  EXPECT_FALSE(read_rank_dumps(dir, &problems).ok()) << "a missing directory is an error";
}

}  // namespace
}  // namespace cohort::testing
