// The config registry: one declaration per knob, typed values, sources.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cohort/config.h"
#include "cohort/errors.h"
#include "common/config_registry.h"
#include "common/logging.h"
#include "common/split.h"

namespace cohort {
namespace {

const ConfigEntry& entry(const std::vector<ConfigEntry>& all, const std::string& name) {
  for (const auto& e : all) {
    if (e.name == name) return e;
  }
  throw std::runtime_error("no knob " + name);
}

TEST(ConfigTest, EveryDeclaredKnobIsListedWithItsDoc) {
  auto all = config_entries();
  EXPECT_EQ(all.size(), std::size(knobs::kAllKnobs));
  for (const auto& e : all) {
    EXPECT_EQ(e.name.rfind("COHORT_", 0), 0u) << e.name;
    EXPECT_FALSE(e.doc.empty()) << e.name;
  }
}

TEST(ConfigTest, EveryKnobDeclaredInTheHeaderIsListed) {
  // A knob declared but missing from kAllKnobs would work but be invisible
  // to cohort-info and set_config: count the declarations.
  std::ifstream header(std::string(COHORT_SOURCE_DIR) + "/src/common/knobs.h");
  ASSERT_TRUE(header) << "cannot read knobs.h";
  std::string line;
  size_t declared = 0;
  while (std::getline(header, line)) {
    if (line.find("inline constexpr KnobSpec ") != std::string::npos) ++declared;
  }
  EXPECT_EQ(declared, std::size(knobs::kAllKnobs));
}

TEST(ConfigTest, SetConfigOverridesAndResetRestores) {
  reset_config("COHORT_STORE_MAX_KEY_BYTES");
  const int64_t declared = config_int(knobs::kStoreMaxKeyBytes);
  set_config("COHORT_STORE_MAX_KEY_BYTES", "123");
  EXPECT_EQ(config_int(knobs::kStoreMaxKeyBytes), 123);
  EXPECT_EQ(entry(config_entries(), "COHORT_STORE_MAX_KEY_BYTES").source, "set_config");
  reset_config("COHORT_STORE_MAX_KEY_BYTES");
  EXPECT_EQ(config_int(knobs::kStoreMaxKeyBytes), declared);
}

TEST(ConfigTest, ValueOfTheWrongTypeNamesTheKnobAndTheValue) {
  try {
    set_config("COHORT_STORE_MAX_KEY_BYTES", "lots");
    FAIL();
  } catch (const InvalidArgument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("COHORT_STORE_MAX_KEY_BYTES"), std::string::npos) << m;
    EXPECT_NE(m.find("lots"), std::string::npos) << m;
  }
  EXPECT_THROW(set_config("COHORT_LOG_LEVEL", "loud"), InvalidArgument);
}

TEST(ConfigTest, NumbersOutsideTheirRangeOrNotFiniteAreRefused) {
  for (const char* bad : {"0", "-5", "0.0001", "inf", "nan", "1e30"}) {
    try {
      set_config("COHORT_TIMEOUT_S", bad);
      ADD_FAILURE() << "COHORT_TIMEOUT_S=" << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("is '") + bad + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(set_config("COHORT_SHM_SPIN_US", "-1"), InvalidArgument);
  EXPECT_THROW(set_config("COHORT_TCP_BUFFER_BYTES", "4294967296"), InvalidArgument);  // past an int
  set_config("COHORT_TIMEOUT_S", "0.5");
  EXPECT_EQ(config_float(knobs::kDefaultTimeoutS), 0.5);
  reset_config("COHORT_TIMEOUT_S");
  // Every number knob declares a range that holds its default.
  for (const KnobSpec* k : knobs::kAllKnobs) {
    if (k->type != KnobType::kInt && k->type != KnobType::kFloat) continue;
    EXPECT_LT(k->min_value, k->max_value) << k->name;
    const double d = std::strtod(k->default_value, nullptr);
    EXPECT_TRUE(d >= k->min_value && d <= k->max_value) << k->name;
  }
}

TEST(ConfigTest, UnknownKnobIsInvalidArgument) {
  EXPECT_THROW(set_config("COHORT_NO_SUCH_THING", "1"), InvalidArgument);
}

TEST(ConfigTest, SecretValuesAreNeverShown) {
  set_config("COHORT_STORE_TOKEN", "hunter2");
  EXPECT_EQ(entry(config_entries(), "COHORT_STORE_TOKEN").value, "<set>");
  EXPECT_EQ(config_string(knobs::kStoreToken), "hunter2");
  reset_config("COHORT_STORE_TOKEN");
}

TEST(ConfigTest, LogLevelFollowsTheRegistry) {
  set_config("COHORT_LOG_LEVEL", "error");
  EXPECT_FALSE(log_enabled(LogLevel::kWarning));
  EXPECT_TRUE(log_enabled(LogLevel::kError));
  set_config("COHORT_LOG_LEVEL", "debug");
  EXPECT_TRUE(log_enabled(LogLevel::kDebug));
  EXPECT_FALSE(log_enabled(LogLevel::kTrace));
  set_config("COHORT_LOG_LEVEL", "off");
  EXPECT_FALSE(log_enabled(LogLevel::kError));
  reset_config("COHORT_LOG_LEVEL");
}

// Sets one environment variable for a test's scope and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_.empty() ? unsetenv(name_) : setenv(name_, old_.c_str(), 1); }

 private:
  const char* name_;
  std::string old_;
};

TEST(ConfigTest, TorchDistributedDebugSetsTheDebugLevelWhenCohortDebugIsUnset) {
  ScopedEnv cohort("COHORT_DEBUG", nullptr);
  ScopedEnv torch("TORCH_DISTRIBUTED_DEBUG", "DETAIL");
  reset_config("COHORT_DEBUG");
  EXPECT_EQ(config_string(knobs::kDebug), "detail");
  EXPECT_EQ(entry(config_entries(), "COHORT_DEBUG").source, "environment (TORCH_DISTRIBUTED_DEBUG)");
  reset_config("COHORT_DEBUG");
}

TEST(ConfigTest, CohortsOwnVariableWinsOverTorchs) {
  ScopedEnv cohort("COHORT_DEBUG", "info");
  ScopedEnv torch("TORCH_DISTRIBUTED_DEBUG", "DETAIL");
  reset_config("COHORT_DEBUG");
  EXPECT_EQ(config_string(knobs::kDebug), "info");
  EXPECT_EQ(entry(config_entries(), "COHORT_DEBUG").source, "environment");
  reset_config("COHORT_DEBUG");
}

TEST(ConfigTest, ABadTorchValueNamesTorchsVariableAndTheValueAsWritten) {
  ScopedEnv cohort("COHORT_DEBUG", nullptr);
  ScopedEnv torch("TORCH_DISTRIBUTED_DEBUG", "LOUD");
  reset_config("COHORT_DEBUG");
  try {
    config_string(knobs::kDebug);
    FAIL() << "LOUD was accepted";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("TORCH_DISTRIBUTED_DEBUG"), std::string::npos) << m;
    EXPECT_NE(m.find("'LOUD'"), std::string::npos) << m;
  }
  reset_config("COHORT_DEBUG");
}

TEST(ConfigTest, EveryTorchVariableOfEveryKnobIsRead) {
  size_t checked = 0;
  for (const KnobSpec* k : knobs::kAllKnobs) {
    if (!k->torch_names) continue;
    // A value of the knob's type, written as torch would (choices in
    // capitals), different from the default.
    std::string value = "77", want = "77";
    if (k->type == KnobType::kString) value = want = "eth77";
    if (k->type == KnobType::kChoice) {
      want = split(k->choices, '|').back();
      value = want;
      for (char& c : value) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    for (const std::string& name : split(k->torch_names, '|')) {
      ScopedEnv cohort(k->name, nullptr);
      ScopedEnv torch(name.c_str(), value.c_str());
      reset_config(k->name);
      EXPECT_EQ(entry(config_entries(), k->name).value, want) << name << " for " << k->name;
      EXPECT_EQ(entry(config_entries(), k->name).source, "environment (" + name + ")");
      reset_config(k->name);
      ++checked;
    }
  }
  EXPECT_GE(checked, 5u);  // DEBUG, SOCKET_IFNAME, two for the trace buffer, the stop timeout
}

TEST(ConfigTest, TorchsNamesAreReadInTheirOrder) {
  ScopedEnv cohort("COHORT_TRACE_BUFFER_ENTRIES", nullptr);
  ScopedEnv newer("TORCH_FR_BUFFER_SIZE", nullptr);
  ScopedEnv older("TORCH_NCCL_TRACE_BUFFER_SIZE", "77");
  reset_config("COHORT_TRACE_BUFFER_ENTRIES");
  EXPECT_EQ(config_int(knobs::kTraceBufferEntries), 77);
  {
    ScopedEnv both("TORCH_FR_BUFFER_SIZE", "55");
    reset_config("COHORT_TRACE_BUFFER_ENTRIES");
    EXPECT_EQ(config_int(knobs::kTraceBufferEntries), 55);
  }
  reset_config("COHORT_TRACE_BUFFER_ENTRIES");
}

}  // namespace
}  // namespace cohort
