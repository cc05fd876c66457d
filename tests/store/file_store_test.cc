// FileStore beyond the conformance suite: crash recovery and cleanup.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cohort/config.h"
#include "cohort/errors.h"
#include "cohort/file_store.h"
#include "store/store_harness.h"

namespace cohort {
namespace {

TEST(FileStoreTest, TornRecordOfACrashedWriterIsCutOffAndNothingElseIsLost) {
  std::string path = testing::temp_path("torn");
  FileStore keeper(path);  // holds the file open across the "crash"
  keeper.set("before", to_bytes("kept"));
  {
    // A writer died after writing half a record: kind, key length, no key.
    std::ofstream f(path, std::ios::binary | std::ios::app);
    const char partial[] = {1, 9, 0, 0, 0, 'h', 'a'};
    f.write(partial, sizeof partial);
  }
  FileStore late(path);
  late.set("after", to_bytes("also kept"));
  EXPECT_EQ(to_string(keeper.get("before")), "kept");
  EXPECT_EQ(to_string(keeper.get("after")), "also kept");
  EXPECT_EQ(to_string(late.get("before")), "kept");
}

TEST(FileStoreTest, FileIsRemovedWhenTheLastUserLeaves) {
  std::string path = testing::temp_path("cleanup");
  {
    auto a = std::make_unique<FileStore>(path);
    auto b = std::make_unique<FileStore>(path);
    a->set("k", to_bytes("v"));
    a.reset();
    EXPECT_TRUE(std::filesystem::exists(path)) << "removed while b still uses it";
    EXPECT_EQ(to_string(b->get("k")), "v");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileStoreTest, WithNumWorkersTheFileStaysUntilThatManyLeft) {
  std::string path = testing::temp_path("workers");
  { FileStore first(path, 2); }
  EXPECT_TRUE(std::filesystem::exists(path)) << "one of two workers left";
  { FileStore second(path, 2); }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileStoreTest, UnopenablePathIsAStoreErrorNamingIt) {
  try {
    FileStore s("/nonexistent-dir-for-cohort/store");
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir-for-cohort/store"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

TEST(FileStoreTest, LongLogsAreCompactedAndEveryUserFollows) {
  set_config("COHORT_FILESTORE_COMPACT_BYTES", "4096");
  std::string path = testing::temp_path("compact");
  {
    FileStore a(path), b(path);
    a.set("kept", to_bytes("value"));
    for (int i = 0; i < 2000; ++i) {
      (i % 2 ? a : b).add("counter", 1);  // 2000 records of a few dozen bytes
    }
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_LT(st.st_size, 16384) << "the log was not compacted";
    EXPECT_EQ(a.add("counter", 0), 2000);
    EXPECT_EQ(b.add("counter", 0), 2000);
    EXPECT_EQ(to_string(b.get("kept")), "value");
    FileStore late(path);  // a newcomer reads the compacted file
    EXPECT_EQ(late.add("counter", 0), 2000);
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "the last user still removes it";
  reset_config("COHORT_FILESTORE_COMPACT_BYTES");
}

}  // namespace
}  // namespace cohort
