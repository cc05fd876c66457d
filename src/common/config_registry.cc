// The config registry: the one place where COHORT_* knobs get their values.
// This and the default process group are cohort's only global mutable state.
#include "common/config_registry.h"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "cohort/config.h"
#include "cohort/errors.h"
#include "common/split.h"

namespace cohort {
namespace {

const char* type_name(KnobType type) {
  switch (type) {
    case KnobType::kBool:
      return "bool";
    case KnobType::kInt:
      return "int";
    case KnobType::kFloat:
      return "float";
    case KnobType::kString:
      return "string";
    case KnobType::kChoice:
      return "choice";
  }
  return "?";
}

bool parse_bool(const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "TRUE" || v == "on" || v == "yes") return *out = true, true;
  if (v == "0" || v == "false" || v == "FALSE" || v == "off" || v == "no") return *out = false, true;
  return false;
}

bool parse_int(const std::string& v, int64_t* out) {
  if (v.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = x;
  return true;
}

bool parse_float(const std::string& v, double* out) {
  if (v.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (errno != 0 || *end != '\0') return false;
  *out = x;
  return true;
}

bool in_choices(const KnobSpec& knob, const std::string& v) {
  std::stringstream ss(knob.choices ? knob.choices : "");
  std::string choice;
  while (std::getline(ss, choice, '|')) {
    if (choice == v) return true;
  }
  return false;
}

bool has_range(const KnobSpec& knob) {
  return knob.type == KnobType::kInt || knob.type == KnobType::kFloat;
}

// in_range: finite (strtod takes "inf" and "nan") and within the knob's
// declared range.
bool in_range(const KnobSpec& knob, double v) {
  return std::isfinite(v) && v >= knob.min_value && v <= knob.max_value;
}

// number_text writes a range end without a trailing ".000000".
std::string number_text(double v) {
  std::ostringstream out;
  out << std::setprecision(15) << v;
  return out.str();
}

std::string range_text(const KnobSpec& knob) {
  return "from " + number_text(knob.min_value) + " to " + number_text(knob.max_value);
}

// validate throws InvalidArgument when `value` does not fit `knob`'s type
// (and range).
void validate(const KnobSpec& knob, const std::string& value, const char* from) {
  bool ok = true;
  bool b;
  int64_t i;
  double d;
  switch (knob.type) {
    case KnobType::kBool:
      ok = parse_bool(value, &b);
      break;
    case KnobType::kInt:
      ok = parse_int(value, &i) && in_range(knob, static_cast<double>(i));
      break;
    case KnobType::kFloat:
      ok = parse_float(value, &d) && in_range(knob, d);
      break;
    case KnobType::kString:
      break;
    case KnobType::kChoice:
      ok = in_choices(knob, value);
      break;
  }
  if (!ok) {
    std::string expected = knob.type == KnobType::kChoice ? std::string("one of ") + knob.choices
                                                          : std::string("a ") + type_name(knob.type);
    if (has_range(knob)) expected += " " + range_text(knob);
    throw InvalidArgument(std::string(knob.name) + " (from " + from + ") is '" +
                          (knob.secret ? "<secret>" : value) + "', expected " + expected);
  }
}

struct Value {
  std::string text;
  std::string source;
};

class Registry {
 public:
  // Never destroyed: threads that outlive main (a group's monitor, in a
  // process that exits without destroying its groups) still read knobs
  // while the statics of other files go.
  static Registry& instance() {
    static Registry* registry = new Registry;  // owned by the process, see above
    return *registry;
  }

  const KnobSpec& find(const std::string& name) const {
    for (const KnobSpec* k : knobs::kAllKnobs) {
      if (name == k->name) return *k;
    }
    throw InvalidArgument("unknown config knob '" + name + "' (cohort-info lists them all)");
  }

  Value value(const KnobSpec& knob) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(knob.name);
    if (it != values_.end()) return it->second;
    Value v{knob.default_value, "default"};
    if (const char* env = std::getenv(knob.name)) {
      validate(knob, env, "the environment");
      v = Value{env, "environment"};
    } else if (auto torch = torch_value(knob)) {
      v = *torch;
    }
    values_.emplace(knob.name, v);
    return v;
  }

  // torch_value is the first of the knob's torch variables that is set,
  // validated as the knob's own value would be.
  static std::optional<Value> torch_value(const KnobSpec& knob) {
    if (!knob.torch_names) return std::nullopt;
    for (const std::string& name : split(knob.torch_names, '|')) {
      const char* env = std::getenv(name.c_str());
      if (!env) continue;
      std::string text = env;
      if (knob.type == KnobType::kChoice) {
        for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      const std::string from = "the environment, as torch's " + name;
      try {
        validate(knob, text, from.c_str());
      } catch (const InvalidArgument&) {
        validate(knob, env, from.c_str());  // throws, naming the value as it was written
        throw;
      }
      return Value{text, "environment (" + name + ")"};
    }
    return std::nullopt;
  }

  void set(const KnobSpec& knob, const std::string& text) {
    validate(knob, text, "set_config");
    std::lock_guard<std::mutex> lock(mu_);
    values_[knob.name] = Value{text, "set_config"};
    generation_.fetch_add(1);
  }

  void reset(const KnobSpec& knob) {
    std::lock_guard<std::mutex> lock(mu_);
    values_.erase(knob.name);
    generation_.fetch_add(1);
  }

  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::map<std::string, Value> values_;  // cache; guarded by mu_
  std::atomic<uint64_t> generation_{0};
};

}  // namespace

bool config_bool(const KnobSpec& knob) {
  bool b = false;
  parse_bool(Registry::instance().value(knob).text, &b);
  return b;
}

int64_t config_int(const KnobSpec& knob) {
  int64_t i = 0;
  parse_int(Registry::instance().value(knob).text, &i);
  return i;
}

double config_float(const KnobSpec& knob) {
  double d = 0;
  parse_float(Registry::instance().value(knob).text, &d);
  return d;
}

std::string config_string(const KnobSpec& knob) {
  return Registry::instance().value(knob).text;
}

uint64_t config_generation() {
  return Registry::instance().generation();
}

std::vector<ConfigEntry> config_entries() {
  std::vector<ConfigEntry> out;
  for (const KnobSpec* k : knobs::kAllKnobs) {
    Value v = Registry::instance().value(*k);
    std::string shown = v.text;
    if (k->secret) shown = v.text.empty() ? "" : "<set>";
    std::string type = type_name(k->type);
    if (k->type == KnobType::kChoice) type += " (" + std::string(k->choices) + ")";
    if (has_range(*k)) type += " (" + range_text(*k) + ")";
    out.push_back(ConfigEntry{k->name, type, shown, k->default_value, v.source, k->doc,
                              k->torch_names ? k->torch_names : ""});
  }
  return out;
}

void set_config(const std::string& name, const std::string& value) {
  Registry& r = Registry::instance();
  r.set(r.find(name), value);
}

void reset_config(const std::string& name) {
  Registry& r = Registry::instance();
  r.reset(r.find(name));
}

}  // namespace cohort
