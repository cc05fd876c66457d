// common/json.h: documents read back as they were written, strictness,
// and the escapes a dump's error texts need.
#include "common/json.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

TEST(JsonTest, ADocumentReadsBackAsItWasWritten) {
  Json doc = Json::object();
  doc.set("name", "default");
  doc.set("big", int64_t{1} << 62);
  doc.set("negative", -17);
  doc.set("half", 0.5);
  doc.set("yes", true);
  doc.set("nothing", Json());
  Json list = Json::array();
  list.push(1);
  Json inner = Json::object();
  inner.set("error", "line 1\nline \"2\"\ttab \\ and \x01");
  list.push(inner);
  doc.set("list", list);
  for (int indent : {-1, 2}) {
    auto back = Json::parse(doc.dump(indent));
    ASSERT_TRUE(back.ok()) << back.status().message();
    const Json& j = back.value();
    EXPECT_EQ(j["name"].as_string(), "default");
    EXPECT_EQ(j["big"].as_int(), int64_t{1} << 62);
    EXPECT_EQ(j["negative"].as_int(), -17);
    EXPECT_EQ(j["half"].as_double(), 0.5);
    EXPECT_TRUE(j["yes"].as_bool());
    EXPECT_TRUE(j["nothing"].is_null());
    EXPECT_FALSE(j.has("absent"));
    ASSERT_EQ(j["list"].items().size(), 2u);
    EXPECT_EQ(j["list"].items()[1]["error"].as_string(), "line 1\nline \"2\"\ttab \\ and \x01");
    EXPECT_EQ(j.dump(indent), doc.dump(indent));
  }
}

TEST(JsonTest, ObjectsOfScalarsStayOnOneLine) {
  Json entry = Json::object();
  entry.set("op", "all_reduce");
  entry.set("sequence", 5);
  Json entries = Json::array();
  entries.push(entry);
  entries.push(entry);
  Json doc = Json::object();
  doc.set("entries", entries);
  EXPECT_EQ(doc.dump(2),
            "{\n  \"entries\": [\n    {\"op\": \"all_reduce\", \"sequence\": 5},\n"
            "    {\"op\": \"all_reduce\", \"sequence\": 5}\n  ]\n}");
}

TEST(JsonTest, UnicodeEscapesBecomeUtf8IncludingSurrogatePairs) {
  auto j = Json::parse(R"(["\u00e9\u20ac", "\ud83d\ude00", "a\/b"])");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j.value().items()[0].as_string(), "\xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(j.value().items()[1].as_string(), "\xf0\x9f\x98\x80");
  EXPECT_EQ(j.value().items()[2].as_string(), "a/b");
}

TEST(JsonTest, MalformedDocumentsAreRefusedWithWhereAndWhy) {
  for (const char* bad : {"", "{", "{\"a\": }", "[1, 2", "[1 2]", "{\"a\" 1}", "\"unterminated", "tru",
                          "{\"a\": 1} trailing", "\"raw\ncontrol\"", "\"bad \\q escape\"", "01x", "-"}) {
    auto j = Json::parse(bad);
    EXPECT_FALSE(j.ok()) << "accepted: " << bad;
    if (!j.ok()) {
      EXPECT_NE(j.status().message().find("at byte"), std::string::npos) << j.status().message();
    }
  }
}

TEST(JsonTest, NestingIsBoundedSoAHostileDocumentCannotExhaustTheStack) {
  std::string deep(100000, '[');
  auto j = Json::parse(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("nested deeper"), std::string::npos) << j.status().message();
  EXPECT_TRUE(Json::parse(std::string(60, '[') + std::string(60, ']')).ok());
}

TEST(JsonTest, ReadersFallBackWhenTheTypeDiffers) {
  auto j = Json::parse(R"({"n": "text", "s": 3})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j.value()["n"].as_int(-1), -1);
  EXPECT_EQ(j.value()["s"].as_string(), "");
  EXPECT_TRUE(j.value()["missing"]["deeper"].is_null());
}

}  // namespace
}  // namespace cohort
