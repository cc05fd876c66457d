// config.h: every COHORT_* knob, in one registry.
//
// Each knob is declared once (name, type, default, doc) in
// src/common/knobs.h. Its value comes from, in order: set_config() in this
// process, the environment variable of the same name, the default.
// `cohort-info` prints all of them with their values and sources.
#pragma once

#include <string>
#include <vector>

namespace cohort {

// ConfigEntry describes one knob and its current value.
struct ConfigEntry {
  std::string name;
  std::string type;   // "bool", "int", "float", "string" or "choice"
  std::string value;  // current value (a secret shows as "<set>")
  std::string default_value;
  std::string source;  // "default", "environment", "environment (TORCH_NAME)" or "set_config"
  std::string doc;
  std::string torch_names;  // torch's variables for the same thing, '|'-separated; may be empty
};

// config_entries lists every knob in declaration order.
std::vector<ConfigEntry> config_entries();

// set_config sets knob `name` to `value` for this process. Throws
// InvalidArgument naming the knob when it does not exist or when `value` is
// not of its type.
void set_config(const std::string& name, const std::string& value);

// reset_config forgets set_config() for `name`, so that the environment or
// the default applies again.
void reset_config(const std::string& name);

}  // namespace cohort
